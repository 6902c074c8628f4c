// The ceilings of parstack's inner loop on this CPU, one thread: what a multiply-add that loads
// one shifted trace vector costs, as the number of traces (streams) and their alignment vary.
// docs/kernels/parstack.md ("What limits it") quotes its figures. Build and run:
//
//   g++ -O3 -march=native -o /tmp/parstack_loads bench/parstack_loads.cpp && /tmp/parstack_loads
//
// Each row sums `traces` float32 traces of `samples` samples into 8 output vectors (32 bytes)
// held in registers, as src/stack/cpu.cpp does, over 16 shift sets whose shifts are drawn in
// [-spread, spread], and reports GMAC/s (the best of 3 runs of about 2e9 multiply-adds each).
//   aligned     every trace vector starts on a 32-byte boundary (all shifts multiples of 8);
//   shifted     shifts at random: 7 loads in 8 straddle a 32-byte boundary;
//   pairs       two shift sets at a time, both sets' vectors of a trace loaded one after the
//               other (the cpu backend's pairs of neighbouring shift sets);
//   three sets  the same with three shift sets (tried in the backend, not kept);
//   runs of G   G shift sets one after the other over each tile of 8 vectors, each set's
//               accumulators in registers in turn (the cpu backend's runs of neighbouring sets);
//   passes      16 traces per pass over blocks of 128 vectors, partial sums in L1 (100 traces),
//               one shift set at a time or runs of G sets;
//   groups      16 consecutive traces at a time, added by all 16 shift sets to their partial sums
//               over a chunk of 512 vectors (in L2) before the next 16 (the cpu backend's groups).
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <random>
#include <vector>

namespace {

typedef float Vec __attribute__((vector_size(32)));
typedef float VecU __attribute__((vector_size(32), aligned(4), may_alias));
constexpr int W = 8, U = 8;

Vec load(const float* p) {
  return *reinterpret_cast<const VecU*>(p);
}

struct Problem {
  int traces, sets;
  long nvec;
  std::vector<const float*> src;  // [set * traces + trace]: the shifted start of each trace
  std::vector<float> weight;
};

// One shift set at a time: for each block of U output vectors, every trace's U vectors.
[[gnu::noinline]] float one_set(const Problem& p) {
  Vec m{};
  for (int s = 0; s < p.sets; ++s)
    for (long v = 0; v + U <= p.nvec; v += U) {
      Vec acc[U] = {};
      for (int t = 0; t < p.traces; ++t) {
        const float* x = p.src[s * p.traces + t] + v * W;
        const Vec w = Vec{} + p.weight[s * p.traces + t];
        for (int u = 0; u < U; ++u) acc[u] += w * load(x + u * W);
      }
      for (int u = 0; u < U; ++u) m = m > acc[u] ? m : acc[u];
    }
  return m[0];
}

// Two shift sets at a time, trace by trace.
[[gnu::noinline]] float pairs(const Problem& p) {
  Vec m{};
  for (int s = 0; s + 1 < p.sets; s += 2)
    for (long v = 0; v + U <= p.nvec; v += U) {
      Vec a[U] = {}, b[U] = {};
      for (int t = 0; t < p.traces; ++t) {
        const float* x = p.src[s * p.traces + t] + v * W;
        const float* y = p.src[(s + 1) * p.traces + t] + v * W;
        const Vec wx = Vec{} + p.weight[s * p.traces + t];
        const Vec wy = Vec{} + p.weight[(s + 1) * p.traces + t];
        for (int u = 0; u < U; ++u) {
          a[u] += wx * load(x + u * W);
          b[u] += wy * load(y + u * W);
        }
      }
      for (int u = 0; u < U; ++u) m = m > a[u] ? m : a[u];
      for (int u = 0; u < U; ++u) m = m > b[u] ? m : b[u];
    }
  return m[0];
}

// G shift sets at a time, trace by trace, set by set: G x UU accumulators.
template <int G, int UU>
[[gnu::noinline]] float sets_together(const Problem& p) {
  Vec m{};
  for (int s = 0; s + G <= p.sets; s += G)
    for (long v = 0; v + UU <= p.nvec; v += UU) {
      Vec acc[G][UU] = {};
      for (int t = 0; t < p.traces; ++t)
        for (int g = 0; g < G; ++g) {
          const float* x = p.src[(s + g) * p.traces + t] + v * W;
          const Vec w = Vec{} + p.weight[(s + g) * p.traces + t];
          for (int u = 0; u < UU; ++u) acc[g][u] += w * load(x + u * W);
        }
      for (int g = 0; g < G; ++g)
        for (int u = 0; u < UU; ++u) m = m > acc[g][u] ? m : acc[g][u];
    }
  return m[0];
}

// G shift sets one after the other over each tile of U vectors: one set's accumulators at a time,
// the later sets' loads hitting the lines the earlier ones brought to L1.
template <int G>
[[gnu::noinline]] float runs(const Problem& p) {
  Vec m{};
  for (int s = 0; s + G <= p.sets; s += G)
    for (long v = 0; v + U <= p.nvec; v += U)
      for (int g = 0; g < G; ++g) {
        Vec acc[U] = {};
        for (int t = 0; t < p.traces; ++t) {
          const float* x = p.src[(s + g) * p.traces + t] + v * W;
          const Vec w = Vec{} + p.weight[(s + g) * p.traces + t];
          for (int u = 0; u < U; ++u) acc[u] += w * load(x + u * W);
        }
        for (int u = 0; u < U; ++u) m = m > acc[u] ? m : acc[u];
      }
  return m[0];
}

// 16 traces per pass over blocks of 128 vectors, the block's partial sums in L1; G shift sets one
// after the other over each tile of a pass.
template <int G>
[[gnu::noinline]] float passes(const Problem& p) {
  constexpr int kGroup = 16, kBlock = 128;
  alignas(64) static Vec partial[G][kBlock];
  Vec m{};
  for (int s = 0; s + G <= p.sets; s += G)
    for (long b0 = 0; b0 + kBlock <= p.nvec; b0 += kBlock)
      for (int g0 = 0; g0 < p.traces; g0 += kGroup) {
        const int end = std::min(p.traces, g0 + kGroup);
        for (long v = 0; v < kBlock; v += U)
          for (int g = 0; g < G; ++g) {
            Vec acc[U];
            for (int u = 0; u < U; ++u) acc[u] = g0 ? partial[g][v + u] : Vec{};
            for (int t = g0; t < end; ++t) {
              const float* x = p.src[(s + g) * p.traces + t] + (b0 + v) * W;
              const Vec w = Vec{} + p.weight[(s + g) * p.traces + t];
              for (int u = 0; u < U; ++u) acc[u] += w * load(x + u * W);
            }
            if (end < p.traces)
              for (int u = 0; u < U; ++u) partial[g][v + u] = acc[u];
            else
              for (int u = 0; u < U; ++u) m = m > acc[u] ? m : acc[u];
          }
      }
  return m[0];
}

// Groups of 16 consecutive traces, each added by all 16 shift sets to their partial sums over a
// chunk of 512 vectors (in L2) before the next group: the cpu backend's stack_groups, which keeps
// one group's stretch of the traces in L2 while every set reads it.
[[gnu::noinline]] float groups(const Problem& p) {
  constexpr int kGroup = 16, kChunk = 512, kSets = 16;
  alignas(64) static Vec partial[kSets][kChunk];
  Vec m{};
  for (long c0 = 0; c0 + kChunk <= p.nvec; c0 += kChunk)
    for (int g0 = 0; g0 < p.traces; g0 += kGroup) {
      const int end = std::min(p.traces, g0 + kGroup);
      for (int s = 0; s < std::min(p.sets, kSets); ++s)
        for (long v = 0; v < kChunk; v += U) {
          Vec acc[U];
          for (int u = 0; u < U; ++u) acc[u] = g0 ? partial[s][v + u] : Vec{};
          for (int t = g0; t < end; ++t) {
            const float* x = p.src[s * p.traces + t] + (c0 + v) * W;
            const Vec w = Vec{} + p.weight[s * p.traces + t];
            for (int u = 0; u < U; ++u) acc[u] += w * load(x + u * W);
          }
          if (end < p.traces)
            for (int u = 0; u < U; ++u) partial[s][v + u] = acc[u];
          else
            for (int u = 0; u < U; ++u) m = m > acc[u] ? m : acc[u];
        }
    }
  return m[0];
}

// GMAC/s of `kernel` on `traces` traces of `samples` samples and 16 shift sets.
double rate(float (*kernel)(const Problem&), int traces, long samples, int spread, bool aligned) {
  const long pad = spread + 2 * W * U,
             stride = samples + 2 * pad + 16 * 17;  // not a 4 KiB multiple
  std::vector<float> data(static_cast<std::size_t>(traces * stride + 64));
  std::mt19937 rng(1);
  std::uniform_real_distribution<float> value(-1, 1);
  for (float& x : data) x = value(rng);
  float* base = data.data() + (64 - reinterpret_cast<std::uintptr_t>(data.data()) % 64) / 4;
  Problem p{traces, 16, samples / W, {}, {}};
  std::uniform_int_distribution<int> shift(-spread, spread);
  for (int s = 0; s < p.sets; ++s)
    for (int t = 0; t < traces; ++t) {
      const int d = aligned ? shift(rng) / W * W : shift(rng);
      p.src.push_back(base + t * stride + pad + d);
      p.weight.push_back(0.5f + value(rng) / 4);
    }
  const double macs = double(traces) * p.nvec * W * p.sets;
  const int repeats = std::max(1, static_cast<int>(2e9 / macs));
  double best = 0;
  volatile float sink = 0;
  for (int run = 0; run < 3; ++run) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < repeats; ++r) sink = sink + kernel(p);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, macs * repeats / s / 1e9);
  }
  return best;
}

}  // namespace

int main() {
  struct Row {
    const char* what;
    float (*kernel)(const Problem&);
    int traces;
    long samples;
    int spread;
    bool aligned;
  };
  const Row rows[] = {
      {"aligned, 16 traces in L1", one_set, 16, 256, 64, true},
      {"shifted, 16 traces in L1", one_set, 16, 256, 64, false},
      {"shifted, 30 traces in L2 (size a)", one_set, 30, 4096, 10, false},
      {"pairs,   30 traces in L2, shifts +-10", pairs, 30, 4096, 10, false},
      {"3 sets,  30 traces in L2, shifts +-10", sets_together<3, 8>, 30, 4096, 10, false},
      {"shifted, 100 traces in L2 (size c)", one_set, 100, 1024, 10, false},
      {"pairs,   100 traces in L2, shifts +-10", pairs, 100, 1024, 10, false},
      {"shifted, 100 traces beyond L2", one_set, 100, 4096, 10, false},
      {"passes,  100 traces beyond L2", passes<1>, 100, 4096, 10, false},
      {"passes,  100 traces beyond L2, shifts +-2000", passes<1>, 100, 2048, 2000, false},
      {"passes,  100 traces of 30000 (size c)", passes<1>, 100, 30000, 10, false},
      {"runs of 4, 30 traces in L2, shifts +-10", runs<4>, 30, 4096, 10, false},
      {"runs of 8, 30 traces in L2, shifts +-10", runs<8>, 30, 4096, 10, false},
      {"pairs,   100 traces of 30000", pairs, 100, 30000, 10, false},
      {"passes, runs of 4, 100 traces of 30000", passes<4>, 100, 30000, 10, false},
      {"passes, runs of 8, 100 traces of 30000", passes<8>, 100, 30000, 10, false},
      {"passes, runs of 8, 100 traces of 30000, +-100", passes<8>, 100, 30000, 100, false},
      {"passes,  100 traces of 30000, +-100", passes<1>, 100, 30000, 100, false},
      {"passes,  100 traces of 30000, +-2000", passes<1>, 100, 30000, 2000, false},
      {"groups,  100 traces of 30000, +-2000", groups, 100, 30000, 2000, false},
      {"passes,  100 traces of 30000, +-5000", passes<1>, 100, 30000, 5000, false},
      {"groups,  100 traces of 30000, +-5000", groups, 100, 30000, 5000, false},
      {"groups,  100 traces of 30000, +-10", groups, 100, 30000, 10, false},
  };
  std::printf("%-46s %8s\n", "float32, one thread", "GMAC/s");
  for (const Row& r : rows)
    std::printf("%-46s %8.1f\n", r.what, rate(r.kernel, r.traces, r.samples, r.spread, r.aligned));
}
