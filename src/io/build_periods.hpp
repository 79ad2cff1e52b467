// io::build_dataset with data.time: every period built as a one-period run builds it
// (period_config), then joined, each pixel carrying its period's time inputs. Internal to io.
#pragma once

#include <functional>
#include <string>

#include "build_dataset.hpp"

namespace vbagg::io {

BuiltData build_periods(const DataConfig& config, const std::string& base_dir, const Collective& processes);

// build_dataset_in_batches of every period in turn, each batch's bags numbered and given time
// inputs as build_periods gives them.
BuiltData build_periods_in_batches(const DataConfig& config, const std::string& base_dir, Index batch_pixels,
                                   const std::function<void(BuiltData&)>& consume, const Collective& processes);

}  // namespace vbagg::io
