// Random parstack problems for the tests that compare backends
// (tests/stack/test_stack_backend.cpp).
#pragma once

#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "sciproxy/stack.hpp"

namespace sciproxy::test {

struct ProblemShape {
  int max_traces = 5, min_length = 5, max_length = 10;
  int shift_range = 5;  // offsets and shifts in [-shift_range, shift_range]
  int max_shifts = 10;
  // > 0: moveouts of neighbouring sources. Each shift set's shifts are the previous set's plus a
  // step in [-moveout_step, moveout_step] (one set in five starts afresh), so that the cpu
  // backend stacks most pairs of sets together and some apart.
  int moveout_step = 0;
  int min_traces = 1;
};

template <class T>
struct RandomProblem {
  std::vector<std::vector<T>> data;
  std::vector<std::span<const T>> traces;
  std::vector<std::int32_t> offsets, shifts;
  std::vector<T> weights;
  std::int64_t nshifts = 0;

  RandomProblem(std::mt19937_64& rng, const ProblemShape& shape) {
    std::uniform_int_distribution<int> ntraces_d(shape.min_traces, shape.max_traces),
        length_d(shape.min_length, shape.max_length),
        shift_d(-shape.shift_range, shape.shift_range), nshifts_d(1, shape.max_shifts),
        zero_d(0, 9);
    std::uniform_real_distribution<double> value_d(-1.0, 1.0);
    const int ntraces = ntraces_d(rng);
    nshifts = nshifts_d(rng);
    data.resize(ntraces);
    for (auto& t : data) {
      t.resize(length_d(rng));
      for (auto& v : t) v = static_cast<T>(value_d(rng));
    }
    traces.assign(data.begin(), data.end());
    for (int i = 0; i < ntraces; ++i) offsets.push_back(shift_d(rng));
    std::uniform_int_distribution<int> step_d(-shape.moveout_step, shape.moveout_step);
    for (std::int64_t j = 0; j < nshifts * ntraces; ++j) {
      const bool afresh = shape.moveout_step == 0 || j < ntraces || zero_d(rng) < 2;
      shifts.push_back(afresh ? shift_d(rng) : shifts[j - ntraces] + step_d(rng));
      weights.push_back(zero_d(rng) == 0 ? T(0) : static_cast<T>(value_d(rng)));  // some weights 0
    }
  }

  stack::ParstackInput<T> input() const { return {traces, offsets, shifts, weights, nshifts}; }
};

// A problem of exact sizes: ntraces traces of lengths in [5/6 length, length], nshifts shift sets,
// shifts in [-shift_range, shift_range], offsets a fifth of that; one weight in ten is 0.
template <class T>
RandomProblem<T> fixed_size_problem(std::uint64_t seed, int ntraces, int length,
                                    std::int64_t nshifts, int shift_range) {
  std::mt19937_64 rng(seed);
  RandomProblem<T> p(rng, {1, 1, 1, 0, 1});  // replaced below, to get exact sizes
  std::uniform_int_distribution<int> length_d(length * 5 / 6, length),
      shift_d(-shift_range, shift_range), zero_d(0, 9);
  std::uniform_real_distribution<double> value_d(-1.0, 1.0);
  p.data.assign(ntraces, {});
  for (auto& t : p.data) {
    t.resize(length_d(rng));
    for (auto& v : t) v = static_cast<T>(value_d(rng));
  }
  p.traces.assign(p.data.begin(), p.data.end());
  p.offsets.clear();
  p.shifts.clear();
  p.weights.clear();
  for (int i = 0; i < ntraces; ++i) p.offsets.push_back(shift_d(rng) / 5);
  for (std::int64_t j = 0; j < nshifts * ntraces; ++j) {
    p.shifts.push_back(shift_d(rng));
    p.weights.push_back(zero_d(rng) == 0 ? T(0) : static_cast<T>(value_d(rng)));
  }
  p.nshifts = nshifts;
  return p;
}

}  // namespace sciproxy::test
