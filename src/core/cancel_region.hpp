// Cancellation inside an OpenMP parallel region (core/cancel.hpp polls on the calling thread
// only, and nothing may throw out of a region). Thread 0 of the team, the calling thread, polls;
// the others read its decision; after the region the calling thread throws. Private.
#pragma once

#include <omp.h>

#include <atomic>
#include <cstdint>
#include <string_view>

#include "sciproxy/core/cancel.hpp"

namespace sciproxy {

class RegionStop {
 public:
  // Any thread, where the threads run independently (no worksharing construct follows that the
  // others might skip): thread 0 polls, every thread reads the shared decision. `done` is what
  // thread 0 has finished (steps, shifts) for the message.
  bool poll(std::int64_t done) noexcept {
    if (omp_get_thread_num() == 0 && !stop_.load(std::memory_order_relaxed) &&
        poll_cancellation()) {
      done_ = done;
      stop_.store(true, std::memory_order_relaxed);
    }
    return stop_.load(std::memory_order_relaxed);
  }

  // Where every thread of the team takes part in each step (an `omp for` per step, with its
  // barrier): call publish(t) before the step's `omp for` and agreed(t) after it; every thread
  // gets the same answer from agreed(t), so all leave the loop at the same step. Thread 0 writes
  // slot t % 2 before the barrier of step t; the others read it after that barrier, and thread 0
  // writes that slot again only after the barrier of step t + 1, once every thread has read it.
  void publish(std::int64_t t, std::int64_t done) noexcept {
    if (omp_get_thread_num() != 0) return;
    slot_[t & 1].store(poll(done), std::memory_order_relaxed);
  }
  bool agreed(std::int64_t t) const noexcept {
    return slot_[t & 1].load(std::memory_order_relaxed);
  }

  bool stopped() const noexcept { return stop_.load(std::memory_order_relaxed); }

  // After the region, on the calling thread.
  void throw_if_stopped(std::string_view what, std::int64_t total,
                        std::string_view unit = "steps") const {
    if (stopped()) throw_cancelled(what, done_, total, unit);
  }

 private:
  std::atomic<bool> stop_{false};
  std::atomic<bool> slot_[2] = {false, false};
  std::int64_t done_ = 0;  // written by thread 0 once, read after the region
};

}  // namespace sciproxy
