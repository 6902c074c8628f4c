// CUDA backend of parstack, delay-and-sum stacking (pyrocko's parstack; docs/kernels/parstack.md):
//
//   R[s, k] = R0[s, k] + sum_i w[s,i] * a_i[k + offsetout - offsets[i] - shifts[s,i]]   (method 0)
//   M[s]    = max(m0, max_k R[s, k]),  m0 = -inf, or 0 with clamp_max_at_zero       (method 1)
//
// counting only samples inside trace i, skipping weights exactly 0; R0 is the caller's result when
// accumulating, else 0.
// The traces are small and reused by every shift set while the output is large, so one thread
// owns a few output samples of one shift set, loops over the traces with the sum in registers,
// and writes each output element once. Method 1 never stores R: each block reduces its tile to a
// partial maximum and a second, tiny pass reduces the partials in a fixed order (deterministic).
//
// A plan's PlanResources keep grow-only device buffers, a stream and events, so repeated calls on
// same-sized problems do no cudaMalloc. A plan is bound to the device of its first call; a call
// on another device releases everything and re-binds (the counters keep counting).
#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>

#include "core/cuda_check.cuh"
#include "core/cuda_resources.cuh"
#include "sciproxy/core/cancel.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/stack.hpp"
#include "stack/kernels.hpp"
#include "stack/math.hpp"

namespace sciproxy::stack::kernels::cuda {

// Grow-only: a call that fits reuses the allocation, so steady-state calls never cudaMalloc.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { (void)cudaFree(ptr_); }

  void reserve(std::size_t bytes, ParstackPlan::Counters& counters) {
    if (bytes <= capacity_) return;
    release(counters);
    const std::size_t rounded = (bytes + 255) / 256 * 256;
    SCIPROXY_CUDA_CHECK(cudaMalloc(&ptr_, rounded));
    capacity_ = rounded;
    counters.device_allocations += 1;
    counters.device_bytes_held += static_cast<double>(rounded);
  }
  void release(ParstackPlan::Counters& counters) noexcept {
    if (!ptr_) return;
    (void)cudaFree(ptr_);
    counters.device_bytes_held -= static_cast<double>(capacity_);
    ptr_ = nullptr;
    capacity_ = 0;
  }
  template <class U>
  U* as() const {
    return static_cast<U*>(ptr_);
  }

 private:
  void* ptr_ = nullptr;
  std::size_t capacity_ = 0;
};

// Pinned staging for the inputs: lets the copies run asynchronously at full link speed, and packs
// the separate host traces into one concatenation. Not counted as a device allocation.
class PinnedBuffer {
 public:
  PinnedBuffer() = default;
  PinnedBuffer(const PinnedBuffer&) = delete;
  PinnedBuffer& operator=(const PinnedBuffer&) = delete;
  ~PinnedBuffer() { release(); }

  void reserve(std::size_t bytes) {
    if (bytes <= capacity_) return;
    release();
    SCIPROXY_CUDA_CHECK(cudaMallocHost(&ptr_, bytes));
    capacity_ = bytes;
  }
  void release() noexcept {
    if (!ptr_) return;
    (void)cudaFreeHost(ptr_);
    ptr_ = nullptr;
    capacity_ = 0;
  }
  std::byte* data() const { return static_cast<std::byte*>(ptr_); }

 private:
  void* ptr_ = nullptr;
  std::size_t capacity_ = 0;
};

using cuda_detail::NvtxRange;

// The device side of a ParstackPlan (kernels.hpp), created on the plan's first cuda call.
struct PlanResources {
  ParstackPlan::Counters& counters;  // the plan's, which outlive these resources
  int device = -1;                   // bound device, -1 before the first call
  cudaStream_t stream = nullptr;
  // Stream order: upload_begin, uploads, kernel_begin, kernels, download_begin, download, end.
  cudaEvent_t upload_begin = nullptr, kernel_begin = nullptr, download_begin = nullptr,
              end = nullptr;
  DeviceBuffer traces, lengths, trace_offsets, offsets, shifts, weights, result, partials;
  PinnedBuffer staging;

  explicit PlanResources(ParstackPlan::Counters& plan_counters) : counters(plan_counters) {}
  PlanResources(const PlanResources&) = delete;
  PlanResources& operator=(const PlanResources&) = delete;
  ~PlanResources() { unbind(); }

  // Makes device_index current and the plan's resources live on it.
  void bind(int device_index) {
    if (device == device_index) {
      SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
      return;
    }
    unbind();
    SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
    device = device_index;  // from here on, unbind() cleans up whatever was created
    SCIPROXY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    for (cudaEvent_t* event : {&upload_begin, &kernel_begin, &download_begin, &end})
      SCIPROXY_CUDA_CHECK(cudaEventCreate(event));
  }

  // Never throws: runs in the destructor, possibly while the CUDA runtime is shutting down.
  void unbind() noexcept {
    if (device < 0) return;
    int previous = -1;
    const bool restore = cudaGetDevice(&previous) == cudaSuccess;
    (void)cudaSetDevice(device);
    if (stream) (void)cudaStreamSynchronize(stream);
    for (DeviceBuffer* b :
         {&traces, &lengths, &trace_offsets, &offsets, &shifts, &weights, &result, &partials})
      b->release(counters);
    staging.release();
    for (cudaEvent_t* event : {&upload_begin, &kernel_begin, &download_begin, &end}) {
      if (*event) (void)cudaEventDestroy(*event);
      *event = nullptr;
    }
    if (stream) (void)cudaStreamDestroy(stream);
    stream = nullptr;
    if (restore) (void)cudaSetDevice(previous);
    (void)cudaGetLastError();
    device = -1;
  }
};

namespace {

constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
// Samples per thread: amortises the per-trace bookkeeping over several independent loads and FMAs.
constexpr int kItems = 8;
constexpr int kTile = kThreads * kItems;  // output samples per block
constexpr std::int64_t kMaxGridY = 65535;
constexpr std::int64_t kMaxGridX = 2147483647;

template <class T>
struct KernelArgs {
  const T* traces;                    // concatenated
  const std::int64_t* lengths;        // (ntraces)
  const std::int64_t* trace_offsets;  // (ntraces): where trace i starts in `traces`
  const std::int32_t* offsets;        // (ntraces)
  const std::int32_t* shifts;         // (nshifts, ntraces)
  const T* weights;                   // (nshifts, ntraces)
  T* result;                          // method 0: (nshifts, lengthout)
  T* partials;                        // method 1: (ntiles, nshifts)
  std::int64_t ntraces, nshifts, lengthout, ntiles;
  std::int32_t offsetout;
  bool accumulate;  // method 0: start from the uploaded result instead of 0
};

// One trace as seen from one tile of one shift set.
template <class T>
struct TraceEntry {
  std::int64_t base;        // index in the concatenation of tile sample 0 (may lie outside)
  std::int32_t begin, end;  // tile samples [begin, end) that the trace covers
  T weight;
};

template <class T>
__device__ __forceinline__ T larger(T a, T b) {
  return b > a ? b : a;  // NaN never replaces a running maximum, as in the host loops
}

// Block = (tile of kTile output samples, one shift set). Per chunk of kThreads traces, the block
// first lists, in trace order, the traces that touch its tile with a non-zero weight (an ordered
// ballot compaction, so the sum runs in the reference's order), then every thread adds them into
// its kItems registers. Tiles that a trace covers fully take the branch without bounds checks.
// The minimum of 4 resident blocks caps registers at 64: left to itself, ptxas 13.0 chose 48 and
// spilled on sm_90 (fp64).
template <class T, bool kMax>
__global__ void __launch_bounds__(kThreads, 4) parstack_kernel(const KernelArgs<T> a) {
  __shared__ TraceEntry<T> entries[kThreads];
  __shared__ int warp_counts[kWarps];
  __shared__ T warp_max[kWarps];
  const int tid = static_cast<int>(threadIdx.x);
  const int lane = tid & 31;
  const int warp = tid >> 5;
  const unsigned lanes_below = (1u << lane) - 1u;

  for (std::int64_t s = blockIdx.y; s < a.nshifts; s += gridDim.y) {
    const std::int32_t* shifts_s = a.shifts + s * a.ntraces;
    const T* weights_s = a.weights + s * a.ntraces;

    for (std::int64_t tile = blockIdx.x; tile < a.ntiles; tile += gridDim.x) {
      const std::int64_t k0 = tile * kTile;
      const int tile_length = static_cast<int>(a.lengthout - k0 < kTile ? a.lengthout - k0 : kTile);
      T* row = kMax ? nullptr : a.result + s * a.lengthout + k0;

      T acc[kItems];
#pragma unroll
      for (int j = 0; j < kItems; ++j) {
        const int idx = tid + j * kThreads;
        acc[j] = (!kMax && a.accumulate && idx < tile_length) ? row[idx] : T(0);
      }

      for (std::int64_t first = 0; first < a.ntraces; first += kThreads) {
        const std::int64_t i = first + tid;
        bool active = false;
        TraceEntry<T> e{};
        if (i < a.ntraces) {
          const T w = __ldg(weights_s + i);
          if (w != T(0)) {
            const std::int64_t start =
                trace_start(__ldg(a.offsets + i), __ldg(shifts_s + i), a.offsetout);
            const Overlap ov = trace_overlap(start, __ldg(a.lengths + i), a.lengthout);
            const std::int64_t b = (ov.begin > k0 ? ov.begin : k0) - k0;
            const std::int64_t en = (ov.end < k0 + tile_length ? ov.end : k0 + tile_length) - k0;
            if (b < en) {
              active = true;
              e.base = __ldg(a.trace_offsets + i) - start + k0;
              e.begin = static_cast<std::int32_t>(b);
              e.end = static_cast<std::int32_t>(en);
              e.weight = w;
            }
          }
        }
        const unsigned ballot = __ballot_sync(0xffffffffu, active);
        if (lane == 0) warp_counts[warp] = __popc(ballot);
        __syncthreads();
        int before = 0, count = 0;
#pragma unroll
        for (int w = 0; w < kWarps; ++w) {
          const int c = warp_counts[w];
          before += w < warp ? c : 0;
          count += c;
        }
        if (active) entries[before + __popc(ballot & lanes_below)] = e;
        __syncthreads();

        for (int n = 0; n < count; ++n) {
          const TraceEntry<T> t = entries[n];
          if (t.begin == 0 && t.end == kTile) {
            const T* src = a.traces + t.base + tid;
#pragma unroll
            for (int j = 0; j < kItems; ++j) acc[j] += t.weight * __ldg(src + j * kThreads);
          } else {
#pragma unroll
            for (int j = 0; j < kItems; ++j) {
              const int idx = tid + j * kThreads;
              if (idx >= t.begin && idx < t.end)
                acc[j] += t.weight * __ldg(a.traces + (t.base + idx));
            }
          }
        }
        __syncthreads();  // the next chunk rewrites entries and warp_counts
      }

      if constexpr (!kMax) {
#pragma unroll
        for (int j = 0; j < kItems; ++j) {
          const int idx = tid + j * kThreads;
          if (idx < tile_length) row[idx] = acc[j];
        }
      } else {
        T m = max_initial_value<T>(false);
#pragma unroll
        for (int j = 0; j < kItems; ++j)
          if (tid + j * kThreads < tile_length) m = larger(m, acc[j]);
#pragma unroll
        for (int offset = 16; offset > 0; offset >>= 1)
          m = larger(m, __shfl_down_sync(0xffffffffu, m, offset));
        if (lane == 0) warp_max[warp] = m;
        __syncthreads();
        if (tid == 0) {
          T block_max = warp_max[0];
#pragma unroll
          for (int w = 1; w < kWarps; ++w) block_max = larger(block_max, warp_max[w]);
          a.partials[tile * a.nshifts + s] = block_max;
        }
        __syncthreads();  // warp_max is reused by the next tile
      }
    }
  }
}

// Method 1, second pass: tiles in ascending order, starting from pyrocko's 0 or from -inf.
template <class T>
__global__ void max_over_tiles_kernel(const T* __restrict__ partials, std::int64_t ntiles,
                                      std::int64_t nshifts, bool clamp_max_at_zero,
                                      T* __restrict__ out) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t s = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       s < nshifts; s += stride) {
    T m = max_initial_value<T>(clamp_max_at_zero);
    for (std::int64_t t = 0; t < ntiles; ++t) m = larger(m, partials[t * nshifts + s]);
    out[s] = m;
  }
}

constexpr std::size_t align_up(std::size_t bytes) {
  return (bytes + 255) / 256 * 256;
}

void destroy_resources(PlanResources* resources) {
  delete resources;
}

double elapsed_seconds(cudaEvent_t from, cudaEvent_t to) {
  float ms = 0;
  SCIPROXY_CUDA_CHECK(cudaEventElapsedTime(&ms, from, to));
  return 1e-3 * static_cast<double>(ms);
}

}  // namespace

template <class T>
SCIPROXY_STACK_PARSTACK(T) {
  auto* state = stack::detail::ParstackPlanAccess::state(plan);
  if (!state) throw InvalidArgument("parstack: the ParstackPlan was moved from; pass a live plan");
  const int device_index = ctx.device_index();
  cuda_detail::require_device("parstack", device_index);
  if (!state->device)
    state->device = decltype(state->device)(new PlanResources(state->counters), &destroy_resources);
  PlanResources* impl = state->device.get();
  const bool max_method = p.method == Method::max;
  const std::int64_t ntraces = p.ntraces, nshifts = p.nshifts, lengthout = p.lengthout;

  sciproxy::cuda_detail::DeviceGuard guard;
  impl->bind(device_index);
  // A call that threw may have left copies in flight that still read the staging buffer.
  SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(impl->stream));

  if (nshifts == 0) return;
  if (lengthout == 0) {  // an empty window: no samples, so the maximum is its start value
    if (max_method) std::fill(result, result + nshifts, max_initial_value<T>(p.clamp_max_at_zero));
    return;
  }
  if (!max_method && ntraces == 0) {  // an empty sum
    if (!p.accumulate) std::fill(result, result + nshifts * lengthout, T(0));
    return;
  }

  const std::size_t pairs = static_cast<std::size_t>(nshifts) * static_cast<std::size_t>(ntraces);
  const std::int64_t ntiles = (lengthout + kTile - 1) / kTile;
  std::int64_t total_samples = 0;
  for (std::int64_t i = 0; i < ntraces; ++i) total_samples += p.lengths[i];

  // Sections of the pinned staging buffer and their device buffers, in upload order.
  const std::size_t traces_bytes = static_cast<std::size_t>(total_samples) * sizeof(T);
  const std::size_t index_bytes = static_cast<std::size_t>(ntraces) * sizeof(std::int64_t);
  const std::size_t offsets_bytes = static_cast<std::size_t>(ntraces) * sizeof(std::int32_t);
  const std::size_t shifts_bytes = pairs * sizeof(std::int32_t);
  const std::size_t weights_bytes = pairs * sizeof(T);
  const std::size_t result_count =
      max_method ? static_cast<std::size_t>(nshifts)
                 : static_cast<std::size_t>(nshifts) * static_cast<std::size_t>(lengthout);
  const std::size_t result_bytes = result_count * sizeof(T);
  const std::size_t partials_bytes =
      max_method ? static_cast<std::size_t>(ntiles) * static_cast<std::size_t>(nshifts) * sizeof(T)
                 : 0;

  const std::size_t at_traces = 0;
  const std::size_t at_lengths = at_traces + align_up(traces_bytes);
  const std::size_t at_trace_offsets = at_lengths + align_up(index_bytes);
  const std::size_t at_offsets = at_trace_offsets + align_up(index_bytes);
  const std::size_t at_shifts = at_offsets + align_up(offsets_bytes);
  const std::size_t at_weights = at_shifts + align_up(shifts_bytes);
  const std::size_t staging_bytes = at_weights + align_up(weights_bytes);

  ParstackPlan::Counters& counters = state->counters;
  impl->staging.reserve(staging_bytes);
  impl->traces.reserve(traces_bytes, counters);
  impl->lengths.reserve(index_bytes, counters);
  impl->trace_offsets.reserve(index_bytes, counters);
  impl->offsets.reserve(offsets_bytes, counters);
  impl->shifts.reserve(shifts_bytes, counters);
  impl->weights.reserve(weights_bytes, counters);
  impl->result.reserve(result_bytes, counters);
  impl->partials.reserve(partials_bytes, counters);

  // Only an accumulating call needs the old result on the device; otherwise the kernel starts
  // from 0 and overwrites every element, whatever the host array held.
  const bool accumulate = !max_method && p.accumulate;

  std::byte* staging = impl->staging.data();
  {
    auto* lengths = reinterpret_cast<std::int64_t*>(staging + at_lengths);
    auto* trace_offsets = reinterpret_cast<std::int64_t*>(staging + at_trace_offsets);
    std::int64_t position = 0;
    for (std::int64_t i = 0; i < ntraces; ++i) {
      const std::int64_t n = p.lengths[i];
      if (n > 0)
        std::memcpy(staging + at_traces + static_cast<std::size_t>(position) * sizeof(T),
                    p.traces[i], static_cast<std::size_t>(n) * sizeof(T));
      lengths[i] = n;
      trace_offsets[i] = position;
      position += n;
    }
    if (offsets_bytes) std::memcpy(staging + at_offsets, p.offsets, offsets_bytes);
    if (shifts_bytes) std::memcpy(staging + at_shifts, p.shifts, shifts_bytes);
    if (weights_bytes) std::memcpy(staging + at_weights, p.weights, weights_bytes);
  }

  cudaStream_t stream = impl->stream;
  auto upload = [&](DeviceBuffer& to, std::size_t at, std::size_t bytes) {
    if (bytes == 0) return;
    SCIPROXY_CUDA_CHECK(
        cudaMemcpyAsync(to.as<void>(), staging + at, bytes, cudaMemcpyHostToDevice, stream));
  };

  {
    NvtxRange range("upload");
    SCIPROXY_CUDA_CHECK(cudaEventRecord(impl->upload_begin, stream));
    upload(impl->traces, at_traces, traces_bytes);
    upload(impl->lengths, at_lengths, index_bytes);
    upload(impl->trace_offsets, at_trace_offsets, index_bytes);
    upload(impl->offsets, at_offsets, offsets_bytes);
    upload(impl->shifts, at_shifts, shifts_bytes);
    upload(impl->weights, at_weights, weights_bytes);
    if (accumulate)
      SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(impl->result.as<T>(), result, result_bytes,
                                          cudaMemcpyHostToDevice, stream));
  }
  counters.bytes_host_to_device +=
      static_cast<double>(traces_bytes + 2 * index_bytes + offsets_bytes + shifts_bytes +
                          weights_bytes + (accumulate ? result_bytes : 0));

  // One kernel does every shift: the only points a stop can take effect are around it.
  throw_if_cancelled("parstack (cuda)", 0, nshifts, "shifts");
  {
    NvtxRange range("kernel");
    SCIPROXY_CUDA_CHECK(cudaEventRecord(impl->kernel_begin, stream));
    KernelArgs<T> args{};
    args.traces = impl->traces.as<T>();
    args.lengths = impl->lengths.as<std::int64_t>();
    args.trace_offsets = impl->trace_offsets.as<std::int64_t>();
    args.offsets = impl->offsets.as<std::int32_t>();
    args.shifts = impl->shifts.as<std::int32_t>();
    args.weights = impl->weights.as<T>();
    args.result = impl->result.as<T>();
    args.partials = impl->partials.as<T>();
    args.ntraces = ntraces;
    args.nshifts = nshifts;
    args.lengthout = lengthout;
    args.ntiles = ntiles;
    args.offsetout = p.offsetout;
    args.accumulate = accumulate;

    const dim3 grid(static_cast<unsigned>(std::min(ntiles, kMaxGridX)),
                    static_cast<unsigned>(std::min(nshifts, kMaxGridY)));
    if (max_method) {
      parstack_kernel<T, true><<<grid, kThreads, 0, stream>>>(args);
      SCIPROXY_CUDA_CHECK_LAUNCH("parstack_kernel<max>");
      const std::int64_t blocks =
          std::min<std::int64_t>((nshifts + kThreads - 1) / kThreads, kMaxGridX);
      max_over_tiles_kernel<T><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(
          args.partials, ntiles, nshifts, p.clamp_max_at_zero, args.result);
      SCIPROXY_CUDA_CHECK_LAUNCH("max_over_tiles_kernel");
    } else {
      parstack_kernel<T, false><<<grid, kThreads, 0, stream>>>(args);
      SCIPROXY_CUDA_CHECK_LAUNCH("parstack_kernel<stack>");
    }
  }

  {
    NvtxRange range("download");
    SCIPROXY_CUDA_CHECK(cudaEventRecord(impl->download_begin, stream));
    SCIPROXY_CUDA_CHECK(cudaMemcpyAsync(result, impl->result.as<T>(), result_bytes,
                                        cudaMemcpyDeviceToHost, stream));
    SCIPROXY_CUDA_CHECK(cudaEventRecord(impl->end, stream));
    SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(stream));
  }
  counters.bytes_device_to_host += static_cast<double>(result_bytes);

  if (ctx.timers) {
    ctx.timers->record("upload", elapsed_seconds(impl->upload_begin, impl->kernel_begin));
    ctx.timers->record("kernel", elapsed_seconds(impl->kernel_begin, impl->download_begin));
    ctx.timers->record("download", elapsed_seconds(impl->download_begin, impl->end));
  }
}

template SCIPROXY_STACK_PARSTACK(float);
template SCIPROXY_STACK_PARSTACK(double);

}  // namespace sciproxy::stack::kernels::cuda
