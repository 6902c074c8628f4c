// Cancellation (include/sciproxy/core/cancel.hpp): the process-wide request a signal handler may
// set, and each thread's list of CancelScopes, which poll_cancellation() checks between steps.
#include "sciproxy/core/cancel.hpp"

#include <fmt/format.h>

#include <utility>

#include "sciproxy/core/error.hpp"

namespace sciproxy {

namespace {

// Lock-free, so a signal handler may store to it (a std::atomic that takes a lock may not).
std::atomic<bool> requested{false};
static_assert(std::atomic<bool>::is_always_lock_free);

}  // namespace

struct CancelScope::State {
  const std::atomic<bool>* token = nullptr;
  const volatile int* flag = nullptr;
  Callback callback;
  std::chrono::steady_clock::duration interval{};
  std::chrono::steady_clock::time_point last{};  // the last call of callback (or the scope's start)
  bool fired = false;                            // callback said stop: stays stopped
  State* next = nullptr;                         // the scope opened before this one
};

namespace {

thread_local CancelScope::State* scopes = nullptr;  // the newest scope of this thread

CancelScope::State* open_scope(const std::atomic<bool>* token, const volatile int* flag,
                               CancelScope::Callback callback, std::chrono::milliseconds interval) {
  auto* s = new CancelScope::State;
  s->token = token;
  s->flag = flag;
  s->callback = std::move(callback);
  s->interval = interval;
  // The first call of the callback comes one interval after the start: a short call never pays
  // for it (Python's takes the GIL).
  s->last = std::chrono::steady_clock::now();
  s->next = scopes;
  scopes = s;
  return s;
}

}  // namespace

void request_cancellation() noexcept {
  requested.store(true, std::memory_order_relaxed);
}

void clear_cancellation_request() noexcept {
  requested.store(false, std::memory_order_relaxed);
}

bool cancellation_requested() noexcept {
  return requested.load(std::memory_order_relaxed);
}

CancelScope::CancelScope(const std::atomic<bool>* token, Callback callback,
                         std::chrono::milliseconds interval)
    : state_(open_scope(token, nullptr, std::move(callback), interval)) {}

CancelScope::CancelScope(Callback callback, std::chrono::milliseconds interval)
    : state_(open_scope(nullptr, nullptr, std::move(callback), interval)) {}

CancelScope::CancelScope(const volatile int* flag, Callback callback,
                         std::chrono::milliseconds interval)
    : state_(open_scope(nullptr, flag, std::move(callback), interval)) {}

CancelScope::~CancelScope() {
  // Normally the newest; the C ABI's scope (one per thread, replaced at will) may not be.
  for (State** p = &scopes; *p != nullptr; p = &(*p)->next)
    if (*p == state_) {
      *p = state_->next;
      break;
    }
  delete state_;
}

bool poll_cancellation() noexcept {
  if (requested.load(std::memory_order_relaxed)) return true;
  bool callbacks = false;
  for (const CancelScope::State* s = scopes; s != nullptr; s = s->next) {
    if (s->fired) return true;
    if (s->token != nullptr && s->token->load(std::memory_order_acquire)) return true;
    if (s->flag != nullptr && *s->flag != 0) return true;
    callbacks = callbacks || static_cast<bool>(s->callback);
  }
  if (!callbacks) return false;
  const auto now = std::chrono::steady_clock::now();
  for (CancelScope::State* s = scopes; s != nullptr; s = s->next) {
    if (!s->callback || now - s->last < s->interval) continue;
    s->last = now;
    bool stop = true;  // a callback that throws stops the run
    try {
      stop = s->callback();
    } catch (...) {
    }
    if (stop) {
      s->fired = true;
      return true;
    }
  }
  return false;
}

void throw_cancelled(std::string_view what, std::int64_t done, std::int64_t total,
                     std::string_view unit) {
  const char* why =
      requested.load(std::memory_order_relaxed) ? " (the process was interrupted)" : "";
  if (unit == "steps")
    throw Cancelled(fmt::format("{}: cancelled at step {} of {}{}", what, done, total, why));
  throw Cancelled(fmt::format("{}: cancelled after {} of {} {}{}", what, done, total, unit, why));
}

}  // namespace sciproxy
