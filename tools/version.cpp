// The version line of `epigemm --version` and `epigemm info`.
#include <cstdio>
#include <string_view>

#include "commands.hpp"
#include "epigemm/epigemm.h"

namespace epigemm_cli {

// The version of the library that runs (a shared library may be newer than the header this
// program was compiled with; both are printed when they differ).
void print_version(std::FILE* out) {
  const char* running = epigemm_get_version();
  char built[32];
  std::snprintf(built, sizeof built, "%d.%d.%d", EPIGEMM_VERSION_MAJOR, EPIGEMM_VERSION_MINOR,
                EPIGEMM_VERSION_PATCH);
  std::fprintf(out, "epigemm %s\n", running);
  if (std::string_view(running) != built) std::fprintf(out, "(built against the header of %s)\n", built);
}

}  // namespace epigemm_cli
