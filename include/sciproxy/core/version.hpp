// What this build of sciproxy is: version, git commit, compiler, flags, build type.
#pragma once

#include <string>

namespace sciproxy {

struct BuildInfo {
  std::string version;
  std::string git_commit;
  std::string compiler;
  std::string flags;
  std::string build_type;
};

const BuildInfo& build_info();

}  // namespace sciproxy
