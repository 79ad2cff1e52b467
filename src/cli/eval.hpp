// vbagg-eval as a library call: the options as a struct, then one function that a test can call
// in-process (the shape of GDAL's *_lib.cpp apps).
#pragma once

#include <string>
#include <vector>

#include "evaluation.hpp"

namespace vbagg::cli {

struct EvalArgs {
  std::string model_path;         // model.yaml written by vbagg-train
  std::string config_path;        // evaluate on other data; empty: the model's own configuration
  std::vector<std::string> sets;  // KEY=VALUE overrides
  std::string split = "holdout";  // train, holdout or all (ignored with folds)
  int folds = 0;                  // > 0: spatially blocked cross-validation with this many folds
  long long cv_seed = -1;         // seed of the blocks; < 0: train.holdout.seed
  std::string cv_by = "space";    // space: k-means blocks of units; time: blocks of consecutive periods
  std::string cv_blocks;          // the source whose units place the space blocks (empty: the first)
  std::string unit;               // the unit whose seasonal curve the report draws (empty: the most cases)
  std::string truth;              // raster of the true intensity, for pixel metrics
  std::string truth_task;         // the task the truth is of (empty: the first)
  std::string json, report;       // files to write (empty: none)
  std::string units_csv;          // a row per evaluated unit (empty: none)
  int threads = 0;                // 0: train.threads
  bool progress = false;          // a progress bar on an interactive stderr
};

struct EvalResult {
  Metrics metrics;  // with folds: pooled over the folds
  std::string table, json;
};

// Computes the metrics and writes the JSON and report files asked for.
EvalResult run_eval(const EvalArgs& args);

int eval_main(int argc, char** argv);

}  // namespace vbagg::cli
