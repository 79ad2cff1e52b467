#include "build_dataset.hpp"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <memory>

#include "aligned_layer.hpp"
#include "assign.hpp"
#include "build_periods.hpp"
#include "build_report.hpp"
#include "coordinates.hpp"
#include "core/shard.hpp"
#include "gather_source.hpp"
#include "units.hpp"

namespace vbagg::io {

namespace {

namespace fs = std::filesystem;

std::string resolve(const std::string& path, const std::string& base) {
  if (path.empty() || base.empty() || fs::path(path).is_absolute()) return path;
  return (fs::path(base) / path).lexically_normal().string();
}

}  // namespace

std::string reference_grid_path(const DataConfig& c, const std::string& base) {
  // The periods share one grid: the first period's layer names it when the layer is a series.
  if (!c.time.empty()) return reference_grid_path(period_config(c, 0), base);
  if (c.grid.empty() || c.grid == "population") return resolve(c.population.path, base);
  for (const auto& l : c.covariates)
    if (l.covariate_name() == c.grid) return resolve(l.path, base);
  return resolve(c.grid, base);
}

Grid working_grid(const DataConfig& c, const std::string& base) {
  if (c.grid_refine < 1) throw ConfigError("data.grid_refine must be at least 1");
  const std::string path = reference_grid_path(c, base);
  DatasetPtr ref = open_raster(path);
  return Grid::of(*ref, path).refined(c.grid_refine);
}

namespace {

// The configured sources with relative paths resolved and defaults filled in, checked.
struct Sources {
  std::vector<LayerSpec> covariates;
  LayerSpec population;
  UnitsSpec units;
};

Sources resolved_sources(const DataConfig& config, const std::string& base_dir) {
  if (config.covariates.empty()) throw ConfigError("data.covariates is empty: at least one covariate raster is needed");
  if (config.population.path.empty()) throw ConfigError("data.population.path is not set");
  if (config.units.path.empty()) throw ConfigError("data.units.path is not set");
  if (config.strip_rows < 1) throw ConfigError("strip_rows must be positive");
  Sources s{config.covariates, config.population, config.units};
  for (size_t i = 0; i < s.covariates.size(); ++i) {
    auto& l = s.covariates[i];
    if (l.path.empty()) throw ConfigError("data.covariates[" + std::to_string(i) + "].path is not set");
    l.path = resolve(l.path, base_dir);
    l.name = l.covariate_name();
    if (l.resampling.empty()) l.resampling = kCovariateResampling;
    check_resampling(l.resampling, "data.covariates[" + std::to_string(i) + "].resampling");
  }
  s.population.path = resolve(s.population.path, base_dir);
  if (s.population.resampling.empty()) s.population.resampling = kPopulationResampling;
  check_resampling(s.population.resampling, "data.population.resampling");
  s.units.path = resolve(s.units.path, base_dir);
  return s;
}

Covariates open_covariates(const std::vector<LayerSpec>& specs, BuiltData& out) {
  Covariates c;
  for (const auto& l : specs) {
    Layer layer;
    layer.raster = std::make_unique<AlignedLayer>(l.path, l.resampling, out.grid, out.grid_path);
    const LayerBands given = layer_bands(l, layer.raster->band_descriptions());
    layer.bands = given.bands;
    layer.names = given.names;
    if (layer.raster->warped())
      out.notes.push_back("covariate '" + l.path + "' warped onto the reference grid (" + l.resampling + ")");
    c.names.insert(c.names.end(), layer.names.begin(), layer.names.end());
    c.paths.insert(c.paths.end(), layer.names.size(), l.path);
    c.layers.push_back(std::move(layer));
  }
  return c;
}

std::unique_ptr<AlignedLayer> open_population(const LayerSpec& pop, BuiltData& out) {
  auto population = std::make_unique<AlignedLayer>(pop.path, pop.resampling, out.grid, out.grid_path);
  if (population->bands() != 1)
    throw DataError("population raster '" + pop.path + "' has " + std::to_string(population->bands()) +
                    " bands; it must have one");
  if (population->warped())
    out.notes.push_back("population '" + pop.path + "' warped onto the reference grid (" + pop.resampling + ")");
  return population;
}

// Refuses, before any work, a pixel table that cannot fit in this machine's memory (a header
// claiming 10^6 x 10^6 pixels, units covering a continent at 30 m).
void check_memory(const UnitsRead& units, const std::vector<bool>& mine, const BuiltData& out, Index inputs) {
  double upper = 0;
  for (size_t u = 0; u < units.units.size(); ++u)
    if (mine[u] && units.units[u].geometry && units.units[u].problems.empty())
      upper += envelope_pixels(*units.units[u].geometry, out.grid);
  const double bytes = upper * (8.0 * static_cast<double>(inputs + 2) + 16.0);
  const double memory = static_cast<double>(::sysconf(_SC_PHYS_PAGES)) * static_cast<double>(::sysconf(_SC_PAGESIZE));
  if (bytes <= 0.8 * memory) return;
  char msg[512];
  std::snprintf(msg, sizeof msg,
                "the units cover up to %.3g pixels of the reference grid '%s' (%d x %d), a pixel table of about "
                "%.1f GB; this machine has %.1f GB of memory. Use a coarser grid (data.grid), crop the rasters, or "
                "share the units over more processes (mpirun)",
                upper, out.grid_path.c_str(), out.grid.width, out.grid.height, bytes / 1e9, memory / 1e9);
  throw DataError(msg);
}

// The units this process gathers: all of them in one process; in an MPI job its share, by the
// units' envelopes on the grid (what reading and assigning them costs). `load` carries each
// process's share over the sources.
std::vector<bool> own_units(const UnitsRead& units, const Grid& grid, const Collective& processes,
                            std::vector<Index>& load) {
  std::vector<bool> mine(units.units.size(), true);
  if (processes.size() == 1) return mine;
  std::vector<Index> size;
  // By geometry alone, not whether this period's count is usable, so that every period of a
  // space-time build shares the units out alike.
  for (const Unit& u : units.units)
    size.push_back(u.geometry ? static_cast<Index>(envelope_pixels(*u.geometry, grid)) : 0);
  const std::vector<int> owner = assign_bags(size, processes.size(), &load);
  for (size_t u = 0; u < mine.size(); ++u) mine[u] = owner[u] == processes.rank();
  return mine;
}

// Pass 1: which pixels each usable unit covers, strip by strip in row order (16 bytes a pixel).
std::vector<std::vector<PixelShare>> assign_units(const UnitsRead& units, const std::vector<bool>& mine,
                                                  const Grid& grid, const DataConfig& config) {
  std::vector<std::vector<PixelShare>> shares(units.units.size());
  std::vector<PixelShare> strip_shares;
  for (size_t u = 0; u < units.units.size(); ++u) {
    const Unit& unit = units.units[u];
    if (!mine[u] || !unit.geometry || !unit.problems.empty()) continue;
    int first, last;
    envelope_rows(*unit.geometry, grid, first, last);
    for (int row0 = first; row0 < last; row0 += config.strip_rows) {
      assign_pixels(*unit.geometry, grid, config.pixel_assignment, row0, std::min(config.strip_rows, last - row0),
                    strip_shares);
      shares[u].insert(shares[u].end(), strip_shares.begin(), strip_shares.end());
    }
  }
  return shares;
}

// How often each layer had no value at the usable units' assigned pixels.
struct MissingCounts {
  std::vector<Index> covariate;
  Index population = 0, negative_population = 0, seen = 0;
};

// Every unit's pixel counts, area and population, from the process that gathered it (the others
// hold zeros, so the sums are copies), and the missing-data counts summed over the processes.
void share_outcomes(const UnitsRead& units, const std::vector<bool>& mine, const Collective& processes,
                    std::vector<UnitSummary>& summaries, MissingCounts& missing) {
  const auto n = static_cast<Index>(units.units.size());
  Matrix outcome = Matrix::Zero(4, n);
  for (Index u = 0; u < n; ++u) {
    const UnitSummary& s = summaries[static_cast<size_t>(u)];
    if (mine[static_cast<size_t>(u)])
      outcome.col(u) << static_cast<double>(s.pixels), static_cast<double>(s.dropped_pixels), s.area, s.population;
  }
  processes.sum(outcome);
  for (Index u = 0; u < n; ++u) {
    UnitSummary& s = summaries[static_cast<size_t>(u)];
    s.pixels = static_cast<Index>(outcome(0, u));
    s.dropped_pixels = static_cast<Index>(outcome(1, u));
    s.area = outcome(2, u);
    s.population = outcome(3, u);
  }
  Vector counts(static_cast<Index>(missing.covariate.size()) + 3);
  for (size_t c = 0; c < missing.covariate.size(); ++c)
    counts[static_cast<Index>(c)] = static_cast<double>(missing.covariate[c]);
  const Index k = static_cast<Index>(missing.covariate.size());
  counts.tail(3) << static_cast<double>(missing.population), static_cast<double>(missing.negative_population),
      static_cast<double>(missing.seen);
  processes.sum(counts);
  for (size_t c = 0; c < missing.covariate.size(); ++c)
    missing.covariate[c] = static_cast<Index>(counts[static_cast<Index>(c)]);
  missing.population = static_cast<Index>(counts[k]);
  missing.negative_population = static_cast<Index>(counts[k + 1]);
  missing.seen = static_cast<Index>(counts[k + 2]);
}

// Pass 2: reads the layers strip by strip (one strip of each in memory) straight into the pixel
// table, sized for every assigned pixel and compacted as pixels with missing data are skipped. A
// unit left without pixels or population gets the problem; the others become bags.
MissingCounts gather_pixels(UnitsRead& units, std::vector<std::vector<PixelShare>>& shares,
                            const std::vector<bool>& mine, const Covariates& covs, const AlignedLayer& population,
                            const DataConfig& config, const Collective& processes, BuiltData& out) {
  const Grid& grid = out.grid;
  const Index Dc = covs.count();
  const CoordinateMapper coordinates(grid);
  const int Dx = config.coordinates ? coordinates.count() : 0;
  if (config.coordinates && !coordinates.crs_known())
    out.notes.push_back("the reference grid has no CRS: coordinates are in its map units");
  Index assigned = 0;
  for (const auto& sh : shares) assigned += static_cast<Index>(sh.size());
  Dataset& d = out.dataset;
  d.inputs.resize(Dc + Dx, assigned);
  d.population.resize(assigned);
  d.coverage.resize(assigned);
  d.offsets.assign(1, 0);
  out.cell.resize(static_cast<size_t>(assigned));
  out.num_coordinates = Dx;
  std::vector<double> response, trials;
  std::vector<std::vector<double>> strip(static_cast<size_t>(Dc));
  std::vector<double> pop_strip;
  MissingCounts missing;
  missing.covariate.assign(static_cast<size_t>(Dc), 0);
  Index pos = 0;
  std::vector<UnitSummary> summaries(units.units.size());
  std::vector<Index> local_bag(units.units.size(), -1);
  for (size_t u = 0; u < units.units.size(); ++u) {
    Unit& unit = units.units[u];
    UnitSummary& summary = summaries[u];
    summary = {unit.id, 0, unit.response, unit.trials, 0, 0.0, 0, 0.0};
    if (!mine[u] || !unit.problems.empty()) continue;
    const Index unit_start = pos;
    const auto& sh = shares[u];
    for (size_t k0 = 0; k0 < sh.size();) {
      // The shares of one strip: pass 1 produced them strip by strip in row order.
      const int row0 = sh[k0].row - (sh[k0].row - sh.front().row) % config.strip_rows;
      size_t k1 = k0;
      int c0 = grid.width, c1 = 0, r1 = row0;
      while (k1 < sh.size() && sh[k1].row < row0 + config.strip_rows) {
        c0 = std::min(c0, sh[k1].col);
        c1 = std::max(c1, sh[k1].col + 1);
        r1 = std::max(r1, sh[k1].row + 1);
        ++k1;
      }
      const int cols = c1 - c0, rows = r1 - row0;
      size_t b = 0;
      for (const auto& l : covs.layers)
        for (int band : l.bands) l.raster->read(band, c0, row0, cols, rows, strip[b++]);
      population.read(1, c0, row0, cols, rows, pop_strip);
      for (size_t k = k0; k < k1; ++k) {
        const PixelShare& s = sh[k];
        const size_t idx = static_cast<size_t>(s.row - row0) * cols + (s.col - c0);
        const double p = pop_strip[idx];
        bool ok = std::isfinite(p);
        if (ok && p < 0) {
          ++missing.negative_population;
          ok = false;
        }
        if (!std::isfinite(p)) ++missing.population;
        ++missing.seen;
        for (Index c = 0; c < Dc; ++c)
          if (!std::isfinite(strip[static_cast<size_t>(c)][idx])) {
            ++missing.covariate[static_cast<size_t>(c)];
            ok = false;
          }
        if (!ok) {
          ++summary.dropped_pixels;
          continue;
        }
        for (Index c = 0; c < Dc; ++c) d.inputs(c, pos) = strip[static_cast<size_t>(c)][idx];
        if (Dx) coordinates(s.col, s.row, d.inputs.col(pos).data() + Dc);
        d.population[pos] = p;
        d.coverage[pos] = s.fraction;
        out.cell[static_cast<size_t>(pos)] = static_cast<std::int64_t>(s.row) * grid.width + s.col;
        summary.population += p * s.fraction;
        summary.area += s.fraction;
        ++summary.pixels;
        ++pos;
      }
      k0 = k1;
    }
    std::vector<PixelShare>().swap(shares[u]);
    if (summary.pixels == 0 || !(summary.population > 0)) {
      pos = unit_start;  // the unit's pixels are overwritten by the next unit
      continue;
    }
    local_bag[u] = static_cast<Index>(d.offsets.size()) - 1;
    d.offsets.push_back(pos);
    response.push_back(unit.response);
    trials.push_back(unit.trials);
    d.bag_ids.push_back(unit.id);
  }
  // In an MPI job every process learns every unit's outcome and the missing-data counts, so all
  // of them drop the same units and name the same empty layers.
  if (processes.size() > 1) share_outcomes(units, mine, processes, summaries, missing);
  for (size_t u = 0; u < units.units.size(); ++u) {
    Unit& unit = units.units[u];
    const UnitSummary& summary = summaries[u];
    if (!unit.problems.empty()) continue;
    if (summary.pixels == 0)
      unit.problems.push_back(
          summary.dropped_pixels
              ? "no pixels with every covariate and population"
              : "no pixels, as it lies outside the grid or is smaller than the pixel assignment can see");
    else if (!(summary.population > 0))
      unit.problems.push_back("zero population");
    if (!unit.problems.empty()) continue;
    if (local_bag[u] >= 0) d.global_bag.push_back(static_cast<Index>(out.units.size()));
    out.units.push_back(summary);
  }
  if (processes.size() == 1) d.global_bag.clear();
  d.inputs.conservativeResize(Eigen::NoChange, pos);
  d.population.conservativeResize(pos);
  d.coverage.conservativeResize(pos);
  out.cell.resize(static_cast<size_t>(pos));
  d.response = Eigen::Map<const Vector>(response.data(), static_cast<Index>(response.size()));
  if (!config.units.trials_field.empty())
    d.trials = Eigen::Map<const Vector>(trials.data(), static_cast<Index>(trials.size()));
  return missing;
}

// A layer without data over the units explains every unit's missing pixels: name it, and note
// one missing at many of them.
void name_empty_layers(const MissingCounts& missing, const Covariates& covs, const std::string& population_path,
                       BuiltData& out) {
  if (missing.negative_population)
    out.notes.push_back(std::to_string(missing.negative_population) + " pixels with negative population in '" +
                        population_path + "' treated as missing");
  const Index seen = missing.seen;
  auto share = [&](Index n) { return static_cast<double>(n) / static_cast<double>(std::max<Index>(seen, 1)); };
  for (Index c = 0; c < covs.count(); ++c) {
    const Index m = missing.covariate[static_cast<size_t>(c)];
    const std::string layer =
        "covariate '" + covs.names[static_cast<size_t>(c)] + "' ('" + covs.paths[static_cast<size_t>(c)] + "')";
    if (seen > 0 && m == seen)
      throw DataError(layer + " has no value at any of the units' " + std::to_string(seen) +
                      " pixels: every one is nodata or outside the raster (check its nodata value, extent and CRS)");
    if (share(m) > 0.2)
      out.notes.push_back(layer + " has no value at " + std::to_string(static_cast<int>(100 * share(m))) +
                          " % of the units' pixels; they are dropped");
  }
  if (seen > 0 && missing.population == seen)
    throw DataError("population '" + population_path + "' has no value at any of the units' " + std::to_string(seen) +
                    " pixels (check its nodata value, extent and CRS)");
}

// Bad units: stop with one line per reason, or drop them and say so.
void settle_bad_units(const UnitsRead& units, const DataConfig& config, const std::string& units_path, BuiltData& out) {
  std::vector<UnitIssue> issues;
  size_t bad = 0;
  for (const auto& u : units.units) {
    if (u.problems.empty()) continue;
    ++bad;
    for (const auto& p : u.problems) issues.push_back({u.id, p});
  }
  if (!issues.empty() && config.on_bad_unit == BadUnitPolicy::stop) {
    std::string message = std::to_string(bad) + " of " + std::to_string(units.units.size()) + " units in '" +
                          units_path + "' cannot be used (set data.on_bad_unit: drop to leave them out):";
    for (const auto& line : grouped_issue_lines(issues)) message += "\n" + line;
    throw UnusableUnits(message, std::move(issues));
  }
  out.dropped = std::move(issues);
  if (bad == units.units.size())
    throw DataError("every unit in '" + units_path + "' was dropped; nothing is left to fit");
}

}  // namespace

// Constant covariates carry no information and break standardisation: report and leave them out.
void drop_constant_covariates(const Covariates& covs, const Collective& processes, BuiltData& out) {
  Dataset& d = out.dataset;
  const Index Dc = covs.count(), Dx = out.num_coordinates, N = d.num_pixels();
  // Each covariate's range over every process's pixels.
  const Matrix range = processes.row_ranges(d.inputs.topRows(Dc));
  std::vector<Index> keep;
  for (Index k = 0; k < Dc; ++k) {
    if (range(k, 0) == range(k, 1)) {
      out.notes.push_back("covariate '" + covs.names[static_cast<size_t>(k)] + "' ('" +
                          covs.paths[static_cast<size_t>(k)] + "') is constant over the units' pixels and is left out");
      continue;
    }
    keep.push_back(k);
  }
  if (keep.empty()) throw DataError("every covariate is constant over the units' pixels; nothing to learn from");
  for (Index k = Dc; k < Dc + Dx; ++k) keep.push_back(k);
  if (static_cast<Index>(keep.size()) != Dc + Dx) {
    Matrix kept(static_cast<Index>(keep.size()), N);
    for (size_t j = 0; j < keep.size(); ++j) kept.row(static_cast<Index>(j)) = d.inputs.row(keep[j]);
    d.inputs = std::move(kept);
  }
  for (Index k : keep)
    if (k < Dc) out.covariates.push_back(covs.names[static_cast<size_t>(k)]);
  d.input_names = out.covariates;
  if (Dx == 2) d.input_names.insert(d.input_names.end(), {"x_km", "y_km"});
  if (Dx == 3) d.input_names.insert(d.input_names.end(), {"chord_x_km", "chord_y_km", "chord_z_km"});
}

namespace {

// One source ready to gather: its layers aligned to the grid and its units read.
struct OpenSource {
  Sources src;
  Covariates covs;
  std::unique_ptr<AlignedLayer> population;
  UnitsRead units;
};

OpenSource open_source(const DataConfig& config, const std::string& base_dir, BuiltData& out) {
  OpenSource s{resolved_sources(config, base_dir), {}, nullptr, {}};
  s.covs = open_covariates(s.src.covariates, out);
  s.population = open_population(s.src.population, out);
  s.units = read_units(s.src.units, out.grid);
  out.notes.insert(out.notes.end(), s.units.notes.begin(), s.units.notes.end());
  for (const auto& line : grouped_issue_lines(s.units.repaired)) out.notes.push_back(line.substr(2));
  return s;
}

// Assigns and gathers `units` (all of a source's, or a batch of them) into out.dataset.
MissingCounts gather_units(UnitsRead& units, const OpenSource& s, const DataConfig& config, const Collective& processes,
                           std::vector<Index>& load, BuiltData& out) {
  const std::vector<bool> mine = own_units(units, out.grid, processes, load);
  check_memory(units, mine, out, s.covs.count() + (config.coordinates ? CoordinateMapper(out.grid).count() : 0));
  std::vector<std::vector<PixelShare>> shares = assign_units(units, mine, out.grid, config);
  return gather_pixels(units, shares, mine, s.covs, *s.population, config, processes, out);
}

}  // namespace

// One source's units on the grid already in `out`: read, assigned and gathered into out.dataset,
// with every check but the constant covariates (which need every source's pixels). Returns the
// source's covariate layers.
Covariates gather_source(const DataConfig& config, const std::string& base_dir, const Collective& processes,
                         std::vector<Index>& load, BuiltData& out) {
  OpenSource s = open_source(config, base_dir, out);
  const MissingCounts missing = gather_units(s.units, s, config, processes, load, out);
  name_empty_layers(missing, s.covs, s.src.population.path, out);
  settle_bad_units(s.units, config, s.src.units.path, out);
  out.warnings = implausible_units(out, config.units.point_buffer >= 0);
  return std::move(s.covs);
}

namespace {

// The configuration of source s >= 1 on its own: its units, its covariates and population when it
// has them, on the first source's reference grid.
DataConfig source_config(const DataConfig& config, size_t s, const std::string& base_dir) {
  const SourceConfig& more = config.more_sources[s - 1];
  DataConfig c = config;
  c.more_sources.clear();
  c.grid = reference_grid_path(config, base_dir);
  c.units = more.units;
  if (!more.covariates.empty()) c.covariates = more.covariates;
  if (!more.population.path.empty()) c.population = more.population;
  return c;
}

// Appends a later source's gathered units to the first source's: ids prefixed with the source's
// name, its notes, dropped units and warnings named after it.
void append_source(BuiltData& out, BuiltData part, int s, std::vector<Dataset>& parts) {
  const std::string name = out.sources[static_cast<size_t>(s)];
  for (auto& id : part.dataset.bag_ids) id = name + ":" + id;
  for (auto& u : part.units) {
    u.id = name + ":" + u.id;
    u.source = s;
  }
  for (auto& d : part.dropped) d.id = name + ":" + d.id;
  // The part's bags follow the units of the sources before it.
  for (Index& g : part.dataset.global_bag) g += static_cast<Index>(out.units.size());
  out.units.insert(out.units.end(), part.units.begin(), part.units.end());
  out.cell.insert(out.cell.end(), part.cell.begin(), part.cell.end());
  out.dropped.insert(out.dropped.end(), part.dropped.begin(), part.dropped.end());
  for (const auto& n : part.notes) out.notes.push_back("source '" + name + "': " + n);
  for (const auto& w : part.warnings) out.warnings.push_back("source '" + name + "': " + w);
  parts.push_back(std::move(part.dataset));
}

// Consecutive usable units whose envelopes hold about `batch_pixels` pixels together (a larger unit
// alone), in unit order.
std::vector<std::vector<size_t>> unit_batches(const UnitsRead& units, const Grid& grid, Index batch_pixels) {
  std::vector<std::vector<size_t>> batches;
  double size = 0;
  for (size_t u = 0; u < units.units.size(); ++u) {
    const Unit& unit = units.units[u];
    if (!unit.geometry || !unit.problems.empty()) continue;
    const double pixels = envelope_pixels(*unit.geometry, grid);
    if (batches.empty() || size + pixels > static_cast<double>(batch_pixels)) {
      batches.emplace_back();
      size = 0;
    }
    batches.back().push_back(u);
    size += pixels;
  }
  return batches;
}

void add_missing(MissingCounts& total, const MissingCounts& more) {
  for (size_t c = 0; c < more.covariate.size(); ++c) total.covariate[c] += more.covariate[c];
  total.population += more.population;
  total.negative_population += more.negative_population;
  total.seen += more.seen;
}

}  // namespace

// A build with the reference grid and nothing gathered yet.
BuiltData empty_build(const DataConfig& config, const std::string& base_dir) {
  ensure_gdal_registered();
  BuiltData out;
  out.grid_path = reference_grid_path(config, base_dir);
  out.grid = working_grid(config, base_dir);
  const std::string refined = config.grid_refine > 1
                                  ? ", each pixel divided into " + std::to_string(config.grid_refine) + " x " +
                                        std::to_string(config.grid_refine)
                                  : "";
  out.notes.push_back("reference grid '" + out.grid_path + "'" + refined + ": " + out.grid.describe());
  if (!config.more_sources.empty()) {
    out.sources.push_back(config.units.name);
    for (const auto& m : config.more_sources) out.sources.push_back(m.units.name);
  }
  return out;
}

namespace {

// A later source must have the first source's covariates.
void check_source_covariates(const BuiltData& out, size_t s, const std::vector<std::string>& own,
                             const std::vector<std::string>& first) {
  if (own != first)
    throw DataError("source '" + out.sources[s] + "' has the covariates " + listed_ids(own) + " but the first source " +
                    listed_ids(first) + ": every source needs the same covariates, in the same order");
}

// The first source's warnings carry its name when there are several sources.
void name_first_source_warnings(const DataConfig& config, BuiltData& out) {
  if (config.more_sources.empty() || config.units.name.empty()) return;
  for (auto& w : out.warnings) w = "source '" + config.units.name + "': " + w;
}

}  // namespace

BuiltData build_dataset(const DataConfig& config, const std::string& base_dir, const Collective& processes) {
  if (!config.time.empty()) return build_periods(config, base_dir, processes);
  BuiltData out = empty_build(config, base_dir);
  std::vector<Index> load;  // each process's share of the pixels so far, over the sources
  const Covariates covs = gather_source(config, base_dir, processes, load, out);
  if (!config.more_sources.empty()) {
    name_first_source_warnings(config, out);
    std::vector<Dataset> parts{std::move(out.dataset)};
    for (size_t s = 1; s <= config.more_sources.size(); ++s) {
      BuiltData part;
      part.grid = out.grid;
      part.grid_path = out.grid_path;
      const DataConfig c = source_config(config, s, base_dir);
      check_source_covariates(out, s, gather_source(c, base_dir, processes, load, part).names, covs.names);
      append_source(out, std::move(part), static_cast<int>(s), parts);
    }
    out.dataset = join_sources(parts);
  }
  drop_constant_covariates(covs, processes, out);
  // A process of an MPI job may hold no unit; the others' data are checked where they are.
  if (out.dataset.num_bags() > 0 || processes.size() == 1) out.dataset.validate();
  return out;
}

BuiltData build_dataset_in_batches(const DataConfig& config, const std::string& base_dir, Index batch_pixels,
                                   const std::function<void(BuiltData&)>& consume, const Collective& processes) {
  if (batch_pixels < 1) throw ConfigError("the units' batch must hold at least one pixel");
  if (!config.time.empty()) return build_periods_in_batches(config, base_dir, batch_pixels, consume, processes);
  BuiltData out = empty_build(config, base_dir);
  std::vector<Index> load;
  std::vector<std::string> first;  // the first source's covariates
  std::vector<Dataset> no_parts;
  for (size_t s = 0; s <= config.more_sources.size(); ++s) {
    const DataConfig c = s == 0 ? config : source_config(config, s, base_dir);
    // The source's notes, problems and warnings, named after it as build_dataset names them.
    BuiltData part;
    part.grid = out.grid;
    part.grid_path = out.grid_path;
    OpenSource src = open_source(c, base_dir, part);
    if (s == 0)
      first = src.covs.names;
    else
      check_source_covariates(out, s, src.covs.names, first);
    const std::string prefix = s > 0 ? out.sources[s] + ":" : "";
    MissingCounts missing;
    missing.covariate.assign(static_cast<size_t>(src.covs.count()), 0);
    for (const std::vector<size_t>& batch : unit_batches(src.units, out.grid, batch_pixels)) {
      UnitsRead some;
      for (size_t u : batch) some.units.push_back(std::move(src.units.units[u]));
      BuiltData b;
      b.grid = out.grid;
      b.grid_path = out.grid_path;
      add_missing(missing, gather_units(some, src, c, processes, load, b));
      for (size_t k = 0; k < batch.size(); ++k) src.units.units[batch[k]] = std::move(some.units[k]);
      // The batch's bags as they stand in the whole build: every covariate (none is dropped as
      // constant over a batch), ids named after the source, places among every source's units.
      Dataset& d = b.dataset;
      b.covariates = src.covs.names;
      b.sources = out.sources;
      if (d.global_bag.empty())
        for (Index a = 0; a < d.num_bags(); ++a) d.global_bag.push_back(a);
      b.first_unit = static_cast<Index>(out.units.size() + part.units.size());
      for (Index& g : d.global_bag) g += b.first_unit;
      if (!out.sources.empty()) d.source.assign(static_cast<size_t>(d.num_bags()), static_cast<int>(s));
      for (auto& id : d.bag_ids) id = prefix + id;
      part.units.insert(part.units.end(), b.units.begin(), b.units.end());
      for (auto& u : b.units) {
        u.id = prefix + u.id;
        u.source = static_cast<int>(s);
      }
      if (d.num_bags() > 0) d.validate();
      consume(b);
    }
    name_empty_layers(missing, src.covs, src.src.population.path, part);
    settle_bad_units(src.units, c, src.src.units.path, part);
    part.warnings = implausible_units(part, c.units.point_buffer >= 0);
    if (s == 0) {
      out.units = std::move(part.units);
      out.dropped = std::move(part.dropped);
      out.notes.insert(out.notes.end(), part.notes.begin(), part.notes.end());
      out.warnings = std::move(part.warnings);
      name_first_source_warnings(config, out);
    } else {
      append_source(out, std::move(part), static_cast<int>(s), no_parts);
    }
  }
  out.covariates = first;
  out.num_coordinates = config.coordinates ? CoordinateMapper(out.grid).count() : 0;
  return out;
}

Index total_pixels(const BuiltData& built) {
  Index n = 0;
  for (const UnitSummary& u : built.units) n += u.pixels;
  return n;
}

}  // namespace vbagg::io
