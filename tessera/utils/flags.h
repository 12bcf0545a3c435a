#pragma once

// A small command-line parser for training programs: "--name value" options
// bound to variables, "--name" switches, and --help.
//
//   utils::Flags flags("Trains ...");
//   flags.add("--epochs", options.epochs, "passes over the training set");
//   flags.parse(argc, argv);  // exits with usage on --help or a bad value

#include <cstdio>
#include <cstdlib>
#include <functional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <vector>

namespace tessera::utils {

class Flags {
 public:
  explicit Flags(std::string description) : description_(std::move(description)) {}

  // Binds "--name VALUE" to `target` (an integer, floating-point or string
  // variable, whose current value is the default).
  template <typename T>
  void add(const std::string& name, T& target, const std::string& help) {
    flags_.push_back({name, help, default_text(target), [&target](const std::string& text) {
                        if constexpr (std::is_same_v<T, std::string>) {
                          target = text;
                        } else if constexpr (std::is_floating_point_v<T>) {
                          target = static_cast<T>(std::stod(text));
                        } else if constexpr (std::is_unsigned_v<T>) {
                          if (text.find('-') != std::string::npos) throw std::invalid_argument(text);
                          target = static_cast<T>(std::stoull(text));
                        } else {
                          target = static_cast<T>(std::stoll(text));
                        }
                      }});
  }
  // Binds "--name" (no value) to set `target` to true.
  void add_switch(const std::string& name, bool& target, const std::string& help) {
    flags_.push_back({name, help, "", nullptr, &target});
  }

  void parse(int argc, char** argv) {
    program_ = argv[0];
    for (int i = 1; i < argc; ++i) {
      const std::string arg = argv[i];
      if (arg == "--help" || arg == "-h") usage(stdout, 0);
      Flag* flag = find(arg);
      if (flag == nullptr) fail("unknown option " + arg);
      if (flag->is_switch != nullptr) {
        *flag->is_switch = true;
        continue;
      }
      if (i + 1 >= argc) fail("missing value after " + arg);
      try {
        flag->set(argv[++i]);
      } catch (const std::logic_error&) {
        fail("bad value for " + arg + ": " + argv[i]);
      }
    }
  }

  // Prints `problem` and the usage, and exits with status 2.
  [[noreturn]] void fail(const std::string& problem) const {
    std::fprintf(stderr, "%s: %s\n", program_.c_str(), problem.c_str());
    usage(stderr, 2);
  }

 private:
  struct Flag {
    std::string name, help, default_value;
    std::function<void(const std::string&)> set;
    bool* is_switch = nullptr;
  };

  template <typename T>
  static std::string default_text(const T& value) {
    if constexpr (std::is_same_v<T, std::string>) {
      return value;
    } else {
      std::string text = std::to_string(value);
      if constexpr (std::is_floating_point_v<T>) {
        // 0.001000 -> 0.001
        while (text.size() > 1 && text.back() == '0') text.pop_back();
        if (text.back() == '.') text.pop_back();
      }
      return text;
    }
  }

  Flag* find(const std::string& name) {
    for (Flag& flag : flags_)
      if (flag.name == name) return &flag;
    return nullptr;
  }

  [[noreturn]] void usage(FILE* out, int status) const {
    std::fprintf(out, "%s\n\nusage: %s [options]\n", description_.c_str(), program_.c_str());
    for (const Flag& flag : flags_) {
      std::string left = flag.name + (flag.is_switch ? "" : " VALUE");
      std::fprintf(out, "  %-22s %s", left.c_str(), flag.help.c_str());
      if (!flag.is_switch && !flag.default_value.empty())
        std::fprintf(out, " (default %s)", flag.default_value.c_str());
      std::fprintf(out, "\n");
    }
    std::exit(status);
  }

  std::string description_;
  std::string program_ = "example";
  std::vector<Flag> flags_;
};

}  // namespace tessera::utils
