// Spatially blocked K-fold cross-validation over units (MODEL.md section 8): folds from k-means
// on the unit centroids, one refit per fold with the model's configuration, the metrics of each
// fold on its held-out units, and their mean, sd and pooled coverage.
#pragma once

#include <string>
#include <vector>

#include "evaluation.hpp"

namespace vbagg::cli {

// How folds group the units: spatial blocks (k-means on centroids; a space-time unit's periods stay
// together), or, for a space-time model, blocks of consecutive periods.
enum class FoldBlocks { space, time };

struct CrossValidation {
  unsigned long long seed = 0;
  FoldBlocks blocks = FoldBlocks::space;
  std::vector<Metrics> folds;  // each fold's metrics on its held-out units
  // Every unit held out once: coverage, PIT and pixel coverage pooled over the folds (weighted by
  // units and pixels), observed and predicted totals of every unit; split "cv".
  Metrics pooled;
};

// Refits m's configuration once per fold (train.patience is off: the held-out fold is the test
// set, not an early-stopping set) and evaluates each fit on its fold. report_dir: as build_data's.
// Spatial blocks are placed by the units of source blocks_source (spatial_folds' `placing`): they
// are held out as a cross-validation of that source's fit alone holds them out.
CrossValidation cross_validate(const LoadedModel& m, Index folds, unsigned long long seed, const Truth& truth,
                               int samples, int threads, bool progress, const std::string& report_dir,
                               FoldBlocks blocks = FoldBlocks::space, Index blocks_source = 0);

// Fold k of K holds periods [k P / K, (k + 1) P / K) of P; every unit's fold, from its period.
// Throws ConfigError without a time axis or with more folds than periods.
std::vector<Index> time_folds(const io::BuiltData& built, Index folds);

// Mean and sd over folds of every metric, with the pooled coverage and PIT.
std::string cross_validation_table(const CrossValidation& cv);
std::string cross_validation_json(const CrossValidation& cv);

}  // namespace vbagg::cli
