// The steps of io::build_dataset that a space-time build repeats per period (build_periods.cpp):
// one source's layers gathered onto the grid. Internal to io.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "aligned_layer.hpp"
#include "build_dataset.hpp"

namespace vbagg::io {

// One covariate file aligned to the grid and the bands read from it.
struct Layer {
  std::unique_ptr<AlignedLayer> raster;
  std::vector<int> bands;          // the bands read (1-based)
  std::vector<std::string> names;  // one per band read
};

// The covariate rasters aligned to the grid; each band of each file is one covariate.
struct Covariates {
  std::vector<Layer> layers;
  std::vector<std::string> names, paths;  // per covariate: its name and its file
  Index count() const { return static_cast<Index>(names.size()); }
};

// A build with the reference grid and nothing gathered yet.
BuiltData empty_build(const DataConfig& config, const std::string& base_dir);

// One source's units on the grid already in `out`: read, assigned and gathered into out.dataset,
// with every check but the constant covariates (which need every source's pixels). `load` carries
// each process's share of the pixels over earlier calls. Returns the source's covariate layers.
Covariates gather_source(const DataConfig& config, const std::string& base_dir, const Collective& processes,
                         std::vector<Index>& load, BuiltData& out);

// Constant covariates carry no information and break standardisation: report and leave them out.
void drop_constant_covariates(const Covariates& covs, const Collective& processes, BuiltData& out);

}  // namespace vbagg::io
