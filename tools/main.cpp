// The `epigemm` program: demo, check, info, bench (docs/cli.md). A usage mistake is one line on
// stderr and exit code 2; a library or device failure is one line and exit code 1.
#include <cstdio>
#include <cstring>
#include <exception>
#include <new>
#include <string>

#include "commands.hpp"
#include "compute_device.hpp"
#include "epigemm/epigemm.hpp"
#include "options.hpp"

namespace {

void print_usage(std::FILE* out) {
  std::fprintf(out,
               "usage: epigemm <command> [options]\n\n"
               "commands:\n"
               "  demo    train a two-layer MLP whose linear layers are epigemm calls, check its gradients\n"
               "  check   compare a random sample of the test matrix on every usable backend with the reference\n"
               "  info    version, backends compiled in and usable here and what each runs on, devices\n"
               "  bench   run the benchmark program of bench/ (the GPU one, or the CPU one without a GPU)\n\n"
               "`epigemm <command> --help` (or `epigemm help <command>`) describes each command's\n"
               "options; `epigemm --version` prints the library version.\n");
}

}  // namespace

static int run(int argc, char** argv) {
  if (argc < 2) {
    std::fprintf(stderr, "epigemm: missing command; expected demo, check, info or bench (see epigemm --help)\n");
    return 2;
  }
  const std::string command = argv[1];
  if (command == "help" && argc == 3) {
    // `epigemm help <command>` is `epigemm <command> --help`.
    char help_flag[] = "--help";
    char* forwarded[] = {argv[0], argv[2], help_flag, nullptr};
    return run(3, forwarded);
  }
  if (command == "--help" || command == "-h" || command == "help") {
    if (argc > 2) {
      std::fprintf(stderr, "epigemm %s: unexpected argument '%s'; expected none\n", command.c_str(), argv[2]);
      return 2;
    }
    print_usage(stdout);
    return 0;
  }
  if (command == "--version") {
    if (argc > 2) {
      std::fprintf(stderr, "epigemm --version: unexpected argument '%s'; expected none\n", argv[2]);
      return 2;
    }
    epigemm_cli::print_version(stdout);
    return 0;
  }
  try {
    if (command == "demo") return epigemm_cli::run_demo(argc, argv, 2);
    if (command == "check") return epigemm_cli::run_check(argc, argv, 2);
    if (command == "info") return epigemm_cli::run_info(argc, argv, 2);
    if (command == "bench") return epigemm_cli::run_bench(argc, argv, 2);
    std::fprintf(stderr, "epigemm: unknown command '%s'; expected demo, check, info or bench (see epigemm --help)\n",
                 command.c_str());
    return 2;
  } catch (const epigemm_cli::UsageError& e) {
    std::fprintf(stderr, "epigemm %s: %s (see epigemm %s --help)\n", command.c_str(), e.what(), command.c_str());
    return 2;
  } catch (const epigemm::Error& e) {
    std::fprintf(stderr, "epigemm %s: library call failed: %s\n", command.c_str(), e.what());
    return 1;
  } catch (const epigemm_cli::DeviceError& e) {
    std::fprintf(stderr, "epigemm %s: %s\n", command.c_str(), e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "epigemm %s: out of host memory\n", command.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "epigemm %s: %s\n", command.c_str(), e.what());
    return 1;
  }
}

int main(int argc, char** argv) { return run(argc, argv); }
