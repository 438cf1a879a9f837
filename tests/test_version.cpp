// The version is written once (EPIGEMM_VERSION_* in epigemm.h): the library reports the header's,
// and CMake's project version (EPIGEMM_PROJECT_VERSION, parsed from the same header) agrees.
#include <gtest/gtest.h>

#include <string>

#include "epigemm/epigemm.h"

namespace {

TEST(Version, LibraryReportsTheHeadersVersion) {
  const std::string header_version = std::to_string(EPIGEMM_VERSION_MAJOR) + "." +
                                     std::to_string(EPIGEMM_VERSION_MINOR) + "." +
                                     std::to_string(EPIGEMM_VERSION_PATCH);
  ASSERT_NE(epigemm_get_version(), nullptr);
  EXPECT_EQ(std::string(epigemm_get_version()), header_version);
}

TEST(Version, CMakeProjectVersionIsTheHeadersVersion) {
  EXPECT_EQ(std::string(EPIGEMM_PROJECT_VERSION), std::string(epigemm_get_version()));
}

}  // namespace
