// CUDA backend of the scalar propagator: the kernels scalar_forward and scalar_born_forward
// (kernels.hpp), nt steps of
//   u^{t+1} = v^2 dt^2 W + 2 u^t - u^{t-1},  then u^{t+1}[source] += scaled_source^t,
//   receivers^t = u^t[receiver]   (before the step),
// storing 2 v dt^2 W at the stored steps; Born steps the scattered field
//   u_sc^{t+1} = v^2 dt^2 W(u_sc) + 2 u_sc^t - u_sc^{t-1} + 2 v scatter dt^2 W(u)
// alongside (docs/kernels/scalar-wave.md; Deepwave's scalar.cu in spirit). The step kernels are
// in cuda_step.cuh, the device-resident call in cuda_propagation.cuh.
#include <cuda_runtime.h>

#include <algorithm>
#include <array>
#include <cstdint>

#include "sciproxy/core/cancel.hpp"
#include "wave/cuda_propagation.cuh"

namespace sciproxy::wave::kernels::cuda {

namespace {

// The forward pass, plain (one field; stores 2 v dt^2 W when `stored` is given) or Born (two).
// traffic[k]: what field k exchanges with the host.
template <bool BORN, class T>
void forward_pass(const ScalarProblem<T>& p, const std::array<ScalarFields<T>, 2>& fields,
                  const std::array<Traffic<T>, 2>& traffic, T* stored, int device_index,
                  Timers* timers) {
  constexpr int nfields = BORN ? 2 : 1;
  cuda_detail::require_device("scalar", device_index);
  cuda_detail::DeviceGuard guard;
  SCIPROXY_CUDA_CHECK(cudaSetDevice(device_index));
  if (p.nshots == 0 || p.nt == 0) return;  // nothing moves

  const bool storing = stored && p.store_interval > 0;
  Propagation<T> run(p, nfields);
  const cudaStream_t cs = run.cs();
  const int64_t nsnapshots = storing ? (p.nt + p.store_interval - 1) / p.store_interval : 0;
  bool resident = true;
  {
    NvtxRange range("upload");
    run.upload_begin.record(cs);
    run.upload_model(storing, BORN);
    for (int k = 0; k < nfields; ++k) {
      run.upload_fields(k, fields[k], false);
      run.upload_exchange(k, traffic[k]);
    }
    if (storing) {
      resident = static_cast<std::size_t>(nsnapshots) * run.snapshot_bytes() <= storage_budget();
      if (resident) {
        run.stored_all.allocate(static_cast<std::size_t>(nsnapshots * run.snapshot));
        run.zero(run.stored_all);  // the halo is never written
      } else {
        run.allocate_ring(nsnapshots, true);
      }
    }
  }
  {
    NvtxRange range("steps");
    run.steps_begin.record(cs);
    StepArgs<T> args = run.step_args(false);
    const StepGrid grid = run.step_grid();
    run.exchange(-1, 0);  // receivers of step 0
    for (int64_t t = 0; t < p.nt; ++t) {
      // The host runs ahead of the GPU by the launch queue; a stop waits for what is queued.
      throw_if_cancelled(BORN ? "scalar_born (cuda)" : "scalar (cuda)", t, p.nt);
      const bool store_now = storing && t % p.store_interval == 0;
      const int64_t k = storing ? t / p.store_interval : 0;
      run.bind(args);
      args.stored = !store_now ? nullptr
                    : resident ? run.stored_all.get() + k * run.snapshot
                               : run.ring_slot_for_write(k);
      run.template launch_step<true, BORN>(args, grid);
      if (store_now && !resident) run.ring_written(k, stored);
      run.advance();           // cur: u^{t+1}
      run.exchange(t, t + 1);  // sources of step t into u^{t+1}, receivers of step t + 1
    }
  }
  {
    NvtxRange range("download");
    run.download_begin.record(cs);
    for (int k = 0; k < nfields; ++k) {
      run.download_fields(k, fields[k]);
      run.download_reads(k, traffic[k].read);
    }
    if (storing && resident) run.download(stored, run.stored_all, nsnapshots * run.snapshot);
    if (storing && !resident)  // the last snapshot copies count to this region
      SCIPROXY_CUDA_CHECK(
          cudaStreamWaitEvent(cs, run.ring_done[(nsnapshots - 1) % kRingSlots].get(), 0));
    run.end.record(cs);
    SCIPROXY_CUDA_CHECK(cudaStreamSynchronize(cs));
    if (storing && !resident)
      for (int64_t k = std::max<int64_t>(0, nsnapshots - kRingSlots); k < nsnapshots; ++k)
        run.ring_drain(k, stored);
  }
  run.record_timers(timers);
}

}  // namespace

template <class T>
SCIPROXY_WAVE_SCALAR_FORWARD(T) {
  constexpr const char* kName = "scalar_forward";
  check_problem(p, fields, kName);
  const bool storing = p.store_interval > 0;
  if (p.nshots > 0 && p.nt > 0) {
    if (p.nsources > 0 && !sources) invalid(kName, "sources must be given");
    if (p.nreceivers > 0 && !receivers) invalid(kName, "receivers must be given");
    if (storing && !stored) invalid(kName, "stored must be given when store_interval > 0");
  }
  const Traffic<T> io{sources,          p.source_cells, p.nsources,
                      p.receiver_cells, p.nreceivers,   receivers};
  forward_pass<false>(p, {fields, ScalarFields<T>{}}, {io, Traffic<T>{}},
                      storing ? stored : nullptr, context.device_index(), context.timers);
}

// Born stores nothing: store_interval is ignored, as by the host backends.
template <class T>
SCIPROXY_WAVE_SCALAR_BORN_FORWARD(T) {
  constexpr const char* kName = "scalar_born_forward";
  check_problem(p, bg, kName);
  check_born(p, sc, kName);
  if (p.nshots > 0 && p.nt > 0) {
    if (p.nsources > 0 && (!sources || !scattered_sources))
      invalid(kName, "sources and scattered_sources must be given");
    if (p.nreceivers > 0 && !receivers) invalid(kName, "receivers must be given");
    if (p.nbg_receivers > 0 && !bg_receivers) invalid(kName, "bg_receivers must be given");
  }
  // The background's sources and receivers, the scattered field's sources and receivers.
  const Traffic<T> bg_io{sources,         p.source_cells, p.nsources, p.bg_receiver_cells,
                         p.nbg_receivers, bg_receivers};
  const Traffic<T> sc_io{scattered_sources, p.source_cells, p.nsources,
                         p.receiver_cells,  p.nreceivers,   receivers};
  forward_pass<true>(p, {bg, sc}, {bg_io, sc_io}, static_cast<T*>(nullptr), context.device_index(),
                     context.timers);
}

template SCIPROXY_WAVE_SCALAR_FORWARD(float);
template SCIPROXY_WAVE_SCALAR_FORWARD(double);
template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(float);
template SCIPROXY_WAVE_SCALAR_BORN_FORWARD(double);

}  // namespace sciproxy::wave::kernels::cuda
