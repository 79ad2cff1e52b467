#include "pixel_strips.hpp"

#include <cmath>

namespace vbagg::cli {

PixelSources open_sources(const LoadedModel& m, const io::DataConfig& data, const Vector& time) {
  PixelSources s;
  s.time = time;
  s.grid_path = io::reference_grid_path(data);
  s.grid = io::working_grid(data);
  s.covariates = match_covariates(m.file.covariates, covariate_band_names(data), m.config.source());
  for (const auto& l : data.covariates)
    s.layers.push_back(std::make_unique<io::AlignedLayer>(l.path, l.resampling, s.grid, s.grid_path));
  if (!data.population.path.empty())
    s.population =
        std::make_unique<io::AlignedLayer>(data.population.path, data.population.resampling, s.grid, s.grid_path);
  const int coordinates = io::CoordinateMapper(s.grid).count();
  if (m.file.coordinates && coordinates != m.file.coordinates)
    throw DataError("the model was trained with " + std::to_string(m.file.coordinates) + " coordinate inputs but '" +
                    s.grid_path + "' gives " + std::to_string(coordinates));
  return s;
}

void read_strip(PixelSources& src, const LoadedModel& m, const io::CoordinateMapper& coords, int row0, int rows,
                std::vector<std::vector<double>>& values, Strip& s) {
  const int width = src.grid.width;
  const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(width);
  s.row0 = row0;
  s.rows = rows;
  for (size_t k = 0; k < src.covariates.size(); ++k)
    src.layers[src.covariates[k].layer]->read(src.covariates[k].band, 0, row0, width, rows, values[k]);
  if (src.population) src.population->read(1, 0, row0, width, rows, s.population);
  s.valid.clear();
  for (size_t i = 0; i < n; ++i) {
    bool ok = true;
    for (size_t k = 0; ok && k < values.size(); ++k) ok = std::isfinite(values[k][i]);
    if (ok) s.valid.push_back(static_cast<Index>(i));
  }
  if (m.predictor->needs_pixel_units()) {
    s.inputs.resize(0, static_cast<Index>(s.valid.size()));
    return;
  }
  const Index Dc = static_cast<Index>(values.size()), Dx = m.file.coordinates;
  const Index Dt = src.time.size();
  s.inputs.resize(Dc + Dx + Dt, static_cast<Index>(s.valid.size()));
  for (size_t j = 0; j < s.valid.size(); ++j) {
    const size_t i = static_cast<size_t>(s.valid[j]);
    for (Index k = 0; k < Dc; ++k) s.inputs(k, static_cast<Index>(j)) = values[static_cast<size_t>(k)][i];
    if (Dx)
      coords(static_cast<int>(i % static_cast<size_t>(width)), row0 + static_cast<int>(i / static_cast<size_t>(width)),
             s.inputs.col(static_cast<Index>(j)).data() + Dc);
    if (Dt) s.inputs.col(static_cast<Index>(j)).tail(Dt) = src.time;
  }
  m.file.standardization.apply(s.inputs);
}

}  // namespace vbagg::cli
