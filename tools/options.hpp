// Command-line options of the `epigemm` subcommands: "--name VALUE", "--name=VALUE" and flags.
// Every mistake (an unknown option, a missing value, a value out of range) throws UsageError,
// which main() prints as one line and turns into exit code 2.
#pragma once

#include <cstdint>
#include <cstdio>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

namespace epigemm_cli {

class UsageError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

class Options {
 public:
  // `command` is the subcommand ("demo"); `summary` is the first line of its --help.
  Options(std::string command, std::string summary);

  // An option that takes a value, shown as "--name VALUE  help (default: ...)".
  void add(const std::string& name, const std::string& value_name, const std::string& help,
           const std::string& default_value);
  // An option without a value.
  void add_flag(const std::string& name, const std::string& help);
  // Free text printed after the option list of --help.
  void set_epilog(std::string text) { epilog_ = std::move(text); }

  // Parses argv[first..argc). Returns false when --help (or -h) was given, after printing the
  // help to stdout; throws UsageError for anything it does not understand.
  bool parse(int argc, char** argv, int first);

  bool given(const std::string& name) const;
  bool flag(const std::string& name) const { return given(name); }
  // The value given, or the default.
  std::string text(const std::string& name) const;
  // An integer in [min, max]: "--tokens: expected an integer in [1, 1048576], got 'x'".
  int64_t integer(const std::string& name, int64_t min, int64_t max) const;
  // A finite real number in (exclusive_min, max].
  double real(const std::string& name, double exclusive_min, double max) const;
  // One of `choices`, returned as its index.
  size_t choice(const std::string& name, const std::vector<std::string>& choices) const;

  void print_help(std::FILE* out) const;

 private:
  struct Spec {
    std::string name;
    std::string value_name;  // empty for a flag
    std::string help;
    std::string default_value;
  };
  const Spec& spec(const std::string& name) const;

  std::string command_;
  std::string summary_;
  std::string epilog_;
  std::vector<Spec> specs_;
  std::map<std::string, std::string> values_;
};

}  // namespace epigemm_cli
