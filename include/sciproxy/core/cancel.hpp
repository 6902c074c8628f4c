// Cancellation: how a caller stops a long run between steps.
//
// Every long call (the time loops of wave and tti, parstack's batches of shifts) polls between
// steps, on the calling thread and outside OpenMP parallel regions (inside one, its thread 0
// polls and the team leaves together). When a stop was asked for, the call throws
// sciproxy::Cancelled ("scalar: cancelled at step 1234 of 100000"), frees what it allocated
// (temporary storage included) and leaves its outputs unspecified: a cancelled call's outputs
// must not be used. A stop takes one step (or one batch) at most.
//
// Three ways to ask, all checked by every poll:
// - the process-wide request, request_cancellation(): async-signal-safe (one lock-free atomic
//   store), for a SIGINT/SIGTERM handler such as the CLI's. It stays set until
//   clear_cancellation_request().
// - a token, std::atomic<bool> set to true from any thread, installed for the calling thread by
//   a CancelScope; read at every poll.
// - a callback bool() installed by a CancelScope, called on the calling thread at most once per
//   interval (steady clock, 50 ms by default), so it may be costly (Python's bindings take the
//   GIL in it and check for signals). Returning true (or throwing) stops the run.
// Scopes nest: every scope alive on the thread is checked. The C ABI's form is
// sciproxy_set_cancellation (c/core.h).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <string_view>

namespace sciproxy {

// The process-wide request: async-signal-safe, for signal handlers.
void request_cancellation() noexcept;
void clear_cancellation_request() noexcept;
bool cancellation_requested() noexcept;  // the process-wide request only

class CancelScope {
 public:
  using Callback = std::function<bool()>;
  static constexpr std::chrono::milliseconds kDefaultInterval{50};

  // Installs, for this thread's calls until the scope ends, a token and/or a callback (either
  // may be null). The token must outlive the scope.
  explicit CancelScope(const std::atomic<bool>* token, Callback callback = {},
                       std::chrono::milliseconds interval = kDefaultInterval);
  explicit CancelScope(Callback callback, std::chrono::milliseconds interval = kDefaultInterval);
  // The C ABI's form: a flag that any non-zero value sets (read at every poll).
  CancelScope(const volatile int* flag, Callback callback,
              std::chrono::milliseconds interval = kDefaultInterval);
  ~CancelScope();
  CancelScope(const CancelScope&) = delete;
  CancelScope& operator=(const CancelScope&) = delete;

  struct State;  // the thread's list of scopes (cancel.cpp)

 private:
  State* state_;
};

// True when this thread's run should stop: the process-wide request, or any scope of this
// thread (its token or flag; its callback when the interval has passed since the scope's last
// call of it). Once a scope's callback said stop, the scope keeps saying so. Cheap: a few
// atomic loads, plus a clock read where a callback is installed. Calling thread only, never
// from a worker thread of an OpenMP region (callbacks run here).
bool poll_cancellation() noexcept;

// Throws Cancelled("<what>: cancelled at step <done> of <total>"; unit "steps" gives "step",
// any other unit "after <done> of <total> <unit>").
[[noreturn]] void throw_cancelled(std::string_view what, std::int64_t done, std::int64_t total,
                                  std::string_view unit = "steps");
inline void throw_if_cancelled(std::string_view what, std::int64_t done, std::int64_t total,
                               std::string_view unit = "steps") {
  if (poll_cancellation()) throw_cancelled(what, done, total, unit);
}

}  // namespace sciproxy
