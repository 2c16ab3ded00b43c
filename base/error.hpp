// SPDX-License-Identifier: GPL-2.0-only
// Two kinds of failure, as in gem5's fatal/panic split:
//  - UserError: the user's mistake (bad config, bad argument, impossible combination). The message
//    names the file:line, the key and what is allowed. `mmusim` exits with status 2.
//  - InternalError: a broken invariant or a bug in the simulator. The message says what broke and
//    shows the state. `mmusim` exits with status 1.
#pragma once

#include <fmt/format.h>

#include <stdexcept>
#include <string>

namespace mmusim {

class UserError : public std::runtime_error {
 public:
  explicit UserError(const std::string& msg) : std::runtime_error(msg) {}
};

class InternalError : public std::runtime_error {
 public:
  explicit InternalError(const std::string& msg) : std::runtime_error(msg) {}
};

// Not a bug of the simulator: the simulated system broke a liveness invariant (the watchdog found
// an access that faults again and again, PORTMAP §3.3 item 9). Exit status 1, like a broken
// invariant, with a message that says so.
class SimulatedSystemError : public InternalError {
 public:
  explicit SimulatedSystemError(const std::string& msg) : InternalError(msg) {}
};

template <typename... Args>
[[noreturn]] void fatal(fmt::format_string<Args...> f, Args&&... args) {
  throw UserError(fmt::format(f, std::forward<Args>(args)...));
}

template <typename... Args>
[[noreturn]] void panic(fmt::format_string<Args...> f, Args&&... args) {
  throw InternalError(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace mmusim

// Checks that stay on in release builds: the simulator's numbers are only worth something if its
// state is consistent, and these are off the per-access path.
#define MMUSIM_CHECK(cond, ...)                                                         \
  do {                                                                                  \
    if (__builtin_expect(!(cond), 0))                                                   \
      ::mmusim::panic("{}:{}: check '{}' failed: {}", __FILE__, __LINE__, #cond,         \
                      ::fmt::format(__VA_ARGS__));                                      \
  } while (0)
