// sciproxy._sciproxy: bindings of the TTI workshop demo operator (include/sciproxy/tti_demo.hpp).
// The Python layer (python/sciproxy/tti_demo.py) casts the arrays to the dtype, makes them
// C-contiguous and flat, and calls tti_demo_float32 / tti_demo_float64 with every argument; the
// C++ library checks the values (InvalidArgument -> ValueError).
#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/array.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/string.h>

#include <array>
#include <cstdint>
#include <map>
#include <span>
#include <string>
#include <vector>

#include "arrays.hpp"
#include "interrupt.hpp"
#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"
#include "sciproxy/core/timers.hpp"
#include "sciproxy/tti_demo.hpp"

namespace nb = nanobind;
using namespace nb::literals;
using sciproxy::python::Interruptible;

namespace {

template <class T>
using Flat = nb::ndarray<const T, nb::ndim<1>, nb::c_contig, nb::device::cpu>;

using sciproxy::python::span_of;
using sciproxy::python::to_numpy;

nb::dict work_dict(const sciproxy::WorkModel& w) {
  nb::dict d;
  d["points"] = w.points;
  d["flops"] = w.flops;
  d["bytes"] = w.bytes;
  return d;
}

// (u, u_prev, info): info holds the work model, the sections (name, seconds, work) and dt_limit.
template <class T>
nb::tuple tti_demo(std::array<std::int64_t, 3> shape, std::array<double, 3> spacing, double dt,
                   std::int64_t nt, Flat<T> vp, Flat<T> b, Flat<T> epsilon, Flat<T> eta, Flat<T> f,
                   Flat<T> theta, Flat<T> phi, Flat<T> damping,
                   std::array<double, 3> source_position, Flat<T> source_amplitudes,
                   Flat<T> initial_u, Flat<T> initial_u_prev, int space_order,
                   const std::string& form, int nparallel, const std::string& device_spec,
                   const std::map<std::string, std::int64_t>& cpu_tuning, bool autotune,
                   std::int64_t comm, std::array<int, 3> process_grid, int results) {
  namespace wv = sciproxy::tti;
  wv::TtiDemoInput<T> in;
  in.shape = shape;
  in.spacing = spacing;
  in.dt = dt;
  in.nt = nt;
  in.material = {span_of(vp), span_of(b),     span_of(epsilon), span_of(eta),
                 span_of(f),  span_of(theta), span_of(phi),     span_of(damping)};
  in.source_position = source_position;
  in.source_amplitudes = span_of(source_amplitudes);
  in.initial_u = span_of(initial_u);
  in.initial_u_prev = span_of(initial_u_prev);
  wv::TtiDemoOptions opt;
  opt.space_order = space_order;
  opt.form = wv::parse_tti_demo_form(form);
  opt.nparallel = nparallel;
  // TtiDemoCpuTuning by field name; the library checks the values.
  for (const auto& [name, value] : cpu_tuning) {
    if (name == "tile_rows") {
      opt.cpu.tile_rows = value;
    } else if (name == "tile_kib") {
      opt.cpu.tile_kib = value;
    } else if (name == "block_rows") {
      opt.cpu.block_rows = value;
    } else if (name == "sweep_steps") {
      opt.cpu.sweep_steps = static_cast<int>(value);
    } else {
      sciproxy::throw_invalid_argument("cpu_tuning",
                                       "keys among tile_rows, tile_kib, block_rows, sweep_steps",
                                       "\"" + name + "\"");
    }
  }
  opt.autotune = autotune;
  // MPI: the Python layer checked the types and the layout's name.
  opt.comm = sciproxy::Communicator::from_handle(comm, "comm");
  opt.process_grid = process_grid;
  opt.results = static_cast<sciproxy::ResultLayout>(results);
  const sciproxy::Device device = sciproxy::select_device(device_spec);

  wv::TtiDemoOutput<T> out;
  sciproxy::Timers timers;
  {
    const Interruptible interruptible;  // GIL released; Ctrl-C stops the call
    out = wv::tti_demo<T>(device, in, opt, &timers);
  }
  nb::dict info;
  info["device"] = device.name();
  info["form"] = device.backend == sciproxy::Backend::reference ? "two-pass"
                                                                : wv::tti_demo_form_name(opt.form);
  info["dt_limit"] = out.dt_limit;
  info["work"] = work_dict(out.work);
  nb::list sections;
  double seconds = 0;
  for (const auto& s : out.sections) {
    nb::dict d;
    d["name"] = s.name;
    d["seconds"] = s.seconds;
    d["work"] = work_dict(s.work);
    sections.append(d);
    seconds += s.seconds;
  }
  info["sections"] = sections;
  info["seconds"] = seconds;  // the time steps (the sections), without setup
  // The part of the grid u and u_prev hold (the whole grid but under MPI with results own or
  // root).
  info["block_origin"] = out.block_origin;
  info["block_shape"] = out.block_shape;
  info["process_grid"] = out.process_grid;
  const std::vector<std::int64_t> dims(out.block_shape.begin(), out.block_shape.end());
  return nb::make_tuple(to_numpy(std::move(out.u), dims), to_numpy(std::move(out.u_prev), dims),
                        info);
}

template <class T>
double dt_limit(std::array<std::int64_t, 3> shape, std::array<double, 3> spacing, Flat<T> vp,
                Flat<T> b, Flat<T> epsilon, Flat<T> eta, Flat<T> f, Flat<T> damping,
                int space_order) {
  sciproxy::tti::TtiDemoInput<T> in;
  in.shape = shape;
  in.spacing = spacing;
  in.material.vp = span_of(vp);
  in.material.b = span_of(b);
  in.material.epsilon = span_of(epsilon);
  in.material.eta = span_of(eta);
  in.material.f = span_of(f);
  in.material.damping = span_of(damping);
  return sciproxy::tti::tti_demo_dt_limit(in, space_order);
}

nb::dict flops(int space_order) {
  const auto f = sciproxy::tti::tti_demo_flops(space_order);
  nb::dict d;
  d["flux"] = f.flux;
  d["divergence"] = f.divergence;
  d["total"] = f.total();
  return d;
}

}  // namespace

void register_tti_demo(nb::module_& m) {
#define SCIPROXY_DEF(T, suffix)                                                                 \
  m.def("tti_demo_" suffix, &tti_demo<T>, "shape"_a, "spacing"_a, "dt"_a, "nt"_a,               \
        "vp"_a.noconvert(), "b"_a.noconvert(), "epsilon"_a.noconvert(), "eta"_a.noconvert(),    \
        "f"_a.noconvert(), "theta"_a.noconvert(), "phi"_a.noconvert(), "damping"_a.noconvert(), \
        "source_position"_a, "source_amplitudes"_a.noconvert(), "initial_u"_a.noconvert(),      \
        "initial_u_prev"_a.noconvert(), "space_order"_a, "form"_a, "nparallel"_a, "device"_a,   \
        "cpu_tuning"_a, "autotune"_a, "comm"_a, "process_grid"_a, "results"_a);                 \
  m.def("tti_demo_dt_limit_" suffix, &dt_limit<T>, "shape"_a, "spacing"_a, "vp"_a.noconvert(),  \
        "b"_a.noconvert(), "epsilon"_a.noconvert(), "eta"_a.noconvert(), "f"_a.noconvert(),     \
        "damping"_a.noconvert(), "space_order"_a);
  SCIPROXY_DEF(float, "float32")
  SCIPROXY_DEF(double, "float64")
#undef SCIPROXY_DEF
  m.def("tti_demo_flops", &flops, "space_order"_a);
}
