#include "options.hpp"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

namespace epigemm_cli {

Options::Options(std::string command, std::string summary)
    : command_(std::move(command)), summary_(std::move(summary)) {}

void Options::add(const std::string& name, const std::string& value_name, const std::string& help,
                  const std::string& default_value) {
  specs_.push_back(Spec{name, value_name, help, default_value});
}

void Options::add_flag(const std::string& name, const std::string& help) {
  specs_.push_back(Spec{name, "", help, ""});
}

const Options::Spec& Options::spec(const std::string& name) const {
  for (const Spec& s : specs_) {
    if (s.name == name) return s;
  }
  // A programming error in the tool, not a user error; still reported, never a crash.
  throw std::logic_error("option --" + name + " was never declared");
}

bool Options::parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") {
      print_help(stdout);
      return false;
    }
    if (arg.size() < 3 || arg.compare(0, 2, "--") != 0) {
      throw UsageError("unexpected argument '" + arg + "'; options start with --");
    }
    const size_t equals = arg.find('=');
    const std::string name = arg.substr(2, equals == std::string::npos ? std::string::npos : equals - 2);
    const Spec* found = nullptr;
    for (const Spec& s : specs_) {
      if (s.name == name) found = &s;
    }
    if (found == nullptr && name == "help") throw UsageError("option --help takes no value");
    if (found == nullptr) throw UsageError("unknown option --" + name);
    if (found->value_name.empty()) {
      if (equals != std::string::npos) throw UsageError("option --" + name + " takes no value");
      values_[name] = "1";
    } else if (equals != std::string::npos) {
      values_[name] = arg.substr(equals + 1);
    } else {
      if (i + 1 >= argc) throw UsageError("option --" + name + " needs a value (" + found->value_name + ")");
      values_[name] = argv[++i];
    }
  }
  return true;
}

bool Options::given(const std::string& name) const {
  spec(name);
  return values_.count(name) != 0;
}

std::string Options::text(const std::string& name) const {
  const auto it = values_.find(name);
  return it != values_.end() ? it->second : spec(name).default_value;
}

int64_t Options::integer(const std::string& name, int64_t min, int64_t max) const {
  const std::string value = text(name);
  const std::string expected = "--" + name + ": expected an integer in [" + std::to_string(min) +
                               ", " + std::to_string(max) + "], got '" + value + "'";
  // strtoll would skip leading white space: the value is the number alone.
  if (value.empty() || std::isspace(static_cast<unsigned char>(value[0]))) throw UsageError(expected);
  errno = 0;
  char* end = nullptr;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (errno != 0 || *end != '\0' || parsed < min || parsed > max) throw UsageError(expected);
  return parsed;
}

double Options::real(const std::string& name, double exclusive_min, double max) const {
  const std::string value = text(name);
  char* end = nullptr;
  const bool blank_first = value.empty() || std::isspace(static_cast<unsigned char>(value[0]));
  const double parsed = blank_first ? NAN : std::strtod(value.c_str(), &end);
  if (blank_first || *end != '\0' || !std::isfinite(parsed) || parsed <= exclusive_min || parsed > max) {
    char bounds[64];
    std::snprintf(bounds, sizeof bounds, "(%g, %g]", exclusive_min, max);
    throw UsageError("--" + name + ": expected a number in " + bounds + ", got '" + value + "'");
  }
  return parsed;
}

size_t Options::choice(const std::string& name, const std::vector<std::string>& choices) const {
  const std::string value = text(name);
  std::string list;
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == value) return i;
    list += (i ? "|" : "") + choices[i];
  }
  throw UsageError("--" + name + ": expected one of " + list + ", got '" + value + "'");
}

void Options::print_help(std::FILE* out) const {
  std::fprintf(out, "usage: epigemm %s [options]\n\n%s\n\noptions:\n", command_.c_str(), summary_.c_str());
  for (const Spec& s : specs_) {
    const std::string left = "--" + s.name + (s.value_name.empty() ? "" : " " + s.value_name);
    std::fprintf(out, "  %-24s %s", left.c_str(), s.help.c_str());
    if (!s.default_value.empty()) std::fprintf(out, " (default: %s)", s.default_value.c_str());
    std::fprintf(out, "\n");
  }
  std::fprintf(out, "  %-24s %s\n", "--help", "this text");
  if (!epilog_.empty()) std::fprintf(out, "\n%s\n", epilog_.c_str());
}

}  // namespace epigemm_cli
