// Fitting a configured model to a split of built units, as a library call: vbagg-train runs it
// once, vbagg-eval --cv once per fold.
#pragma once

#include <string>

#include "config.hpp"
#include "io/build_dataset.hpp"
#include "io/model_file.hpp"
#include "model_setup.hpp"

namespace vbagg::cli {

struct TrainRun {
  io::ModelFile file;   // everything model.yaml holds
  std::string history;  // history.csv: one line per epoch
};

// Fits model.kind of `config` to the split's training units of `built` (raw inputs, as
// io::build_dataset gives them; standardised here on the training units). The split's holdout
// units drive train.patience. `progress` shows a progress bar (interactive runs).
TrainRun train_on_split(const Config& config, io::BuiltData built, const Split& split, int threads, bool progress);

}  // namespace vbagg::cli
