// The fixture of the backend tests (Ginkgo's test/utils/common_fixture.hpp): one test file per
// family is compiled once per backend, with SCIPROXY_TEST_BACKEND set to cpu or cuda by
// tests/CMakeLists.txt (sciproxy_backend_test), and compares that backend with the reference.
// The cuda instance carries the ctest label gpu and skips, saying why, where no GPU is present.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "sciproxy/core/device.hpp"

#ifndef SCIPROXY_TEST_BACKEND
#error "compile backend tests through sciproxy_backend_test(), which sets SCIPROXY_TEST_BACKEND"
#endif

namespace sciproxy::test {

// The backend under test, and the one it is compared against.
inline const Device kBackend{Backend::SCIPROXY_TEST_BACKEND, 0, false};
inline const Device kReference{Backend::reference, 0, false};
inline constexpr bool kTestingCuda = Backend::SCIPROXY_TEST_BACKEND == Backend::cuda;

// Base of every backend test: skips when the backend under test cannot run here.
class BackendTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (kTestingCuda && cuda_device_count() == 0) GTEST_SKIP() << cuda_unavailable_reason();
  }
};

template <class T>
class TypedBackendTest : public BackendTest {};

#ifdef SCIPROXY_TEST_DATA_DIR
// The tests' data folder: SCIPROXY_TEST_DATA_DIR from the environment where set (a build carried
// to a GPU machine by scripts/gpu-bundle.sh, whose checkout lies elsewhere), else the source
// tree's, fixed at build time.
inline std::string test_data_dir() {
  const char* dir = std::getenv("SCIPROXY_TEST_DATA_DIR");
  return dir && *dir ? dir : SCIPROXY_TEST_DATA_DIR;
}
#endif

}  // namespace sciproxy::test
