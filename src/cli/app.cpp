#include "app.hpp"

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>

#include "core/products.hpp"
#include "core/types.hpp"
#include "processes.hpp"

namespace vbagg::cli {

std::string version_text() { return std::string("vbagg ") + VBAGG_VERSION; }

void add_common_flags(CLI::App& app, bool& quiet, bool& verbose) {
  app.set_version_flag("--version", version_text(), "Print the vbagg release and exit");
  app.add_flag("-q,--quiet", quiet, "Only warnings and errors on stderr; no progress bar");
  app.add_flag("-v,--verbose", verbose, "Debug messages (every epoch, every aligned layer)");
}

void setup_logging(const std::string& app_name, bool quiet, bool verbose) {
  auto logger = spdlog::stderr_color_mt(app_name);
  logger->set_pattern("%^%l%$ %v");
  logger->set_level(quiet ? spdlog::level::warn : verbose ? spdlog::level::debug : spdlog::level::info);
  // In an MPI job the leading process speaks for all; the others only report their own errors.
  if (!leading_process()) {
    logger->set_pattern("%^%l%$ process " + std::to_string(process_rank()) + ": %v");
    logger->set_level(spdlog::level::err);
  }
  spdlog::set_default_logger(logger);
  // Chosen here, before any thread starts: it may load OpenBLAS.
  spdlog::debug("dense products by {}", products_backend_description());
}

bool stderr_is_terminal() { return ::isatty(STDERR_FILENO) == 1; }

void fault_point(const char* point) {
  static const std::string fault = [] {
    const char* f = std::getenv("VBAGG_FAULT");
    return std::string(f ? f : "");
  }();
  if (fault.empty()) return;
  const size_t colon = fault.rfind(':');
  if (colon == std::string::npos || fault.compare(0, colon, point) != 0) return;
  static std::atomic<long long> calls{0};
  if (++calls == std::atoll(fault.c_str() + colon + 1)) std::raise(SIGKILL);
}

namespace {

int run_body(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // Usage and --help once, from the leading process.
    if (!leading_process()) return e.get_exit_code() == 0 ? 0 : kExitUsage;
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  const std::string who = process_count() > 1 ? " (process " + std::to_string(process_rank()) + " of " +
                                                    std::to_string(process_count()) + ")"
                                              : "";
  try {
    body();
    return 0;
  } catch (const ConfigError& e) {
    std::fprintf(stderr, "%s: error%s: %s\n", app.get_name().c_str(), who.c_str(), e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "%s: error%s: %s\n", app.get_name().c_str(), who.c_str(), e.what());
    return kExitData;
  }
}

}  // namespace

int run_app(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  start_processes(argc, argv);
  const int code = run_body(app, argc, argv, body);
  // A process of an MPI job that failed alone would leave the others waiting in a reduction: it
  // ends the job. Errors that every process meets (a bad setting) end it the same way.
  if (code != 0 && process_count() > 1) abort_processes(code);
  stop_processes();
  return code;
}

Progress::Progress(std::string label, long long total, bool enabled)
    : label_(std::move(label)), total_(total), enabled_(enabled && total > 0), terminal_(stderr_is_terminal()) {}

void Progress::update(long long done, const std::string& suffix) {
  if (!enabled_) return;
  if (!terminal_) {
    // GDAL's form for logs and pipes: a dot every 2.5 %, the tens written out.
    const int tick = static_cast<int>(std::min<long long>(40, 40 * done / total_));
    for (int t = last_tick_ + 1; t <= tick; ++t) {
      if (t % 4)
        std::fputc('.', stderr);
      else
        std::fprintf(stderr, "%d%s", t / 4 * 10, t == 40 ? " - done.\n" : "");
    }
    last_tick_ = std::max(last_tick_, tick);
    std::fflush(stderr);
    return;
  }
  const int percent = static_cast<int>(100 * done / total_);
  if (percent == last_percent_ && suffix.empty()) return;
  last_percent_ = percent;
  const int width = 30, filled = width * percent / 100;
  std::fprintf(stderr, "\r%s [%s%s] %3d%% %s\x1b[K", label_.c_str(),
               std::string(static_cast<size_t>(filled), '#').c_str(),
               std::string(static_cast<size_t>(width - filled), '.').c_str(), percent, suffix.c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (!enabled_) return;
  if (terminal_)
    std::fprintf(stderr, "\r\x1b[K");
  else
    update(total_);
}

}  // namespace vbagg::cli
