// Device strings and run-time selection.
#include <gtest/gtest.h>
#include <omp.h>

#include "sciproxy/core/device.hpp"
#include "sciproxy/core/error.hpp"

using namespace sciproxy;

TEST(Device, ParsesEveryForm) {
  EXPECT_EQ(parse_device("reference").backend, Backend::reference);
  EXPECT_EQ(parse_device("cpu").backend, Backend::cpu);
  EXPECT_EQ(parse_device("cuda").name(), "cuda:0");
  EXPECT_EQ(parse_device("cuda:3").index, 3);
  EXPECT_TRUE(parse_device("auto").automatic);
}

TEST(Device, RejectsBadStrings) {
  for (const char* bad : {"", "gpu", "cuda:", "cuda:-1", "cuda:x", "CPU", "cuda:1x"}) {
    try {
      parse_device(bad);
      FAIL() << "accepted \"" << bad << "\"";
    } catch (const InvalidArgument& e) {
      EXPECT_NE(std::string(e.what()).find("device: expected one of"), std::string::npos)
          << e.what();
    }
  }
}

TEST(Device, AutoFallsBackAndSaysSo) {
  const Device d = select_device("auto");
  EXPECT_TRUE(d.automatic);
  EXPECT_EQ(d.backend, cuda_device_count() > 0 ? Backend::cuda : Backend::cpu);
}

TEST(Device, ExplicitCudaIsAnErrorWhenItCannotRun) {
  if (cuda_device_count() > 0) {
    EXPECT_THROW(select_device("cuda:999"), DeviceUnavailable);
    return;
  }
  if (cuda_compiled())
    EXPECT_THROW(select_device("cuda"), DeviceUnavailable);
  else
    EXPECT_THROW(select_device("cuda"), NotCompiled);
  EXPECT_FALSE(cuda_unavailable_reason().empty());
}

TEST(Device, ThreadCountIsRestored) {
  const int before = omp_get_max_threads();
  {
    ThreadCount t(1);
    EXPECT_EQ(omp_get_max_threads(), 1);
  }
  EXPECT_EQ(omp_get_max_threads(), before);
}
