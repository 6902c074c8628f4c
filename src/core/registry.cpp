// The registry of cases: each family listed in src/CMakeLists.txt (SCIPROXY_FAMILIES) registers
// its cases through register_cases() in its src/<family>/case.cpp; the list below is generated,
// so adding a family adds its folder and its name to that list, and no line here.
#include "sciproxy/core/harness.hpp"

#define SCIPROXY_FAMILY(family)                          \
  namespace sciproxy::family {                           \
  void register_cases(std::vector<CaseEntry>& registry); \
  }
#include "sciproxy/families.inc"
#undef SCIPROXY_FAMILY

namespace sciproxy {

const std::vector<CaseEntry>& case_registry() {
  static const std::vector<CaseEntry> registry = [] {
    std::vector<CaseEntry> r;
#define SCIPROXY_FAMILY(family) family::register_cases(r);
#include "sciproxy/families.inc"
#undef SCIPROXY_FAMILY
    return r;
  }();
  return registry;
}

}  // namespace sciproxy
