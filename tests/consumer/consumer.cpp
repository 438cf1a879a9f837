// The C++ layer (epigemm.hpp) from another project: a handle and the library's version.
#include <epigemm/epigemm.hpp>

#include <cstdio>
#include <string>

int main() {
  epigemm::Handle handle;
  const std::string header_version = std::to_string(EPIGEMM_VERSION_MAJOR) + "." +
                                     std::to_string(EPIGEMM_VERSION_MINOR) + "." +
                                     std::to_string(EPIGEMM_VERSION_PATCH);
  if (header_version != epigemm_get_version()) {
    std::fprintf(stderr, "FAILED: library version %s, header version %s\n", epigemm_get_version(),
                 header_version.c_str());
    return 1;
  }
  std::printf("epigemm %s from C++: ok\n", epigemm_get_version());
  return 0;
}
