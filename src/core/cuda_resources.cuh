// RAII owners of the CUDA resources the backends use: device and pinned host arrays, streams,
// events and NVTX ranges. Destructors never throw (errors there are ignored: at process exit the
// runtime may already be unloading); everything else goes through SCIPROXY_CUDA_CHECK.
#pragma once

#include <cuda_runtime.h>
#include <nvtx3/nvToolsExt.h>

#include <cstddef>
#include <utility>

#include "core/cuda_check.cuh"

namespace sciproxy::cuda_detail {

// count elements of U in device memory; allocate() replaces what was there.
template <class U>
class DeviceArray {
 public:
  DeviceArray() = default;
  explicit DeviceArray(std::size_t count) { allocate(count); }
  DeviceArray(DeviceArray&& o) noexcept
      : ptr_(std::exchange(o.ptr_, nullptr)), count_(std::exchange(o.count_, 0)) {}
  DeviceArray& operator=(DeviceArray&& o) noexcept {
    std::swap(ptr_, o.ptr_);
    std::swap(count_, o.count_);
    return *this;
  }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  ~DeviceArray() {
    if (ptr_) (void)cudaFree(ptr_);
  }
  void allocate(std::size_t count) {
    if (ptr_) (void)cudaFree(ptr_);
    ptr_ = nullptr;
    count_ = 0;
    if (count == 0) return;
    SCIPROXY_CUDA_CHECK(cudaMalloc(&ptr_, count * sizeof(U)));
    count_ = count;
  }
  U* get() const { return ptr_; }
  std::size_t size() const { return count_; }
  std::size_t bytes() const { return count_ * sizeof(U); }

 private:
  U* ptr_ = nullptr;
  std::size_t count_ = 0;
};

// Page-locked host memory, so that copies to and from the device run asynchronously.
template <class U>
class PinnedArray {
 public:
  PinnedArray() = default;
  PinnedArray(const PinnedArray&) = delete;
  PinnedArray& operator=(const PinnedArray&) = delete;
  ~PinnedArray() {
    if (ptr_) (void)cudaFreeHost(ptr_);
  }
  void allocate(std::size_t count) {
    if (ptr_) (void)cudaFreeHost(ptr_);
    ptr_ = nullptr;
    if (count == 0) return;
    SCIPROXY_CUDA_CHECK(cudaMallocHost(&ptr_, count * sizeof(U)));
  }
  U* get() const { return ptr_; }

 private:
  U* ptr_ = nullptr;
};

// Synchronises before it destroys the stream, so that nothing still in flight touches buffers
// released after it (declare streams after the buffers they use).
class Stream {
 public:
  Stream() { SCIPROXY_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;
  ~Stream() {
    (void)cudaStreamSynchronize(stream_);
    (void)cudaStreamDestroy(stream_);
    (void)cudaGetLastError();
  }
  cudaStream_t get() const { return stream_; }

 private:
  cudaStream_t stream_ = nullptr;
};

// timing: an event that elapsed_seconds can measure from or to; Event{false} only orders
// streams, and is cheaper.
class Event {
 public:
  explicit Event(bool timing = true) {
    SCIPROXY_CUDA_CHECK(
        cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
  }
  Event(Event&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  Event& operator=(Event&& o) noexcept {
    std::swap(event_, o.event_);
    return *this;
  }
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;
  ~Event() {
    if (event_) (void)cudaEventDestroy(event_);
  }
  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) const { SCIPROXY_CUDA_CHECK(cudaEventRecord(event_, stream)); }

 private:
  cudaEvent_t event_ = nullptr;
};

// Seconds between two recorded timing events (both complete: synchronise first).
inline double elapsed_seconds(const Event& from, const Event& to) {
  float ms = 0;
  SCIPROXY_CUDA_CHECK(cudaEventElapsedTime(&ms, from.get(), to.get()));
  return 1e-3 * static_cast<double>(ms);
}

// A named range on the Nsight Systems timeline for the life of this object.
class NvtxRange {
 public:
  explicit NvtxRange(const char* name) { nvtxRangePushA(name); }
  ~NvtxRange() { nvtxRangePop(); }
  NvtxRange(const NvtxRange&) = delete;
  NvtxRange& operator=(const NvtxRange&) = delete;
};

}  // namespace sciproxy::cuda_detail
