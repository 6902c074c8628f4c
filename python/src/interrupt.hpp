// Every long binding runs its library call inside an Interruptible: the GIL is released (other
// Python threads run), and a CancelScope (core/cancel.hpp) lets Ctrl-C stop the call between
// steps. Its callback, on the calling thread at most every 50 ms, takes the GIL back and runs
// Python's signal handlers (PyErr_CheckSignals); when one raises (KeyboardInterrupt for
// SIGINT), the library throws Cancelled and module.cpp's translator leaves that Python
// exception in place, so the caller sees exactly what Python raised.
#pragma once

#include <nanobind/nanobind.h>

#include "sciproxy/core/cancel.hpp"

namespace sciproxy::python {

class Interruptible {
 public:
  Interruptible() = default;
  Interruptible(const Interruptible&) = delete;
  Interruptible& operator=(const Interruptible&) = delete;

 private:
  static bool python_signal_raised() {
    nanobind::gil_scoped_acquire gil;
    return PyErr_CheckSignals() != 0;  // the exception stays set for the translator
  }
  // Declared in this order: the scope ends before the GIL is taken back.
  nanobind::gil_scoped_release release_;
  CancelScope scope_{&Interruptible::python_signal_raised};
};

}  // namespace sciproxy::python
