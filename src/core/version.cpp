// Build information, from the header CMake generates at configure time.
#include "sciproxy/core/version.hpp"

#include "sciproxy/build_info.hpp"

namespace sciproxy {

const BuildInfo& build_info() {
  static const BuildInfo info{SCIPROXY_VERSION, SCIPROXY_GIT_COMMIT, SCIPROXY_COMPILER,
                              SCIPROXY_BUILD_FLAGS, SCIPROXY_BUILD_TYPE};
  return info;
}

}  // namespace sciproxy
