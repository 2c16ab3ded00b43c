// SPDX-License-Identifier: GPL-2.0-only
#include "base/log.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>

#include "base/error.hpp"

namespace mmusim::log {
namespace {
spdlog::level::level_enum g_level = spdlog::level::warn;
}

std::shared_ptr<spdlog::logger> get(const std::string& module) {
  if (auto l = spdlog::get(module)) return l;
  auto l = spdlog::stderr_color_mt(module);
  l->set_pattern("[%n] %^%l%$: %v");
  l->set_level(g_level);
  return l;
}

void set_level(const std::string& level) {
  auto lv = spdlog::level::from_str(level);
  if (lv == spdlog::level::off && level != "off")
    fatal("log level '{}' is not one of: off, error, warn, info, debug, trace", level);
  g_level = lv;
  spdlog::apply_all([lv](std::shared_ptr<spdlog::logger> l) { l->set_level(lv); });
}

std::string level() {
  auto sv = spdlog::level::to_string_view(g_level);
  return std::string(sv.data(), sv.size());
}

}  // namespace mmusim::log
