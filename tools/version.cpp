// The version line of `epigemm --version` and `epigemm info`.
#include <cstdio>

#include "commands.hpp"
#include "epigemm/epigemm.h"

namespace epigemm_cli {

// The version of the library this program was built against (the header's macros).
void print_version(std::FILE* out) {
  std::fprintf(out, "epigemm %d.%d.%d\n", EPIGEMM_VERSION_MAJOR, EPIGEMM_VERSION_MINOR, EPIGEMM_VERSION_PATCH);
}

}  // namespace epigemm_cli
