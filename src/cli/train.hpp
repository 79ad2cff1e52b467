// vbagg-train as a library call: the options as a struct, then one function that a test can call
// in-process (the shape of GDAL's *_lib.cpp apps).
#pragma once

#include <string>
#include <vector>

namespace vbagg::cli {

struct TrainArgs {
  std::string config_path;        // run.yaml
  std::vector<std::string> sets;  // KEY=VALUE overrides
  std::string out;                // output folder; empty: output.dir
  int threads = 0;                // 0: train.threads
  bool progress = false;          // a progress bar on an interactive stderr
};

// Builds the dataset, fits, and writes model.yaml, run.resolved.yaml and history.csv; returns the
// output folder. Throws ConfigError for settings, DataError for data.
std::string run_train(const TrainArgs& args);

int train_main(int argc, char** argv);

}  // namespace vbagg::cli
