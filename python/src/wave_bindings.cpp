// sciproxy._sciproxy, wave part: bindings of the scalar propagator (include/sciproxy/wave.hpp).
// The Python layer (python/sciproxy/wave.py) normalises the arguments to exactly these types —
// C-contiguous arrays of the model's dtype, int64 locations, the options as a dict of plain
// Python values — so nothing is converted here; the library checks every value. Results are
// handed to numpy without a copy (each array owns the std::vector it was computed in). The GIL
// is released while the propagator runs.
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/wave.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using sciproxy::python::Interruptible;

namespace {

namespace wv = sciproxy::wave;

using sciproxy::python::Array;
using sciproxy::python::describe;
using sciproxy::python::dtype_name;
using sciproxy::python::Locations;
using sciproxy::python::span_of;
using sciproxy::python::to_numpy;

template <class T>
Array<T> array_of(nb::handle h, const std::string& name) {
  Array<T> a;
  if (!nb::try_cast<Array<T>>(h, a, /*convert=*/false))
    sciproxy::throw_type_error(name, std::string("a C-contiguous ") + dtype_name<T>() + " array",
                               describe(h));
  return a;
}

Locations locations_of(nb::handle h, const std::string& name) {
  Locations a;
  if (!nb::try_cast<Locations>(h, a, /*convert=*/false))
    sciproxy::throw_type_error(name, "a C-contiguous int64 array", describe(h));
  return a;
}

// Options: the dict the Python layer builds (every key present).
wv::ScalarOptions options_of(const nb::dict& d) {
  wv::ScalarOptions o;
  o.accuracy = nb::cast<int>(d["accuracy"]);
  const auto pml = nb::cast<std::vector<std::int64_t>>(d["pml_width"]);
  const auto pad = nb::cast<std::vector<std::int64_t>>(d["survey_pad"]);
  for (std::size_t i = 0; i < o.pml_width.size() && i < pml.size(); ++i) o.pml_width[i] = pml[i];
  for (std::size_t i = 0; i < o.survey_pad.size() && i < pad.size(); ++i) o.survey_pad[i] = pad[i];
  if (!d["origin"].is_none()) {
    const auto origin = nb::cast<std::vector<std::int64_t>>(d["origin"]);
    o.origin.emplace();
    o.origin->fill(0);
    for (std::size_t i = 0; i < o.origin->size() && i < origin.size(); ++i)
      (*o.origin)[i] = origin[i];
  }
  o.pml_freq = nb::cast<double>(d["pml_freq"]);
  o.max_vel = nb::cast<double>(d["max_vel"]);
  o.model_gradient_sampling_interval =
      nb::cast<std::int64_t>(d["model_gradient_sampling_interval"]);
  o.freq_taper_frac = nb::cast<double>(d["freq_taper_frac"]);
  o.time_pad_frac = nb::cast<double>(d["time_pad_frac"]);
  o.time_taper = nb::cast<bool>(d["time_taper"]);
  const auto storage = nb::cast<std::string>(d["storage_mode"]);
  if (storage == "device")
    o.storage = wv::StorageMode::device;
  else if (storage == "cpu" || storage == "host")
    o.storage = wv::StorageMode::host;
  else if (storage == "disk")
    o.storage = wv::StorageMode::disk;
  else if (storage == "none")
    o.storage = wv::StorageMode::none;
  else
    sciproxy::throw_invalid_argument("storage_mode", "'device', 'cpu', 'disk' or 'none'",
                                     "'" + storage + "'");
  o.storage_compression = nb::cast<bool>(d["storage_compression"]);
  o.storage_directory = nb::cast<std::string>(d["storage_path"]);
  o.nparallel = nb::cast<int>(d["nparallel"]);
  o.autotune = d.contains("autotune") && nb::cast<bool>(d["autotune"]);
  if (d.contains("comm")) {  // MPI: the Python layer checked the names and their pairing
    o.comm = sciproxy::Communicator::from_handle(nb::cast<std::int64_t>(d["comm"]), "comm");
    o.shots = static_cast<sciproxy::RankItems>(nb::cast<int>(d["shots"]));
    o.results = static_cast<sciproxy::ResultLayout>(nb::cast<int>(d["results"]));
  }
  if (d.contains("cpu_tuning")) {
    wv::ScalarCpuTuning& t = o.cpu;
    const std::pair<const char*, std::int64_t*> keys[] = {
        {"sweep_steps", &t.sweep_steps},
        {"sweep_cache_bytes", &t.sweep_cache_bytes},
        {"tiles_per_thread", &t.tiles_per_thread},
        {"rows_per_block", &t.rows_per_block},
        {"batch_bytes_per_thread", &t.batch_bytes_per_thread},
        {"prefetch_rows", &t.prefetch_rows}};
    for (const auto& [key, value] : nb::cast<nb::dict>(d["cpu_tuning"])) {
      const auto name = nb::cast<std::string>(key);
      auto it = std::find_if(std::begin(keys), std::end(keys),
                             [&](const auto& k) { return name == k.first; });
      if (it == std::end(keys))
        sciproxy::throw_invalid_argument(
            "cpu_tuning", "keys of ScalarCpuTuning (sweep_steps, sweep_cache_bytes, ...)",
            "'" + name + "'");
      *it->second = nb::cast<std::int64_t>(value);
    }
  }
  return o;
}

// The shots whose outputs this rank receives: all of them, or none off rank 0 when the results go
// to rank 0 (the Python layer computes it, with the communicator's rank).
std::int64_t held_shots(const nb::dict& options, std::int64_t nshots) {
  return options.contains("held_shots") ? nb::cast<std::int64_t>(options["held_shots"]) : nshots;
}

// The arrays of one call; ScalarInput only points into them.
template <class T>
struct Inputs {
  Array<T> v, amplitudes;
  Locations source_locations, receiver_locations;
  wv::ScalarInput<T> in;
};

template <class T>
Inputs<T> inputs_of(nb::handle v, std::int64_t nmodels, int ndim,
                    const std::vector<std::int64_t>& shape, const std::vector<double>& spacing,
                    double dt, std::int64_t nt, std::int64_t nshots, std::int64_t nsources,
                    std::int64_t nreceivers, nb::handle amplitudes, nb::handle source_locations,
                    nb::handle receiver_locations) {
  Inputs<T> x;
  x.v = array_of<T>(v, "v");
  x.amplitudes = array_of<T>(amplitudes, "source_amplitudes");
  x.source_locations = locations_of(source_locations, "source_locations");
  x.receiver_locations = locations_of(receiver_locations, "receiver_locations");
  sciproxy::require(ndim >= 1 && ndim <= wv::kMaxDims, "ndim", "1, 2 or 3", std::to_string(ndim));
  sciproxy::require(shape.size() == static_cast<std::size_t>(ndim) &&
                        spacing.size() == static_cast<std::size_t>(ndim),
                    "grid_spacing", "one value per dimension of v", std::to_string(spacing.size()));
  x.in.grid.ndim = ndim;
  for (int d = 0; d < ndim; ++d) {
    x.in.grid.shape[d] = shape[d];
    x.in.grid.spacing[d] = spacing[d];
  }
  x.in.v = span_of(x.v);
  x.in.nmodels = nmodels;
  x.in.dt = dt;
  x.in.nt = nt;
  x.in.nshots = nshots;
  x.in.nsources = nsources;
  x.in.nreceivers = nreceivers;
  x.in.source_amplitudes = span_of(x.amplitudes);
  x.in.source_locations = {x.source_locations.data(), x.source_locations.size()};
  x.in.receiver_locations = {x.receiver_locations.data(), x.receiver_locations.size()};
  return x;
}

// (wavefield_0, wavefield_m1, [psi per dim], [zeta per dim]) or None -> a state (copied).
// Every array is [nshots, *padded_shape]; the padded shape is read from wavefield_0.
template <class T>
bool state_of(nb::handle h, int ndim, wv::ScalarState<T>& state, const std::string& what) {
  if (h.is_none()) return false;
  nb::tuple t = nb::cast<nb::tuple>(h);
  if (nb::len(t) != 4)
    throw sciproxy::RuntimeError("scalar: internal error: a state needs 4 entries");
  const Array<T> u = array_of<T>(t[0], what + "wavefield_0");
  if (static_cast<int>(u.ndim()) != ndim + 1)
    sciproxy::throw_invalid_argument(what + "wavefield_0",
                                     "an array of shape [n_shots, *padded_shape]", describe(t[0]));
  for (int d = 0; d < ndim; ++d) state.padded_shape[d] = static_cast<std::int64_t>(u.shape(d + 1));
  auto copy = [](const Array<T>& a) { return std::vector<T>(a.data(), a.data() + a.size()); };
  state.wavefield = copy(u);
  state.previous_wavefield = copy(array_of<T>(t[1], what + "wavefield_m1"));
  nb::list psi = nb::cast<nb::list>(t[2]), zeta = nb::cast<nb::list>(t[3]);
  static const char* names[3] = {"z", "y", "x"};
  for (int d = 0; d < ndim; ++d) {
    const std::string suffix = std::string(names[3 - ndim + d]) + "_m1";
    state.psi[d] = copy(array_of<T>(psi[d], what + "psi" + suffix));
    state.zeta[d] = copy(array_of<T>(zeta[d], what + "zeta" + suffix));
  }
  return true;
}

template <class T>
nb::dict state_to_python(wv::ScalarState<T>&& s, int ndim, std::int64_t nshots) {
  std::vector<std::int64_t> shape{nshots};
  for (int d = 0; d < ndim; ++d) shape.push_back(s.padded_shape[d]);
  nb::dict out;
  out["wavefield_0"] = to_numpy(std::move(s.wavefield), shape);
  out["wavefield_m1"] = to_numpy(std::move(s.previous_wavefield), shape);
  nb::list psi, zeta;
  for (int d = 0; d < ndim; ++d) {
    psi.append(to_numpy(std::move(s.psi[d]), shape));
    zeta.append(to_numpy(std::move(s.zeta[d]), shape));
  }
  out["psi"] = psi;
  out["zeta"] = zeta;
  nb::list padded;
  for (int d = 0; d < ndim; ++d) padded.append(s.padded_shape[d]);
  out["padded_shape"] = padded;
  return out;
}

nb::dict work_to_python(const sciproxy::WorkModel& w) {
  nb::dict d;
  d["points"] = w.points;
  d["point_unit"] = w.point_unit;
  d["flops"] = w.flops;
  d["bytes"] = w.bytes;
  d["precision"] = sciproxy::precision_name(w.precision);
  return d;
}

template <class T>
nb::dict output_to_python(wv::ScalarOutput<T>&& out, int ndim, std::int64_t nshots,
                          std::int64_t nreceivers, std::int64_t nt) {
  nb::dict d = state_to_python(std::move(out.state), ndim, nshots);
  d["receiver_amplitudes"] = to_numpy(std::move(out.receiver_amplitudes), {nshots, nreceivers, nt});
  d["step_ratio"] = out.step_ratio;
  d["inner_dt"] = out.inner_dt;
  d["work"] = work_to_python(out.work);
  d["storage_bytes"] = out.storage_bytes;
  return d;
}

nb::dict timers_to_python(const sciproxy::Timers& timers) {
  nb::dict d;
  for (const auto& s : timers.stats()) {
    nb::dict e;
    e["calls"] = s.calls;
    e["total"] = s.total;
    d[s.path.c_str()] = e;
  }
  return d;
}

// scalar_<dtype>(v, nmodels, ndim, shape, spacing, dt, nt, nshots, nsources, nreceivers,
//                source_amplitudes, source_locations, receiver_locations, options, initial, device)
template <class T>
nb::dict scalar(nb::handle v, std::int64_t nmodels, int ndim,
                const std::vector<std::int64_t>& shape, const std::vector<double>& spacing,
                double dt, std::int64_t nt, std::int64_t nshots, std::int64_t nsources,
                std::int64_t nreceivers, nb::handle amplitudes, nb::handle source_locations,
                nb::handle receiver_locations, nb::dict options, nb::handle initial,
                const std::string& device_spec) {
  const Inputs<T> x = inputs_of<T>(v, nmodels, ndim, shape, spacing, dt, nt, nshots, nsources,
                                   nreceivers, amplitudes, source_locations, receiver_locations);
  const wv::ScalarOptions opt = options_of(options);
  wv::ScalarState<T> state;
  const bool has_initial = state_of<T>(initial, ndim, state, "");
  const sciproxy::Device device = sciproxy::select_device(device_spec);
  sciproxy::Timers timers;
  wv::ScalarOutput<T> out;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    out = wv::scalar<T>(device, x.in, opt, has_initial ? &state : nullptr, &timers);
  }
  nb::dict d = output_to_python(std::move(out), ndim, held_shots(options, nshots), nreceivers, nt);
  d["timers"] = timers_to_python(timers);
  d["device"] = device.name();
  return d;
}

// scalar_gradient_<dtype>(..., grad_receiver_amplitudes, grad_final, device)
template <class T>
nb::dict scalar_gradient(nb::handle v, std::int64_t nmodels, int ndim,
                         const std::vector<std::int64_t>& shape, const std::vector<double>& spacing,
                         double dt, std::int64_t nt, std::int64_t nshots, std::int64_t nsources,
                         std::int64_t nreceivers, nb::handle amplitudes,
                         nb::handle source_locations, nb::handle receiver_locations,
                         nb::dict options, nb::handle initial, nb::handle grad_receivers,
                         nb::handle grad_final, const std::string& device_spec) {
  const Inputs<T> x = inputs_of<T>(v, nmodels, ndim, shape, spacing, dt, nt, nshots, nsources,
                                   nreceivers, amplitudes, source_locations, receiver_locations);
  const wv::ScalarOptions opt = options_of(options);
  const Array<T> grad_r = array_of<T>(grad_receivers, "grad_receiver_amplitudes");
  wv::ScalarState<T> state, grad_state;
  const bool has_initial = state_of<T>(initial, ndim, state, "");
  const bool has_grad_final = state_of<T>(grad_final, ndim, grad_state, "grad_");
  const sciproxy::Device device = sciproxy::select_device(device_spec);
  sciproxy::Timers timers;
  wv::ScalarGradient<T> g;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    g = wv::scalar_gradient<T>(device, x.in, opt, span_of(grad_r), has_initial ? &state : nullptr,
                               has_grad_final ? &grad_state : nullptr, &timers);
  }
  const std::int64_t held = held_shots(options, nshots);
  std::vector<std::int64_t> vshape{nmodels > 1 ? held : nmodels};  // a shared model: every rank
  vshape.insert(vshape.end(), shape.begin(), shape.end());
  nb::dict d;
  d["grad_v"] = to_numpy(std::move(g.v), vshape);
  d["grad_source_amplitudes"] = to_numpy(std::move(g.source_amplitudes), {held, nsources, nt});
  d["grad_initial"] = g.initial_state.empty()
                          ? nb::object(nb::none())
                          : nb::object(state_to_python(std::move(g.initial_state), ndim, held));
  d["forward"] = output_to_python(std::move(g.forward), ndim, held, nreceivers, nt);
  d["timers"] = timers_to_python(timers);
  d["device"] = device.name();
  return d;
}

// scalar_born_<dtype>(<scalar's arguments up to options>, scatter, bg_receiver_locations,
//                     initial, initial_scattered, device); nbg receivers from the locations' shape.
template <class T>
nb::dict scalar_born(nb::handle v, std::int64_t nmodels, int ndim,
                     const std::vector<std::int64_t>& shape, const std::vector<double>& spacing,
                     double dt, std::int64_t nt, std::int64_t nshots, std::int64_t nsources,
                     std::int64_t nreceivers, nb::handle amplitudes, nb::handle source_locations,
                     nb::handle receiver_locations, nb::dict options, nb::handle scatter,
                     nb::handle bg_receiver_locations, std::int64_t nbg_receivers,
                     nb::handle initial, nb::handle initial_scattered,
                     const std::string& device_spec) {
  const Inputs<T> x = inputs_of<T>(v, nmodels, ndim, shape, spacing, dt, nt, nshots, nsources,
                                   nreceivers, amplitudes, source_locations, receiver_locations);
  const Array<T> sc = array_of<T>(scatter, "scatter");
  const Locations bg = locations_of(bg_receiver_locations, "bg_receiver_locations");
  wv::ScalarBornInput<T> in;
  in.background = x.in;
  in.scatter = span_of(sc);
  in.nbg_receivers = nbg_receivers;
  in.bg_receiver_locations = {bg.data(), bg.size()};
  const wv::ScalarOptions opt = options_of(options);
  wv::ScalarState<T> state, state_sc;
  const bool has_initial = state_of<T>(initial, ndim, state, "");
  const bool has_initial_sc = state_of<T>(initial_scattered, ndim, state_sc, "");
  const sciproxy::Device device = sciproxy::select_device(device_spec);
  sciproxy::Timers timers;
  wv::ScalarBornOutput<T> out;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    out = wv::scalar_born<T>(device, in, opt, has_initial ? &state : nullptr,
                             has_initial_sc ? &state_sc : nullptr, &timers);
  }
  nb::dict d;
  const std::int64_t held = held_shots(options, nshots);
  d["background"] = state_to_python(std::move(out.state), ndim, held);
  d["scattered"] = state_to_python(std::move(out.scattered_state), ndim, held);
  d["bg_receiver_amplitudes"] =
      to_numpy(std::move(out.bg_receiver_amplitudes), {held, nbg_receivers, nt});
  d["receiver_amplitudes"] = to_numpy(std::move(out.receiver_amplitudes), {held, nreceivers, nt});
  d["step_ratio"] = out.step_ratio;
  d["inner_dt"] = out.inner_dt;
  d["work"] = work_to_python(out.work);
  d["timers"] = timers_to_python(timers);
  d["device"] = device.name();
  return d;
}

// scalar_born_gradient_<dtype>(..., scatter, bg_receiver_locations, nbg, initial,
//                              grad_receiver_amplitudes, grad_bg_receiver_amplitudes or None,
//                              source_gradient, device)
template <class T>
nb::dict scalar_born_gradient(nb::handle v, std::int64_t nmodels, int ndim,
                              const std::vector<std::int64_t>& shape,
                              const std::vector<double>& spacing, double dt, std::int64_t nt,
                              std::int64_t nshots, std::int64_t nsources, std::int64_t nreceivers,
                              nb::handle amplitudes, nb::handle source_locations,
                              nb::handle receiver_locations, nb::dict options, nb::handle scatter,
                              nb::handle bg_receiver_locations, std::int64_t nbg_receivers,
                              nb::handle initial, nb::handle grad_receivers, nb::handle grad_bg,
                              bool source_gradient, const std::string& device_spec) {
  const Inputs<T> x = inputs_of<T>(v, nmodels, ndim, shape, spacing, dt, nt, nshots, nsources,
                                   nreceivers, amplitudes, source_locations, receiver_locations);
  const Array<T> sc = array_of<T>(scatter, "scatter");
  const Locations bg = locations_of(bg_receiver_locations, "bg_receiver_locations");
  const Array<T> grad_r = array_of<T>(grad_receivers, "grad_receiver_amplitudes");
  Array<T> grad_b;
  if (!grad_bg.is_none()) grad_b = array_of<T>(grad_bg, "grad_bg_receiver_amplitudes");
  wv::ScalarBornInput<T> in;
  in.background = x.in;
  in.scatter = span_of(sc);
  in.nbg_receivers = nbg_receivers;
  in.bg_receiver_locations = {bg.data(), bg.size()};
  const wv::ScalarOptions opt = options_of(options);
  wv::ScalarState<T> state;
  const bool has_initial = state_of<T>(initial, ndim, state, "");
  const sciproxy::Device device = sciproxy::select_device(device_spec);
  sciproxy::Timers timers;
  wv::ScalarBornGradient<T> g;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    g = wv::scalar_born_gradient<T>(device, in, opt, span_of(grad_r),
                                    grad_bg.is_none() ? std::span<const T>() : span_of(grad_b),
                                    source_gradient, has_initial ? &state : nullptr, &timers);
  }
  const std::int64_t held = held_shots(options, nshots);
  std::vector<std::int64_t> vshape{nmodels > 1 ? held : nmodels};  // a shared model: every rank
  vshape.insert(vshape.end(), shape.begin(), shape.end());
  nb::dict d;
  d["grad_scatter"] = to_numpy(std::move(g.scatter), vshape);
  if (source_gradient && g.source_amplitudes.empty())
    g.source_amplitudes.assign(static_cast<std::size_t>(held * nsources * nt), T(0));
  d["grad_source_amplitudes"] = source_gradient
                                    ? to_numpy(std::move(g.source_amplitudes), {held, nsources, nt})
                                    : nb::object(nb::none());
  d["timers"] = timers_to_python(timers);
  d["device"] = device.name();
  return d;
}

nb::tuple cfl(int ndim, const std::vector<double>& spacing, double dt, double max_vel) {
  sciproxy::require(ndim >= 1 && ndim <= wv::kMaxDims, "ndim", "1, 2 or 3", std::to_string(ndim));
  sciproxy::require(spacing.size() == static_cast<std::size_t>(ndim), "grid_spacing",
                    "one value per dimension", std::to_string(spacing.size()) + " values");
  wv::Grid grid;
  grid.ndim = ndim;
  for (int d = 0; d < ndim; ++d) grid.spacing[d] = spacing[d];
  const wv::TimeStepping ts = wv::cfl_time_stepping(grid, dt, max_vel);
  return nb::make_tuple(ts.inner_dt, ts.step_ratio);
}

}  // namespace

// Called by NB_MODULE in module.cpp (which registers the exception translator).
void register_wave(nb::module_& m) {
  m.def("scalar_float32", &scalar<float>, "v"_a, "nmodels"_a, "ndim"_a, "shape"_a, "spacing"_a,
        "dt"_a, "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a, "source_amplitudes"_a,
        "source_locations"_a, "receiver_locations"_a, "options"_a, "initial"_a.none(), "device"_a);
  m.def("scalar_float64", &scalar<double>, "v"_a, "nmodels"_a, "ndim"_a, "shape"_a, "spacing"_a,
        "dt"_a, "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a, "source_amplitudes"_a,
        "source_locations"_a, "receiver_locations"_a, "options"_a, "initial"_a.none(), "device"_a);
  m.def("scalar_gradient_float32", &scalar_gradient<float>, "v"_a, "nmodels"_a, "ndim"_a, "shape"_a,
        "spacing"_a, "dt"_a, "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a,
        "source_amplitudes"_a, "source_locations"_a, "receiver_locations"_a, "options"_a,
        "initial"_a.none(), "grad_receiver_amplitudes"_a, "grad_final"_a.none(), "device"_a);
  m.def("scalar_gradient_float64", &scalar_gradient<double>, "v"_a, "nmodels"_a, "ndim"_a,
        "shape"_a, "spacing"_a, "dt"_a, "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a,
        "source_amplitudes"_a, "source_locations"_a, "receiver_locations"_a, "options"_a,
        "initial"_a.none(), "grad_receiver_amplitudes"_a, "grad_final"_a.none(), "device"_a);
  m.def("scalar_born_float32", &scalar_born<float>, "v"_a, "nmodels"_a, "ndim"_a, "shape"_a,
        "spacing"_a, "dt"_a, "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a,
        "source_amplitudes"_a, "source_locations"_a, "receiver_locations"_a, "options"_a,
        "scatter"_a, "bg_receiver_locations"_a, "nbg_receivers"_a, "initial"_a.none(),
        "initial_scattered"_a.none(), "device"_a);
  m.def("scalar_born_float64", &scalar_born<double>, "v"_a, "nmodels"_a, "ndim"_a, "shape"_a,
        "spacing"_a, "dt"_a, "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a,
        "source_amplitudes"_a, "source_locations"_a, "receiver_locations"_a, "options"_a,
        "scatter"_a, "bg_receiver_locations"_a, "nbg_receivers"_a, "initial"_a.none(),
        "initial_scattered"_a.none(), "device"_a);
  m.def("scalar_born_gradient_float32", &scalar_born_gradient<float>, "v"_a, "nmodels"_a, "ndim"_a,
        "shape"_a, "spacing"_a, "dt"_a, "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a,
        "source_amplitudes"_a, "source_locations"_a, "receiver_locations"_a, "options"_a,
        "scatter"_a, "bg_receiver_locations"_a, "nbg_receivers"_a, "initial"_a.none(),
        "grad_receiver_amplitudes"_a, "grad_bg_receiver_amplitudes"_a.none(), "source_gradient"_a,
        "device"_a);
  m.def("scalar_born_gradient_float64", &scalar_born_gradient<double>, "v"_a, "nmodels"_a, "ndim"_a,
        "shape"_a, "spacing"_a, "dt"_a, "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a,
        "source_amplitudes"_a, "source_locations"_a, "receiver_locations"_a, "options"_a,
        "scatter"_a, "bg_receiver_locations"_a, "nbg_receivers"_a, "initial"_a.none(),
        "grad_receiver_amplitudes"_a, "grad_bg_receiver_amplitudes"_a.none(), "source_gradient"_a,
        "device"_a);
  m.def("scalar_cfl", &cfl, "ndim"_a, "spacing"_a, "dt"_a, "max_vel"_a,
        "(inner_dt, step_ratio) of Deepwave's CFL rule.");
}
