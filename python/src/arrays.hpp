// numpy arrays into and out of the nanobind bindings (wave_bindings.cpp, tti_bindings.cpp,
// tti_demo_bindings.cpp): the Python layer hands over C-contiguous arrays of the computation's
// dtype, which the bindings read in place as spans; results go back as numpy arrays that own
// the std::vector the C++ API returned (no copy).
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/ndarray.h>
#include <nanobind/stl/string.h>

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "sciproxy/core/error.hpp"

namespace sciproxy::python {

namespace nb = nanobind;

template <class T>
using Array = nb::ndarray<const T, nb::c_contig, nb::device::cpu>;
using Locations = nb::ndarray<const std::int64_t, nb::c_contig, nb::device::cpu>;

template <class T>
constexpr const char* dtype_name() {
  return sizeof(T) == 4 ? "float32" : "float64";
}

// "float64 array of shape (3, 4), not C-contiguous" or the Python type's name, for messages.
inline std::string describe(nb::handle h) {
  try {
    const auto text_of = [](nb::handle x) { return nb::cast<std::string>(nb::str(x)); };
    const auto truth = [](nb::handle x) { return PyObject_IsTrue(x.ptr()) == 1; };
    if (nb::hasattr(h, "dtype") && nb::hasattr(h, "shape")) {
      std::string text = text_of(h.attr("dtype")) + " array of shape " + text_of(h.attr("shape"));
      if (nb::hasattr(h, "flags")) {
        nb::object flags = h.attr("flags");
        if (!truth(flags.attr("c_contiguous"))) text += ", not C-contiguous";
        if (!truth(flags.attr("writeable"))) text += ", read-only";
      }
      return text;
    }
    return text_of(nb::type_name(h.type()));
  } catch (const std::exception& e) {
    return std::string("an object that could not be described (") + e.what() + ")";
  }
}

template <class T, class... Extra>
std::span<const T> span_of(const nb::ndarray<const T, Extra...>& a) {
  return {a.data(), a.size()};
}
template <class T, class... Extra>
std::span<const T> span_of(const std::optional<nb::ndarray<const T, Extra...>>& a) {
  return a ? span_of(*a) : std::span<const T>();
}

// numpy.empty(shape, dtype): numpy's own array (owndata, resizable, tracked).
inline nb::object numpy_empty(const std::vector<std::int64_t>& shape, const char* dtype) {
  nb::list dims;
  for (std::int64_t n : shape) dims.append(n);
  return nb::module_::import_("numpy").attr("empty")(nb::tuple(dims), dtype);
}

// A numpy array of `shape` that owns `values` (moved to the heap, freed with the array).
template <class T>
nb::object to_numpy(std::vector<T>&& values, const std::vector<std::int64_t>& shape) {
  std::vector<std::size_t> dims(shape.begin(), shape.end());
  std::size_t count = 1;
  for (std::size_t d : dims) count *= d;
  if (count != values.size())
    throw RuntimeError("internal error: an output has " + std::to_string(values.size()) +
                       " values, its shape " + std::to_string(count));
  if (values.empty()) {
    nb::list py_shape;
    for (std::int64_t n : shape) py_shape.append(n);
    return nb::module_::import_("numpy").attr("zeros")(nb::tuple(py_shape), dtype_name<T>());
  }
  auto* heap = new std::vector<T>(std::move(values));
  nb::capsule owner(heap, [](void* p) noexcept { delete static_cast<std::vector<T>*>(p); });
  return nb::cast(nb::ndarray<nb::numpy, T>(heap->data(), dims.size(), dims.data(), owner));
}

}  // namespace sciproxy::python
