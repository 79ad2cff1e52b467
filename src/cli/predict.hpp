// vbagg-predict as a library call: the options as a struct, then one function that a test can call
// in-process (the shape of GDAL's *_lib.cpp apps).
#pragma once

#include <string>
#include <vector>

namespace vbagg::cli {

struct PredictArgs {
  std::string model_path;             // model.yaml written by vbagg-train
  std::string config_path;            // a run configuration for another area or year; empty: the model's own
  std::vector<std::string> sets;      // KEY=VALUE overrides
  std::string out;                    // output folder
  std::vector<double> quantiles;      // empty: predict.quantiles
  std::vector<double> exceedance;     // empty: predict.exceedance
  std::string format = "GTiff";       // GTiff or COG
  std::vector<std::string> creation;  // GDAL creation options KEY=VALUE
  std::string style;                  // qgis or none; empty: predict.style
  int threads = 0;                    // 0: train.threads
  bool split_periods = false;         // a space-time model's maps as one file per period
  std::vector<std::string> spans;     // spans of periods to average, beside predict.spans
  bool progress = false;              // a progress bar on an interactive stderr
};

// Writes one map per quantity over the whole grid with its QGIS style and, when the configuration
// has units, units.csv and units.gpkg. Throws ConfigError for settings, DataError for data.
void run_predict(const PredictArgs& args);

int predict_main(int argc, char** argv);

}  // namespace vbagg::cli
