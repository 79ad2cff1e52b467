// vbagg-simulate: a synthetic country (GeoTIFFs, units GeoPackage, truth) or swiss-roll tables.
#include "simulate.hpp"

#include <gdal_alg.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <memory>
#include <sstream>

#include "app.hpp"
#include "core/types.hpp"
#include "io/atomic_file.hpp"
#include "io/gdal_handles.hpp"
#include "io/raster_writer.hpp"
#include "processes.hpp"

namespace vbagg::cli {

namespace {

namespace fs = std::filesystem;

// The country sits near the equator on a 0.05 degree (about 5.5 km) WGS 84 grid.
io::Grid country_grid(int width, int height) {
  io::Grid g;
  g.width = width;
  g.height = height;
  g.transform = {34.0, 0.05, 0, 1.0, 0, -0.05};
  OGRSpatialReference srs;
  srs.importFromEPSG(4326);
  char* wkt = nullptr;
  const char* opts[] = {"FORMAT=WKT2_2018", nullptr};
  srs.exportToWkt(&wkt, opts);
  g.crs_wkt = wkt;
  CPLFree(wkt);
  return g;
}

void write_field(const std::string& path, const io::Grid& grid, const Vector& values, const std::string& description,
                 const std::string& unit) {
  io::RasterWriter w(path, grid, description, unit, io::RasterFormat{});
  std::vector<float> v(static_cast<size_t>(values.size()));
  for (Index i = 0; i < values.size(); ++i) v[static_cast<size_t>(i)] = static_cast<float>(values[i]);
  w.write_rows(0, grid.height, v);
  w.finish();
}

// Each value 0..count-1 of an index raster as one multipolygon (a discrete Voronoi cell can touch
// itself only diagonally, so a cell may be several polygons).
std::vector<OGRMultiPolygon> polygons_of(const io::Grid& grid, const std::vector<int>& index, int count,
                                         OGRSpatialReference& srs) {
  GDALDriver* mem = GetGDALDriverManager()->GetDriverByName("MEM");
  io::DatasetPtr raster(mem->Create("", grid.width, grid.height, 1, GDT_Int32, nullptr));
  double gt[6];
  for (int k = 0; k < 6; ++k) gt[k] = grid.transform[static_cast<size_t>(k)];
  raster->SetGeoTransform(gt);
  raster->SetProjection(grid.crs_wkt.c_str());
  std::vector<int> ids(index);
  if (raster->GetRasterBand(1)->RasterIO(GF_Write, 0, 0, grid.width, grid.height, ids.data(), grid.width, grid.height,
                                         GDT_Int32, 0, 0) != CE_None)
    throw DataError("cannot rasterize the synthetic units: " + io::gdal_error());
  GDALDriver* memv = GetGDALDriverManager()->GetDriverByName("Memory");
  io::DatasetPtr tmp(memv->Create("", 0, 0, 0, GDT_Unknown, nullptr));
  srs = *raster->GetSpatialRef();
  OGRLayer* poly = tmp->CreateLayer("poly", &srs, wkbPolygon, nullptr);
  OGRFieldDefn field("unit", OFTInteger);
  poly->CreateField(&field);
  if (GDALPolygonize(raster->GetRasterBand(1), nullptr, OGRLayer::ToHandle(poly), 0, nullptr, nullptr, nullptr) !=
      CE_None)
    throw DataError("cannot polygonize the synthetic units: " + io::gdal_error());
  std::vector<OGRMultiPolygon> parts(static_cast<size_t>(count));
  poly->ResetReading();
  for (auto& f : *poly) parts[static_cast<size_t>(f->GetFieldAsInteger(0))].addGeometry(f->GetGeometryRef());
  return parts;
}

// One GeoPackage layer: a text ID and integer fields per feature, with its geometry.
struct Layer {
  std::string name;
  OGRwkbGeometryType type;
  std::vector<std::string> ids;
  std::vector<std::pair<std::string, Vector>> fields;
  std::vector<std::unique_ptr<OGRGeometry>> geometries;
};

void write_layer(const std::string& path, OGRSpatialReference& srs, const Layer& l) {
  io::AtomicOutput out(path);
  GDALDriver* gpkg = GetGDALDriverManager()->GetDriverByName("GPKG");
  {
    io::DatasetPtr vec(gpkg->Create(out.temp_path().c_str(), 0, 0, 0, GDT_Unknown, nullptr));
    if (!vec) throw DataError("cannot create '" + path + "': " + io::gdal_error());
    OGRLayer* layer = vec->CreateLayer(l.name.c_str(), &srs, l.type, nullptr);
    OGRFieldDefn id("ID", OFTString);
    layer->CreateField(&id);
    for (const auto& [name, values] : l.fields) {
      OGRFieldDefn f(name.c_str(), OFTInteger64);
      layer->CreateField(&f);
    }
    if (layer->StartTransaction() != OGRERR_NONE) throw DataError("cannot write '" + path + "': " + io::gdal_error());
    for (size_t u = 0; u < l.ids.size(); ++u) {
      OGRFeature f(layer->GetLayerDefn());
      f.SetField(0, l.ids[u].c_str());
      for (size_t k = 0; k < l.fields.size(); ++k)
        f.SetField(static_cast<int>(k + 1), static_cast<GIntBig>(l.fields[k].second[static_cast<Index>(u)]));
      f.SetGeometry(l.geometries[u].get());
      if (layer->CreateFeature(&f) != OGRERR_NONE) throw DataError("cannot write '" + path + "': " + io::gdal_error());
    }
    if (layer->CommitTransaction() != OGRERR_NONE) throw DataError("cannot write '" + path + "': " + io::gdal_error());
  }
  out.commit();
}

std::string numbered(const char* prefix, size_t k, int digits) {
  char name[32];
  std::snprintf(name, sizeof name, "%s%0*zu", prefix, digits, k + 1);
  return name;
}

std::vector<std::string> month_labels(const CountryOptions& o);

// units.gpkg (the units with cases, the unit survey and their province), provinces.gpkg (each
// province's count) and clusters.gpkg (the survey clusters as points at their pixels' centres).
void write_vectors(const std::string& dir, const io::Grid& grid, const Country& c,
                   const std::vector<std::string>& labels) {
  OGRSpatialReference srs;
  const int units = static_cast<int>(c.counts.size()), provinces = static_cast<int>(c.province_counts.size());
  std::vector<OGRMultiPolygon> unit_parts = polygons_of(grid, c.unit_of_pixel, units, srs);
  Layer u{"units", wkbMultiPolygon, {}, {}, {}};
  Vector province(units);
  for (int k = 0; k < units; ++k) {
    u.ids.push_back(numbered("U", static_cast<size_t>(k), 3));
    u.geometries.push_back(std::make_unique<OGRMultiPolygon>(unit_parts[static_cast<size_t>(k)]));
    province[k] = c.province_of_unit[static_cast<size_t>(k)] + 1;
  }
  u.fields = {{"cases", c.counts}, {"tested", c.tested}, {"positive", c.positives}, {"province", province}};
  // A seasonal country's counts as a field per month: cases_YYYYMM.
  for (Index m = 0; m < c.monthly_counts.cols(); ++m) {
    const std::string& label = labels[static_cast<size_t>(m)];
    u.fields.push_back({"cases_" + label.substr(0, 4) + label.substr(5, 2), c.monthly_counts.col(m)});
  }
  write_layer(dir + "/units.gpkg", srs, u);

  std::vector<int> province_of_pixel(c.unit_of_pixel.size());
  for (size_t i = 0; i < province_of_pixel.size(); ++i)
    province_of_pixel[i] = c.province_of_unit[static_cast<size_t>(c.unit_of_pixel[i])];
  std::vector<OGRMultiPolygon> province_parts = polygons_of(grid, province_of_pixel, provinces, srs);
  Layer p{"provinces", wkbMultiPolygon, {}, {{"cases", c.province_counts}}, {}};
  for (int k = 0; k < provinces; ++k) {
    p.ids.push_back(numbered("P", static_cast<size_t>(k), 2));
    p.geometries.push_back(std::make_unique<OGRMultiPolygon>(province_parts[static_cast<size_t>(k)]));
  }
  write_layer(dir + "/provinces.gpkg", srs, p);

  Layer cl{"clusters", wkbPoint, {}, {{"tested", c.cluster_tested}, {"positive", c.cluster_positives}}, {}};
  for (size_t k = 0; k < c.cluster_pixel.size(); ++k) {
    const Index i = c.cluster_pixel[k];
    const double col = static_cast<double>(i % c.width) + 0.5, row = static_cast<double>(i / c.width) + 0.5;
    const auto& t = grid.transform;
    cl.ids.push_back(numbered("C", k, 3));
    cl.geometries.push_back(std::make_unique<OGRPoint>(t[0] + col * t[1] + row * t[2], t[3] + col * t[4] + row * t[5]));
  }
  write_layer(dir + "/clusters.gpkg", srs, cl);
}

// Each unit's truth beside its count: the expected count before overdispersion (the sum of
// population times true intensity over its pixels) and its unit effect u_a, so an experiment can
// score what the true model itself would cover.
void write_truth_units(const std::string& path, const Country& c) {
  std::ostringstream s;
  s.precision(17);
  s << "ID,expected,unit_effect\n";
  for (Index k = 0; k < c.counts.size(); ++k)
    s << numbered("U", static_cast<size_t>(k), 3) << ',' << c.expected[k] << ',' << c.unit_effect[k] << '\n';
  io::write_text_atomic(path, s.str());
}

// The rasters every configuration of the country shares.
std::string country_layers(const Country& c) {
  std::ostringstream s;
  s << "# Written by vbagg-simulate --kind country. Paths are relative to this file.\n"
    << "data:\n  covariates:\n";
  for (const auto& n : c.covariate_names) s << "    - path: " << n << ".tif\n";
  s << "  population:\n    path: population.tif\n";
  return s.str();
}

// The run configuration of the case counts, or (prevalence) of the survey's positives among
// those tested with the binomial model.
std::string country_config(const Country& c, bool prevalence) {
  std::ostringstream s;
  s << country_layers(c) << "  units:\n    path: units.gpkg\n    id_field: ID\n";
  if (!prevalence) return s.str() + "    response_field: cases\n";
  s << "    response_field: positive\n    trials_field: tested\n"
    << "model:\n  likelihood: binomial\n";
  return s.str();
}

// A joint fit of two tasks (tasks.yaml): incidence from the units' and provinces' counts,
// prevalence from the survey clusters, on shared latent fields.
std::string tasks_config(const Country& c) {
  std::ostringstream s;
  s << country_layers(c) << "  sources:\n"
    << "    - { name: units, path: units.gpkg, id_field: ID, response_field: cases, task: incidence }\n"
    << "    - { name: provinces, path: provinces.gpkg, id_field: ID, response_field: cases, task: incidence }\n"
    << "    - { name: clusters, path: clusters.gpkg, id_field: ID, response_field: positive, trials_field: tested, "
       "point_buffer: 0, task: prevalence }\n";
  return s.str();
}

// Joint fits of several sources: the units' and the provinces' counts (counts.yaml), or the survey
// clusters and the units' survey (survey.yaml).
std::string sources_config(const Country& c, bool survey) {
  std::ostringstream s;
  s << country_layers(c) << "  sources:\n";
  if (!survey) {
    s << "    - { name: units, path: units.gpkg, id_field: ID, response_field: cases }\n"
      << "    - { name: provinces, path: provinces.gpkg, id_field: ID, response_field: cases }\n";
    return s.str();
  }
  s << "    - { name: clusters, path: clusters.gpkg, id_field: ID, response_field: positive, trials_field: tested, "
       "point_buffer: 0 }\n"
    << "    - { name: units, path: units.gpkg, id_field: ID, response_field: positive, trials_field: tested }\n"
    << "model:\n  likelihood: binomial\n";
  return s.str();
}

// The month labels of a seasonal country: YYYY-MM from January of its first year.
std::vector<std::string> month_labels(const CountryOptions& o) {
  std::vector<std::string> labels;
  for (int m = 0; m < o.months; ++m) {
    char label[16];
    std::snprintf(label, sizeof label, "%04d-%02d", o.first_year + m / 12, m % 12 + 1);
    labels.push_back(label);
  }
  return labels;
}

// A Float32 GeoTIFF with one band per value set, each band described by its label.
void write_bands(const std::string& path, const io::Grid& grid, const std::vector<Vector>& bands,
                 const std::vector<std::string>& labels) {
  io::AtomicOutput out(path);
  {
    GDALDriver* gtiff = GetGDALDriverManager()->GetDriverByName("GTiff");
    const char* options[] = {"COMPRESS=DEFLATE", "TILED=YES", nullptr};
    io::DatasetPtr ds(gtiff->Create(out.temp_path().c_str(), grid.width, grid.height, static_cast<int>(bands.size()),
                                    GDT_Float32, const_cast<char**>(options)));
    if (!ds) throw DataError("cannot create '" + path + "': " + io::gdal_error());
    double gt[6];
    for (int k = 0; k < 6; ++k) gt[k] = grid.transform[static_cast<size_t>(k)];
    ds->SetGeoTransform(gt);
    ds->SetProjection(grid.crs_wkt.c_str());
    for (size_t b = 0; b < bands.size(); ++b) {
      GDALRasterBand* band = ds->GetRasterBand(static_cast<int>(b + 1));
      band->SetNoDataValue(io::kOutputNodata);
      band->SetDescription(labels[b].c_str());
      std::vector<float> v(static_cast<size_t>(bands[b].size()));
      for (Index i = 0; i < bands[b].size(); ++i)
        v[static_cast<size_t>(i)] =
            std::isnan(bands[b][i]) ? static_cast<float>(io::kOutputNodata) : static_cast<float>(bands[b][i]);
      if (band->RasterIO(GF_Write, 0, 0, grid.width, grid.height, v.data(), grid.width, grid.height, GDT_Float32, 0,
                         0) != CE_None)
        throw DataError("cannot write '" + path + "': " + io::gdal_error());
    }
  }
  out.commit();
}

// A seasonal country's months: the rainfall series (one band per month), the true monthly
// intensities, the counts per unit and month in the long layout (cases_monthly.csv; units.gpkg
// holds them as a field per month), and the run configurations of both layouts.
void write_months(const std::string& dir, const io::Grid& grid, const Country& c, const CountryOptions& o) {
  const std::vector<std::string> labels = month_labels(o);
  write_bands(dir + "/rain_monthly.tif", grid, c.monthly_rain, labels);
  for (int m = 0; m < o.months; ++m)
    write_field(dir + "/truth_intensity_" + labels[static_cast<size_t>(m)] + ".tif", grid,
                c.monthly_intensity[static_cast<size_t>(m)], "true intensity " + labels[static_cast<size_t>(m)],
                "cases per person per month");
  std::ostringstream table;
  table << "ID,period,cases\n";
  for (Index u = 0; u < c.monthly_counts.rows(); ++u)
    for (int m = 0; m < o.months; ++m)
      table << numbered("U", static_cast<size_t>(u), 3) << "," << labels[static_cast<size_t>(m)] << ","
            << static_cast<long long>(c.monthly_counts(u, m)) << "\n";
  io::write_text_atomic(dir + "/cases_monthly.csv", table.str());
  std::ostringstream common;
  common << country_layers(c) << "  time: " << labels.front() << ".." << labels.back() << "\n";
  const std::string rain = "    - { path: rain_monthly.tif, name: rain, series: bands }\n";
  std::string layers = common.str();
  layers.insert(layers.find("  population:"), rain);
  io::write_text_atomic(dir + "/seasonal.yaml", layers +
                                                    "  units:\n    path: units.gpkg\n    id_field: ID\n"
                                                    "    response_field: cases_{year}{month}\n");
  io::write_text_atomic(dir + "/seasonal_long.yaml",
                        layers +
                            "  units:\n    path: units.gpkg\n    id_field: ID\n    response_table: cases_monthly.csv\n"
                            "    period_field: period\n    response_field: cases\n");
}

}  // namespace

void simulate_country(const std::string& dir, const CountryOptions& o) {
  io::ensure_gdal_registered();
  io::ensure_writable_dir(dir);
  const Country c = make_country(o);
  const io::Grid grid = country_grid(o.width, o.height);
  for (size_t k = 0; k < c.covariates.size(); ++k)
    write_field(dir + "/" + c.covariate_names[k] + ".tif", grid, c.covariates[k], c.covariate_names[k], "");
  write_field(dir + "/population.tif", grid, c.population, "population", "people");
  write_field(dir + "/truth_intensity.tif", grid, c.intensity, "true intensity", "cases per person");
  write_vectors(dir, grid, c, month_labels(o));
  write_truth_units(dir + "/truth_units.csv", c);
  write_field(dir + "/truth_prevalence.tif", grid, c.prevalence, "true prevalence", "prevalence (proportion positive)");
  io::write_text_atomic(dir + "/data.yaml", country_config(c, false));
  io::write_text_atomic(dir + "/prevalence.yaml", country_config(c, true));
  io::write_text_atomic(dir + "/counts.yaml", sources_config(c, false));
  io::write_text_atomic(dir + "/survey.yaml", sources_config(c, true));
  io::write_text_atomic(dir + "/tasks.yaml", tasks_config(c));
  if (o.months > 0) write_months(dir, grid, c, o);
  spdlog::info("synthetic country: {} x {} pixels, {} covariates, {} units, {:.0f} cases in all, written to {}",
               o.width, o.height, c.covariates.size(), o.units, c.counts.sum(), dir);
  if (o.months > 0) spdlog::info("{} months, {:.0f} cases in all", o.months, c.monthly_counts.sum());
}

void simulate_swissroll(const std::string& dir, const SwissRollOptions& o) {
  io::ensure_writable_dir(dir);
  const SwissRoll r = make_swiss_roll(o);
  std::ostringstream pixels, bags;
  pixels.precision(17);
  pixels << "bag";
  for (Index d = 0; d < r.data.num_inputs(); ++d) pixels << ",x" << d;
  pixels << ",rate,count\n";
  bags << "bag,size,count\n";
  for (Index a = 0; a < r.data.num_bags(); ++a) {
    bags << a << "," << r.data.bag_size(a) << "," << r.data.response[a] << "\n";
    for (Index i = r.data.bag_begin(a); i < r.data.bag_begin(a) + r.data.bag_size(a); ++i) {
      pixels << a;
      for (Index d = 0; d < r.data.num_inputs(); ++d) pixels << "," << r.data.inputs(d, i);
      pixels << "," << r.rate[i] << "," << r.pixel_counts[i] << "\n";
    }
  }
  io::write_text_atomic(dir + "/pixels.csv", pixels.str());
  io::write_text_atomic(dir + "/bags.csv", bags.str());
  spdlog::info("swiss roll: {} bags, {} points in R^{}, written to {}", o.bags, r.data.num_pixels(), o.dim, dir);
}

int simulate_main(int argc, char** argv) {
  CLI::App app(
      "Writes synthetic data with a known truth: a country (covariate and population GeoTIFFs; units.gpkg with "
      "case counts and a prevalence survey per unit, provinces.gpkg with coarser units' counts, clusters.gpkg with "
      "survey clusters as points; the true intensity and prevalence; and data.yaml, prevalence.yaml, counts.yaml "
      "(units and provinces in one fit), survey.yaml (clusters and the units' survey) and tasks.yaml (incidence and "
      "prevalence on shared latent fields) to train on; with --months a seasonal country with monthly counts "
      "and seasonal.yaml) or the "
      "swiss-roll "
      "bag problem (pixels.csv, bags.csv). Deterministic for a seed.",
      "vbagg-simulate");
  std::string kind, out, size = "160x120", covariate_effects = "linear", field_kernel = "rbf";
  unsigned long long seed = 1;
  int units = 60, covariates = 4, bags = 100, months = 0, field_frequencies = 40;
  double bag_mean = 150, bag_sd = 50, unit_noise = 0, survey_noise = 0;
  bool quiet = false, verbose = false;
  app.add_option("--kind", kind, "What to simulate")->required()->check(CLI::IsMember({"country", "swissroll"}));
  app.add_option("--out", out, "Output folder (created if missing)")->required();
  app.add_option("--seed", seed, "Random seed")->capture_default_str();
  app.add_option("--size", size, "country: grid size WIDTHxHEIGHT in pixels")->capture_default_str();
  app.add_option("--units", units, "country: number of administrative units")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  app.add_option("--covariates", covariates, "country: number of covariate rasters")
      ->capture_default_str()
      ->check(CLI::Range(1, 20));
  app.add_option("--unit-noise", unit_noise,
                 "country: overdispersion; each unit's expected count is multiplied by a lognormal factor "
                 "e^u, u ~ N(-sd^2/2, sd^2), with this sd (0: plain Poisson counts; real data often 0.3-0.7). "
                 "truth_units.csv holds each unit's expected cases before the factor, and its u")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3.0));
  app.add_option("--survey-noise", survey_noise,
                 "country: overdispersion of the surveys; each survey unit's and each cluster's prevalence "
                 "moves by its own e ~ N(0, sd^2) on the logit scale before its positives are drawn, with this sd "
                 "(0: plain binomial surveys; household surveys often show 0.3-1). The true prevalence map is "
                 "unchanged")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3.0));
  app.add_option("--field-frequencies", field_frequencies,
                 "country: random Fourier features of the latent field (the smooth spatial part of the log "
                 "intensity and of the prevalence's logit). With more, the field is closer to a draw of a "
                 "Gaussian process with the --field-kernel's kernel; the covariates, population, units and every "
                 "other draw stay the same")
      ->capture_default_str()
      ->check(CLI::Range(1, 100000));
  app.add_option("--field-kernel", field_kernel,
                 "country: the kernel whose spectrum the latent field's frequencies come from, at the same "
                 "lengthscale: rbf (smooth at every scale; vbagg's space kernel for one period) or matern52 (more "
                 "variation at fine scales; vbagg's space kernel for a space-time fit). The directions and phases, "
                 "the covariates, population, units and every other draw stay the same")
      ->capture_default_str()
      ->check(CLI::IsMember({"rbf", "matern52"}));
  app.add_option("--covariate-effects", covariate_effects,
                 "country: how the covariates enter the log intensity: linear (a coefficient each, the fixed "
                 "effects of R disaggregation's model) or nonlinear (a hump in temperature, a threshold in "
                 "rainfall, the product of night lights and travel time; linear in any further covariate), which "
                 "a linear mean cannot follow. The covariates, population, field and units stay the same")
      ->capture_default_str()
      ->check(CLI::IsMember({"linear", "nonlinear"}));
  app.add_option("--months", months,
                 "country: months of a seasonal country from January 2019 (0: none). Adds the monthly rainfall "
                 "(rain_monthly.tif, a band per month), the true monthly intensities (truth_intensity_<YYYY-MM>.tif), "
                 "the counts per unit and month (units.gpkg fields cases_YYYYMM and cases_monthly.csv) and the "
                 "space-time configurations seasonal.yaml (a field per month) and seasonal_long.yaml (the long table)")
      ->capture_default_str()
      ->check(CLI::Range(0, 600));
  app.add_option("--bags", bags, "swissroll: number of bags")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--bag-mean", bag_mean, "swissroll: mean bag size")->capture_default_str();
  app.add_option("--bag-sd", bag_sd, "swissroll: standard deviation of the bag size")->capture_default_str();
  add_common_flags(app, quiet, verbose);
  return run_app(app, argc, argv, [&] {
    setup_logging("vbagg-simulate", quiet, verbose);
    require_one_process("vbagg-simulate");
    if (kind == "country") {
      CountryOptions o;
      const auto x = size.find('x');
      try {
        if (x == std::string::npos) throw std::invalid_argument("no x");
        o.width = std::stoi(size.substr(0, x));
        o.height = std::stoi(size.substr(x + 1));
      } catch (const std::exception&) {
        throw ConfigError("--size " + size + ": expected WIDTHxHEIGHT, e.g. 160x120");
      }
      o.units = units;
      o.covariates = covariates;
      o.unit_noise_sd = unit_noise;
      o.survey_noise_sd = survey_noise;
      o.months = months;
      o.field_frequencies = field_frequencies;
      o.field_kernel =
          field_kernel == "matern52" ? CountryOptions::FieldKernel::matern52 : CountryOptions::FieldKernel::rbf;
      o.covariate_effects = covariate_effects == "nonlinear" ? CountryOptions::CovariateEffects::nonlinear
                                                             : CountryOptions::CovariateEffects::linear;
      o.seed = seed;
      simulate_country(out, o);
    } else {
      SwissRollOptions o;
      o.bags = bags;
      o.size_mean = bag_mean;
      o.size_sd = bag_sd;
      o.seed = seed;
      simulate_swissroll(out, o);
    }
  });
}

}  // namespace vbagg::cli
