// sciproxy._sciproxy: thin nanobind bindings over the C++ API (include/sciproxy/stack.hpp and
// core/device.hpp). The Python layer (python/sciproxy/stack.py, with python/sciproxy/_args.py)
// normalises the arguments — dtype casts, int32 indices, contiguity — so these functions accept
// exactly the C++ types and never convert implicitly: an array that reaches them is used in place,
// and `result` is written in place. Every check of values is done (once) by the C++ library; its
// exceptions become ValueError (InvalidArgument), TypeError (TypeError) or RuntimeError (every
// other Error).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <span>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "result_pool.hpp"
#include "sciproxy/core/communicator.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/resources.hpp"
#include "sciproxy/core/roofline.hpp"
#include "sciproxy/core/version.hpp"
#include "sciproxy/stack.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using sciproxy::python::Interruptible;

namespace {

using sciproxy::python::describe;
using sciproxy::python::dtype_name;
using sciproxy::python::numpy_empty;

template <class T>
using Trace = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
template <class T>
using Matrix = nb::ndarray<const T, nb::ndim<2>, nb::c_contig, nb::device::cpu>;
template <class T>
using Output = nb::ndarray<T, nb::c_contig, nb::device::cpu>;
using Indices = nb::ndarray<const std::int32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>;
using IndexMatrix = nb::ndarray<const std::int32_t, nb::ndim<2>, nb::c_contig, nb::device::cpu>;

// One persistent plan per CUDA device, so repeated GPU calls reuse their device buffers. A plan
// is not thread-safe, and the GIL is released during a call, so each has its own mutex. The map is
// never destroyed by a static destructor (CUDA may be gone by then): release_plans(), registered
// with atexit by the Python layer, frees the buffers while the runtime is still alive.
struct PlanSlot {
  std::mutex mutex;
  sciproxy::stack::ParstackPlan plan;
};
std::mutex plans_mutex;
auto* plans = new std::map<int, std::unique_ptr<PlanSlot>>();

PlanSlot& plan_slot(int device_index) {
  std::lock_guard<std::mutex> lock(plans_mutex);
  auto& slot = (*plans)[device_index];
  if (!slot) slot = std::make_unique<PlanSlot>();
  return *slot;
}

void release_plans() {
  nb::gil_scoped_release release;
  std::lock_guard<std::mutex> lock(plans_mutex);
  for (auto& [index, slot] : *plans) {
    std::lock_guard<std::mutex> slot_lock(slot->mutex);
    slot->plan = sciproxy::stack::ParstackPlan();
  }
  plans->clear();
}

nb::dict plan_counters(int device_index) {
  nb::dict d;
  sciproxy::stack::ParstackPlan::Counters c;
  {
    std::lock_guard<std::mutex> lock(plans_mutex);
    auto it = plans->find(device_index);
    if (it != plans->end()) {
      std::lock_guard<std::mutex> slot_lock(it->second->mutex);
      c = it->second->plan.counters();
    }
  }
  d["device_allocations"] = c.device_allocations;
  d["bytes_host_to_device"] = c.bytes_host_to_device;
  d["bytes_device_to_host"] = c.bytes_device_to_host;
  d["device_bytes_held"] = c.device_bytes_held;
  return d;
}

// parstack(arrays, offsets, shifts, weights, method, lengthout, offsetout, result, accumulate,
//          clamp_max_at_zero, nparallel, device, autotune) -> (result, offsetout)
// `result` None: a new array, (nshifts, lengthout) for method 0, (nshifts,) for method 1.
template <class T>
nb::tuple parstack(nb::sequence arrays, Indices offsets, IndexMatrix shifts, Matrix<T> weights,
                   int method, std::int64_t lengthout, std::int32_t offsetout, nb::object result,
                   bool accumulate, bool clamp_max_at_zero, int nparallel,
                   const std::string& device_spec, bool autotune, std::int64_t comm, int shift_sets,
                   int result_layout) {
  namespace st = sciproxy::stack;

  // Keep the trace arrays referenced (they hold their Python objects) until the call returns.
  const std::size_t ntraces = nb::len(arrays);
  std::vector<Trace<T>> traces(ntraces);
  std::vector<std::span<const T>> spans(ntraces);
  for (std::size_t i = 0; i < ntraces; ++i) {
    nb::object item = arrays[i];
    if (!nb::try_cast<Trace<T>>(item, traces[i], /*convert=*/false))
      sciproxy::throw_type_error("arrays[" + std::to_string(i) + "]",
                                 std::string("a C-contiguous 1-D ") + dtype_name<T>() + " array",
                                 describe(item));
    spans[i] = std::span<const T>(traces[i].data(), traces[i].shape(0));
  }

  st::ParstackInput<T> in;
  in.traces = spans;
  in.traces_name = "arrays";  // this API's name: the library's messages name it
  in.offsets = std::span<const std::int32_t>(offsets.data(), offsets.size());
  in.shifts = std::span<const std::int32_t>(shifts.data(), shifts.size());
  in.weights = std::span<const T>(weights.data(), weights.size());
  in.nshifts = static_cast<std::int64_t>(shifts.shape(0));
  // The shapes are the Python layer's (it checks weights against shifts before flattening); the
  // library checks the sizes, the values and the method.

  st::ParstackOptions opt;
  opt.method = static_cast<st::Method>(method);
  opt.lengthout = lengthout;
  opt.offsetout = offsetout;
  opt.accumulate = accumulate;
  opt.clamp_max_at_zero = clamp_max_at_zero;
  opt.nparallel = nparallel;
  opt.autotune = autotune;
  opt.comm = sciproxy::Communicator::from_handle(comm, "comm");
  opt.shift_sets = static_cast<st::ShiftSets>(shift_sets);
  opt.result_layout = static_cast<st::ResultLayout>(result_layout);

  const sciproxy::Device device = sciproxy::select_device(device_spec);

  st::Extent extent;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    // The shapes and the window; parstack below scans the samples (one pass, not two).
    extent = st::parstack_extent(in, opt, st::SampleCheck::skip);
  }
  // The rows this rank receives: every shift set, or none (rank 0 receives them), or its own.
  const st::ShiftBlock block = st::parstack_shift_block(in.nshifts, opt);
  const bool root = opt.comm.rank() == 0;
  const std::int64_t rows = !opt.comm.distributed()                                ? in.nshifts
                            : opt.result_layout == st::ResultLayout::own           ? block.count
                            : opt.result_layout == st::ResultLayout::root && !root ? 0
                                                                                   : block.total;
  const std::int64_t size = st::parstack_result_size(rows, extent, opt.method);

  nb::object out_object;
  if (result.is_none()) {
    if (opt.accumulate)
      sciproxy::throw_invalid_argument("result", "an array to accumulate into", "None");
    // Every element is written (zeros where no trace reaches), so reused memory is fine.
    out_object = opt.method == st::Method::stack
                     ? sciproxy::python::pooled_empty<T>({rows, extent.lengthout})
                     : numpy_empty({rows}, dtype_name<T>());
  } else {
    out_object = result;
  }
  Output<T> out;
  if (!nb::try_cast<Output<T>>(out_object, out, /*convert=*/false))
    sciproxy::throw_type_error("result",
                               std::string("a writable C-contiguous ") + dtype_name<T>() + " array",
                               describe(out_object));
  if (static_cast<std::int64_t>(out.size()) != size)
    sciproxy::throw_invalid_argument("result",
                                     opt.method == st::Method::stack
                                         ? "nshifts x lengthout = " + std::to_string(rows) + " x " +
                                               std::to_string(extent.lengthout) + " = " +
                                               std::to_string(size) + " elements"
                                         : "nshifts = " + std::to_string(size) + " elements",
                                     describe(out_object));

  const std::span<T> out_span(out.data(), out.size());
  if (device.backend == sciproxy::Backend::cuda) {
    PlanSlot& slot = plan_slot(device.index);
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    std::lock_guard<std::mutex> lock(slot.mutex);
    extent = st::parstack<T>(device, in, out_span, opt, nullptr, &slot.plan);
  } else {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    extent = st::parstack<T>(device, in, out_span, opt, nullptr, nullptr);
  }
  return nb::make_tuple(out_object, extent.offsetout);
}

template <class T>
nb::object argmax(Matrix<T> a, int nparallel, bool pyrocko_compat) {
  const auto rows = static_cast<std::int64_t>(a.shape(0));
  const auto cols = static_cast<std::int64_t>(a.shape(1));
  nb::object out_object = numpy_empty({cols}, "uint32");
  auto out = nb::cast<nb::ndarray<std::uint32_t, nb::ndim<1>, nb::c_contig, nb::device::cpu>>(
      out_object, false);
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    sciproxy::stack::argmax<T>(std::span<const T>(a.data(), a.size()), rows, cols,
                               std::span<std::uint32_t>(out.data(), out.size()), nparallel,
                               pyrocko_compat);
  }
  return out_object;
}

nb::dict info() {
  nb::dict d;
  d["version"] = sciproxy::build_info().version;
  d["git_commit"] = sciproxy::build_info().git_commit;
  d["compiler"] = sciproxy::build_info().compiler;
  d["build_type"] = sciproxy::build_info().build_type;
  d["build_flags"] = sciproxy::build_info().flags;
  nb::list backends;
  backends.append("reference");
  backends.append("cpu");
  if (sciproxy::cuda_compiled()) backends.append("cuda");
  d["backends"] = backends;
  d["cuda_compiled"] = sciproxy::cuda_compiled();
  d["mpi_compiled"] = sciproxy::mpi_compiled();
  d["mpi_library"] = sciproxy::mpi_library_version();
  nb::list devices;
  for (const auto& c : sciproxy::cuda_devices()) {
    nb::dict dev;
    dev["index"] = c.index;
    dev["name"] = c.name;
    dev["compute_capability"] =
        std::to_string(c.compute_major) + "." + std::to_string(c.compute_minor);
    dev["multiprocessors"] = c.multiprocessors;
    dev["memory_gib"] = c.memory_gib;
    devices.append(dev);
  }
  d["cuda_device_count"] = sciproxy::cuda_device_count();
  d["cuda_devices"] = devices;
  if (nb::len(devices) == 0) d["cuda_unavailable_reason"] = sciproxy::cuda_unavailable_reason();
  d["threads"] = sciproxy::max_threads();
  d["cpu_model"] = sciproxy::cpu_model();
  d["auto_device"] = sciproxy::select_device("auto").name();
  return d;
}

}  // namespace

void register_wave(nb::module_& m);       // wave_bindings.cpp
void register_tti_demo(nb::module_& m);   // tti_demo_bindings.cpp
void register_tti(nb::module_& m);        // tti_bindings.cpp
void register_recording(nb::module_& m);  // recording_bindings.cpp
void register_specex(nb::module_& m);     // specex_bindings.cpp
void register_diffusion(nb::module_& m);  // diffusion_bindings.cpp

NB_MODULE(_sciproxy, m) {
  m.doc() = "sciproxy C++ kernels (use the sciproxy package, not this module, directly)";
  m.attr("__version__") = sciproxy::build_info().version;
  m.attr("MAX_THREADS") = sciproxy::kMaxThreads;  // the largest nparallel (core/resources.hpp)

  nb::register_exception_translator([](const std::exception_ptr& p, void*) {
    try {
      std::rethrow_exception(p);
    } catch (const sciproxy::InvalidArgument& e) {
      PyErr_SetString(PyExc_ValueError, e.what());
    } catch (const sciproxy::TypeError& e) {
      PyErr_SetString(PyExc_TypeError, e.what());
    } catch (const sciproxy::OutOfMemory& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const sciproxy::Cancelled& e) {
      // A signal handler's exception (KeyboardInterrupt) is already set when Python's own
      // signal check stopped the run; otherwise the caller's cancellation stopped it.
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_KeyboardInterrupt, e.what());
    } catch (const sciproxy::Error& e) {
      PyErr_SetString(PyExc_RuntimeError, e.what());
    } catch (const std::bad_alloc&) {
      // Every call checks its estimate against the available memory first (core/resources);
      // an allocation can still fail when other processes took the memory meanwhile.
      PyErr_SetString(PyExc_MemoryError,
                      "out of memory: an allocation failed although the call's estimate fitted "
                      "the memory available when it started; try a smaller problem");
    }
  });

  m.def("parstack_float32", &parstack<float>, "arrays"_a, "offsets"_a.noconvert(),
        "shifts"_a.noconvert(), "weights"_a.noconvert(), "method"_a, "lengthout"_a, "offsetout"_a,
        "result"_a.none(), "accumulate"_a, "clamp_max_at_zero"_a, "nparallel"_a, "device"_a,
        "autotune"_a, "comm"_a, "shift_sets"_a, "result_layout"_a);
  m.def("parstack_float64", &parstack<double>, "arrays"_a, "offsets"_a.noconvert(),
        "shifts"_a.noconvert(), "weights"_a.noconvert(), "method"_a, "lengthout"_a, "offsetout"_a,
        "result"_a.none(), "accumulate"_a, "clamp_max_at_zero"_a, "nparallel"_a, "device"_a,
        "autotune"_a, "comm"_a, "shift_sets"_a, "result_layout"_a);
  m.def("argmax_float32", &argmax<float>, "a"_a.noconvert(), "nparallel"_a, "pyrocko_compat"_a);
  m.def("argmax_float64", &argmax<double>, "a"_a.noconvert(), "nparallel"_a, "pyrocko_compat"_a);
  m.def("info", &info, "What this build contains and what hardware is present.");
  m.def(
      "select_device", [](const std::string& spec) { return sciproxy::select_device(spec).name(); },
      "spec"_a,
      "The backend a device string resolves to here (\"auto\" -> \"cpu\" or \"cuda:0\").");
  m.def("plan_counters", &plan_counters, "device_index"_a,
        "Allocation and transfer counters of the persistent parstack plan of one CUDA device.");
  m.def("release_plans", &release_plans, "Frees the device buffers kept between parstack calls.");
  m.def(
      "release_cached_results", [] { return sciproxy::python::ResultPool::instance().release(); },
      "Frees the memory of large results that are gone, kept for the next calls; returns its "
      "bytes.");
  m.def(
      "cached_result_bytes", [] { return sciproxy::python::ResultPool::instance().idle_bytes(); },
      "Bytes of the memory of large results that are gone, kept for the next calls.");
  register_wave(m);
  register_tti_demo(m);
  register_tti(m);
  register_recording(m);
  register_specex(m);
  register_diffusion(m);
}
