// What every vbagg app shares: logging set-up, the exit-code contract, progress display.
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>

namespace vbagg::cli {

// Exit codes: 0 success, 1 data or runtime error, 2 usage or configuration error.
inline constexpr int kExitData = 1;
inline constexpr int kExitUsage = 2;

// The release, as `--version` prints it and model.yaml and the maps record it ("vbagg 0.1.0").
std::string version_text();

// Adds -q/--quiet, -v/--verbose and --version to the app.
void add_common_flags(CLI::App& app, bool& quiet, bool& verbose);
// stderr logging at info (default), warn (-q) or debug (-v), named after the app.
void setup_logging(const std::string& app_name, bool quiet, bool verbose);

// Parses and runs body; maps CLI11 errors and ConfigError to 2, every other error to 1, each as
// one line on stderr naming the culprit.
int run_app(CLI::App& app, int argc, char** argv, const std::function<void()>& body);

// Progress on stderr unless logging is quiet: a bar redrawn in place on a terminal; elsewhere (a
// log file, a pipe, a batch job) GDAL's "0...10...20...30...40...50...60...70...80...90...100 - done.",
// which only ever appends.
class Progress {
 public:
  Progress(std::string label, long long total, bool enabled);
  void update(long long done, const std::string& suffix = "");
  void finish();

 private:
  std::string label_;
  long long total_;
  bool enabled_, terminal_;
  int last_percent_ = -1;
  int last_tick_ = -1;  // GDAL form: 40 ticks of 2.5 %
};

bool stderr_is_terminal();

// A fault to inject, for the tests of interrupted runs: with VBAGG_FAULT=<point>:<n> in the
// environment, the n-th call of fault_point(<point>) kills the process with SIGKILL, as an
// operator's kill -9 would at that moment, so those tests are exact rather than timed. Points:
// "epoch" (training, after each epoch), "output" (vbagg-train, after each output file), "strip"
// (vbagg-predict, after each strip of every map) and "map" (after each finished map).
void fault_point(const char* point);

}  // namespace vbagg::cli
