// The development programs' one error check: any CUDA, cuBLAS or cuBLASLt status other than
// success (0) ends the program with the call that failed, its file and line.
#pragma once

#include <cstdio>
#include <cstdlib>

#define LAB_CHECK(x)                                                      \
  do {                                                                    \
    const int s_ = int(x);                                                \
    if (s_ != 0) {                                                        \
      std::printf("%s:%d: %s returned %d\n", __FILE__, __LINE__, #x, s_); \
      std::exit(1);                                                       \
    }                                                                     \
  } while (0)
