// The subcommands of the `epigemm` program. Each takes the arguments after its name
// (argv[first..argc)), returns the process exit code, and throws UsageError (exit code 2) for
// options it does not understand.
#pragma once

#include <cstdio>

namespace epigemm_cli {

// "epigemm 0.1.0": `epigemm --version` and the first line of `epigemm info`.
void print_version(std::FILE* out);

int run_demo(int argc, char** argv, int first);
int run_check(int argc, char** argv, int first);
int run_info(int argc, char** argv, int first);
int run_bench(int argc, char** argv, int first);

}  // namespace epigemm_cli
