// SPDX-License-Identifier: GPL-2.0-only
// Logging for humans (spdlog), one logger per module. Not the event trace: logs have no stable
// schema. Hot-path debug output must be guarded by `MMUSIM_LOG_DEBUG` so it compiles away.
#pragma once

#include <spdlog/spdlog.h>

#include <memory>
#include <string>

namespace mmusim::log {

// The logger of a module ("config", "kernel", "core", "tlb", ...), created on first use with the
// current global level. Loggers write to stderr.
std::shared_ptr<spdlog::logger> get(const std::string& module);

// "off", "error", "warn", "info", "debug", "trace". Applies to every existing and future logger.
void set_level(const std::string& level);
std::string level();

}  // namespace mmusim::log

#ifdef MMUSIM_DEBUG_LOG
#define MMUSIM_LOG_DEBUG(logger, ...) (logger)->debug(__VA_ARGS__)
#else
#define MMUSIM_LOG_DEBUG(logger, ...) ((void)0)
#endif
