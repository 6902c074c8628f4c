// CUDA backend of the scalar propagator: the kernels scalar_backward and scalar_born_backward
// (kernels.hpp), the exact adjoints of the forward passes of cuda_forward.cu, steps nt-1 down to
// 0 (docs/kernels/scalar-wave.md). P (the u^{t-1} slot, see cuda_step.cuh) is negated once on
// upload and the output once before download. The source gradient of step t is lambda at the
// source cells, read before the step back; the receiver-data gradient of step t is added to
// ubar^t after it. grad_v accumulates lambda * stored * store_interval at the stored steps, into
// grad_v itself when v is batched or there is one shot, else into per-shot partials that one
// final pass adds up in shot order. Born: the coupled background adjoint
//   g = v^2 dt^2 lambda + 2 v scatter dt^2 lambda_sc   in place of v^2 dt^2 lambda,
// and the plain adjoint of the scattered field; it stores nothing.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "sciproxy/core/cancel.hpp"
#include "wave/cuda_propagation.cuh"

namespace sciproxy::wave::kernels::cuda {

namespace {

// The adjoint pass, plain (one field; accumulates grad_v from `stored` when both are given) or
// Born (two: the coupled background adjoint and the scattered one). traffic[k]: the receiver-data
// gradients added to field k and the source gradients read from it.
template <bool BORN, class T>
void backward_pass(const ScalarProblem<T>& p, const std::array<ScalarFields<T>, 2>& fields,
                   const std::array<Traffic<T>, 2>& traffic, const T* stored, T* grad_v,
                   int device_index, Timers* timers) {
  constexpr int nfields = BORN ? 2 : 1;
  cuda_detail::require_device("scalar", device_index);
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  if (p.nshots == 0 || p.nt == 0) return;  // nothing moves

  const bool storing = stored && grad_v && p.store_interval > 0;
  Propagation<T> run(p, nfields);
  const cudaStream_t cs = run.cs();
  const int64_t nsnapshots = storing ? (p.nt + p.store_interval - 1) / p.store_interval : 0;
  // Per-shot accumulators in grad_v itself unless several shots share one model.
  const bool partials = storing && !p.v_batched && p.nshots > 1;
  bool resident = true;
  {
    NvtxRange range("upload");
    run.upload_begin.record(cs);
    run.upload_model(false, BORN);
    for (int k = 0; k < nfields; ++k) {
      run.upload_fields(k, fields[k], true);
      run.negate(run.field[k].prev);  // P = -(adjoint of u^{nt-1})
      run.upload_exchange(k, traffic[k]);
    }
    if (storing) {
      run.upload(run.grad_v, grad_v, run.model_count);
      if (partials) {
        run.grad_v_partials.allocate(static_cast<std::size_t>(run.snapshot));
        run.zero(run.grad_v_partials);
      }
      resident = static_cast<std::size_t>(nsnapshots) * run.snapshot_bytes() <= storage_budget();
      if (resident) {
        run.upload(run.stored_all, stored, nsnapshots * run.snapshot);
      } else {
        run.allocate_ring(nsnapshots, false);
        for (int64_t j = 0; j < std::min<int64_t>(kRingSlots, nsnapshots); ++j)
          run.ring_prefetch(j, nsnapshots, stored);
      }
    }
  }
  {
    NvtxRange range("steps");
    run.steps_begin.record(cs);
    StepArgs<T> args = run.step_args(true);
    args.grad_v = partials ? run.grad_v_partials.get() : run.grad_v.get();
    const StepGrid grid = run.step_grid();
    run.exchange(-1, p.nt - 1);  // source gradient of step nt - 1
    for (int64_t t = p.nt - 1; t >= 0; --t) {
      throw_if_cancelled(
          BORN ? "scalar_born_gradient (cuda backward)" : "scalar_gradient (cuda backward)",
          p.nt - 1 - t, p.nt);
      const bool store_now = storing && t % p.store_interval == 0;
      const int64_t k = storing ? t / p.store_interval : 0;
      const int64_t j = nsnapshots - 1 - k;  // order in which the adjoint needs the snapshots
      run.bind(args);
      args.stored = !store_now ? nullptr
                    : resident ? run.stored_all.get() + k * run.snapshot
                               : run.ring_slot_for_read(j);
      run.template launch_step<false, BORN>(args, grid);
      if (store_now && !resident) run.ring_read(j, nsnapshots, stored);
      run.advance();           // cur: ubar^t, the lambda of step t - 1
      run.exchange(t, t - 1);  // receiver-data gradient of step t, source gradient of t - 1
    }
    for (int k = 0; k < nfields; ++k) run.negate(run.field[k].prev);  // the adjoint of u^{-1} is -P
    if (partials) {
      sum_shots_kernel<T><<<elementwise_grid(run.points), kSmallThreads, 0, cs>>>(
          run.grad_v.get(), run.grad_v_partials.get(), run.points, p.nshots);
      SCIPROXY_CUDA_CHECK_LAUNCH("scalar sum_shots_kernel");
    }
  }
  {
    NvtxRange range("download");
    run.download_begin.record(cs);
    for (int k = 0; k < nfields; ++k) {
      run.download_fields(k, fields[k]);
      run.download_reads(k, traffic[k].read);
    }
    if (storing) run.download(grad_v, run.grad_v, run.model_count);
    run.end.record(cs);
    SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(cs));
  }
  run.record_timers(timers);
}

}  // namespace

template <class T>
SCIPROXY_WAVE_SCALAR_BACKWARD(T) {
  constexpr const char* kName = "scalar_backward";
  check_problem(p, fields, kName);
  const bool storing = p.store_interval > 0;
  if (p.nshots > 0 && p.nt > 0) {
    if (p.nreceivers > 0 && !grad_receivers) invalid(kName, "grad_receivers must be given");
    if (p.nsources > 0 && !grad_sources) invalid(kName, "grad_sources must be given");
    if (storing && (!stored || !grad_v))
      invalid(kName, "stored and grad_v must be given when store_interval > 0");
  }
  // Adds the receiver-data gradient, reads the source gradient.
  const Traffic<T> io{grad_receivers, p.receiver_cells, p.nreceivers,
                      p.source_cells, p.nsources,       grad_sources};
  backward_pass<false>(p, {fields, ScalarFields<T>{}}, {io, Traffic<T>{}},
                       storing ? stored : nullptr, storing ? grad_v : nullptr,
                       context.device_index(), context.timers);
}

template <class T>
SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(T) {
  constexpr const char* kName = "scalar_born_backward";
  check_problem(p, bg, kName);
  check_born(p, sc, kName);
  if (p.nshots > 0 && p.nt > 0) {
    if (p.nreceivers > 0 && !grad_receivers) invalid(kName, "grad_receivers must be given");
    if (p.nbg_receivers > 0 && !grad_bg_receivers)
      invalid(kName, "grad_bg_receivers must be given");
    if (p.nsources > 0 && (!grad_sources || !grad_scattered_sources))
      invalid(kName, "grad_sources and grad_scattered_sources must be given");
  }
  // lambda: the background receivers' data gradient in, the background source gradient out;
  // lambda_sc: the receivers' data gradient in, the scattered source gradient out.
  const Traffic<T> bg_io{grad_bg_receivers, p.bg_receiver_cells, p.nbg_receivers,
                         p.source_cells,    p.nsources,          grad_sources};
  const Traffic<T> sc_io{grad_receivers, p.receiver_cells, p.nreceivers,
                         p.source_cells, p.nsources,       grad_scattered_sources};
  backward_pass<true>(p, {bg, sc}, {bg_io, sc_io}, static_cast<const T*>(nullptr),
                      static_cast<T*>(nullptr), context.device_index(), context.timers);
}

template SCIPROXY_WAVE_SCALAR_BACKWARD(float);
template SCIPROXY_WAVE_SCALAR_BACKWARD(double);
template SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(float);
template SCIPROXY_WAVE_SCALAR_BORN_BACKWARD(double);

}  // namespace sciproxy::wave::kernels::cuda
