// The rasters a prediction reads, strip by strip: each covariate the model needs (matched by name;
// a series' band of its period), the population, and the pixels' model inputs.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "io/aligned_layer.hpp"
#include "io/coordinates.hpp"
#include "model_data.hpp"

namespace vbagg::cli {

// The rasters of one period (or of the only one), aligned to the configuration's reference grid.
struct PixelSources {
  io::Grid grid;
  std::string grid_path;
  std::vector<CovariateSource> covariates;  // in the model's input order
  std::vector<std::unique_ptr<io::AlignedLayer>> layers;
  std::unique_ptr<io::AlignedLayer> population;
  Vector time;  // the period's time inputs (kernel.hpp) of a space-time model; empty otherwise
};

// `data`: one period's configuration (io::period_config) and its time inputs, or the only one's.
PixelSources open_sources(const LoadedModel& m, const io::DataConfig& data, const Vector& time = {});

// Rows [row0, row0 + rows) of the grid: the pixels with every covariate, their model inputs
// (standardised; coordinates, then time inputs, last) and the population of every pixel.
struct Strip {
  int row0 = 0, rows = 0;
  std::vector<Index> valid;  // positions in the strip (row-major)
  Matrix inputs;             // one column per valid pixel; no rows when the predictor reads none
  std::vector<double> population;
};

// `values`: scratch of one row-major strip per covariate.
void read_strip(PixelSources& src, const LoadedModel& m, const io::CoordinateMapper& coords, int row0, int rows,
                std::vector<std::vector<double>>& values, Strip& s);

}  // namespace vbagg::cli
