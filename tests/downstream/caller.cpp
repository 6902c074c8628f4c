// The C++ API of an installed sciproxy: a hand-checked parstack on the cpu backend.
#include <cstdio>
#include <sciproxy/core/version.hpp>
#include <sciproxy/stack.hpp>
#include <span>
#include <vector>

int main() {
  namespace stack = sciproxy::stack;
  const std::vector<double> a0{1, 2, 3}, a1{-1, -2, -3};
  const std::vector<std::span<const double>> traces{a0, a1};
  const std::vector<std::int32_t> offsets{0, 1};
  const std::vector<std::int32_t> shifts{0, 0, 1, -1};  // (nshifts = 2, ntraces = 2)
  const std::vector<double> weights{1, 1, 1, 1};
  stack::ParstackInput<double> in{traces, offsets, shifts, weights, 2};

  std::vector<double> result(8, -99.0);
  const stack::Extent extent =
      stack::parstack<double>(sciproxy::parse_device("cpu"), in, std::span<double>(result));
  const std::vector<double> expected{1, 1, 1, -3, -1, -1, -1, 3};
  if (extent.offsetout != 0 || extent.lengthout != 4 || result != expected) {
    std::fprintf(stderr, "downstream_cxx: wrong stack (offsetout %d, lengthout %lld)\n",
                 extent.offsetout, static_cast<long long>(extent.lengthout));
    return 1;
  }
  std::printf("downstream_cxx: parstack OK (sciproxy %s)\n",
              sciproxy::build_info().version.c_str());
  return 0;
}
