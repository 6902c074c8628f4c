// sciproxy._sciproxy, TTI part: bindings of the coupled P/M TTI propagator
// (include/sciproxy/tti.hpp). The Python layer (python/sciproxy/tti.py) normalises the arguments
// to exactly these types (C-contiguous arrays of the model's dtype, int64 locations, the options
// as a dict of plain Python values), so nothing is converted here; the library checks every
// value. The result is handed to numpy without a copy; the GIL is released while it runs (under
// MPI, options["comm"], the ranks wait for each other in the library without holding it).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/tti.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using sciproxy::python::Interruptible;

namespace {

namespace wv = sciproxy::tti;

using sciproxy::python::Array;
using sciproxy::python::Locations;
using sciproxy::python::span_of;
using sciproxy::python::to_numpy;

wv::TtiOptions options_of(const nb::dict& d) {
  wv::TtiOptions o;
  o.space_order = nb::cast<int>(d["space_order"]);
  const auto width = nb::cast<std::vector<std::int64_t>>(d["sponge_width"]);
  for (std::size_t i = 0; i < o.sponge_width.size() && i < width.size(); ++i)
    o.sponge_width[i] = width[i];
  o.q_min = nb::cast<double>(d["q_min"]);
  o.q_interior = nb::cast<double>(d["q_interior"]);
  o.freq_q = nb::cast<double>(d["freq_q"]);
  o.default_f = nb::cast<double>(d["default_f"]);
  o.free_surface = nb::cast<bool>(d["free_surface"]);
  o.nparallel = nb::cast<int>(d["nparallel"]);
  if (d.contains("comm"))  // MPI (tti, tti_adjoint): the Python layer checked the types
    o.comm = sciproxy::Communicator::from_handle(nb::cast<std::int64_t>(d["comm"]), "comm");
  if (d.contains("process_grid")) {
    const auto grid = nb::cast<std::vector<int>>(d["process_grid"]);
    for (std::size_t i = 0; i < o.process_grid.size() && i < grid.size(); ++i)
      o.process_grid[i] = grid[i];
  }
  return o;
}

// Forward (adjoint false: traces are source amplitudes, returns receiver amplitudes) or adjoint
// (traces are receiver data, returns the source-amplitude gradient), [nshots, n, nt].
template <class T>
nb::object tti(const Array<T>& vp, const std::optional<Array<T>>& buoyancy,
               const std::optional<Array<T>>& epsilon, const std::optional<Array<T>>& delta,
               const std::optional<Array<T>>& theta, const std::optional<Array<T>>& phi,
               const std::optional<Array<T>>& f, const std::vector<double>& spacing, double dt,
               std::int64_t nt, std::int64_t nshots, std::int64_t nsources, std::int64_t nreceivers,
               const Array<T>& traces, const Locations& source_locations,
               const Locations& receiver_locations, const nb::dict& options, bool adjoint,
               const std::string& device) {
  if (vp.ndim() != 3)
    sciproxy::throw_invalid_argument("vp", "a 3-D array",
                                     std::to_string(vp.ndim()) + " dimensions");
  wv::TtiInput<T> in;
  for (int d = 0; d < 3; ++d) {
    in.model.grid.shape[d] = static_cast<std::int64_t>(vp.shape(d));
    in.model.grid.spacing[d] = d < static_cast<int>(spacing.size()) ? spacing[d] : 0.0;
  }
  in.model.vp = span_of(vp);
  in.model.buoyancy = span_of(buoyancy);
  in.model.epsilon = span_of(epsilon);
  in.model.delta = span_of(delta);
  in.model.theta = span_of(theta);
  in.model.phi = span_of(phi);
  in.model.f = span_of(f);
  in.dt = dt;
  in.nt = nt;
  in.nshots = nshots;
  in.nsources = nsources;
  in.nreceivers = nreceivers;
  in.source_locations = {source_locations.data(), source_locations.size()};
  in.receiver_locations = {receiver_locations.data(), receiver_locations.size()};
  const wv::TtiOptions opt = options_of(options);
  std::vector<T> result;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    const sciproxy::Device dev = sciproxy::select_device(device);
    if (adjoint) {
      result = wv::tti_adjoint<T>(dev, in, span_of(traces), opt).source_amplitudes;
    } else {
      in.source_amplitudes = span_of(traces);
      result = wv::tti_forward<T>(dev, in, opt).receiver_amplitudes;
    }
  }
  return to_numpy(std::move(result), {nshots, adjoint ? nsources : nreceivers, nt});
}

template <class T>
double max_dt(const Array<T>& vp, const std::optional<Array<T>>& epsilon,
              const std::vector<double>& spacing, const nb::dict& options) {
  wv::TtiModel<T> m;
  if (vp.ndim() != 3)
    sciproxy::throw_invalid_argument("vp", "a 3-D array",
                                     std::to_string(vp.ndim()) + " dimensions");
  for (int d = 0; d < 3; ++d) {
    m.grid.shape[d] = static_cast<std::int64_t>(vp.shape(d));
    m.grid.spacing[d] = d < static_cast<int>(spacing.size()) ? spacing[d] : 0.0;
  }
  m.vp = span_of(vp);
  m.epsilon = span_of(epsilon);
  return wv::tti_max_dt<T>(m, options_of(options));
}

}  // namespace

void register_tti(nb::module_& m) {
  m.def("tti_float32", &tti<float>, "vp"_a, "buoyancy"_a.none(), "epsilon"_a.none(),
        "delta"_a.none(), "theta"_a.none(), "phi"_a.none(), "f"_a.none(), "spacing"_a, "dt"_a,
        "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a, "traces"_a, "source_locations"_a,
        "receiver_locations"_a, "options"_a, "adjoint"_a, "device"_a);
  m.def("tti_float64", &tti<double>, "vp"_a, "buoyancy"_a.none(), "epsilon"_a.none(),
        "delta"_a.none(), "theta"_a.none(), "phi"_a.none(), "f"_a.none(), "spacing"_a, "dt"_a,
        "nt"_a, "nshots"_a, "nsources"_a, "nreceivers"_a, "traces"_a, "source_locations"_a,
        "receiver_locations"_a, "options"_a, "adjoint"_a, "device"_a);
  m.def("tti_max_dt_float32", &max_dt<float>, "vp"_a, "epsilon"_a.none(), "spacing"_a, "options"_a);
  m.def("tti_max_dt_float64", &max_dt<double>, "vp"_a, "epsilon"_a.none(), "spacing"_a,
        "options"_a);
}
