// vbagg-simulate: a synthetic country (GeoTIFFs, units GeoPackage, truth) or swiss-roll tables.
#include "simulate.hpp"

#include <gdal_alg.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <sstream>

#include "app.hpp"
#include "core/types.hpp"
#include "io/atomic_file.hpp"
#include "io/gdal_handles.hpp"
#include "io/raster_writer.hpp"

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

// Polygonizes the unit index raster into a GeoPackage layer "units" with fields ID and cases.
void write_units(const std::string& path, const io::Grid& grid, const Country& c) {
  GDALDriver* mem = GetGDALDriverManager()->GetDriverByName("MEM");
  io::DatasetPtr raster(mem->Create("", grid.width, grid.height, 1, GDT_Int32, nullptr));
  double gt[6];
  for (int k = 0; k < 6; ++k) gt[k] = grid.transform[static_cast<size_t>(k)];
  raster->SetGeoTransform(gt);
  raster->SetProjection(grid.crs_wkt.c_str());
  std::vector<int> ids(c.unit_of_pixel);
  if (raster->GetRasterBand(1)->RasterIO(GF_Write, 0, 0, grid.width, grid.height, ids.data(), grid.width, grid.height,
                                         GDT_Int32, 0, 0) != CE_None)
    throw DataError("cannot rasterize the synthetic units: " + io::gdal_error());
  // Polygonize into memory, then gather each unit's polygons (a discrete Voronoi cell can touch
  // itself only diagonally) into one multipolygon feature.
  GDALDriver* memv = GetGDALDriverManager()->GetDriverByName("Memory");
  io::DatasetPtr tmp(memv->Create("", 0, 0, 0, GDT_Unknown, nullptr));
  OGRSpatialReference srs(*raster->GetSpatialRef());
  OGRLayer* poly = tmp->CreateLayer("poly", &srs, wkbPolygon, nullptr);
  OGRFieldDefn index("unit", OFTInteger);
  poly->CreateField(&index);
  if (GDALPolygonize(raster->GetRasterBand(1), nullptr, OGRLayer::ToHandle(poly), 0, nullptr, nullptr, nullptr) !=
      CE_None)
    throw DataError("cannot polygonize the synthetic units: " + io::gdal_error());
  std::vector<OGRMultiPolygon> parts(static_cast<size_t>(c.counts.size()));
  poly->ResetReading();
  for (auto& f : *poly) parts[static_cast<size_t>(f->GetFieldAsInteger(0))].addGeometry(f->GetGeometryRef());

  io::AtomicOutput out(path);
  GDALDriver* gpkg = GetGDALDriverManager()->GetDriverByName("GPKG");
  {
    io::DatasetPtr vec(gpkg->Create(out.temp_path().c_str(), 0, 0, 0, GDT_Unknown, nullptr));
    if (!vec) throw DataError("cannot create '" + path + "': " + io::gdal_error());
    OGRLayer* layer = vec->CreateLayer("units", &srs, wkbMultiPolygon, nullptr);
    OGRFieldDefn id("ID", OFTString), cases("cases", OFTInteger64), tested("tested", OFTInteger64),
        positive("positive", OFTInteger64);
    layer->CreateField(&id);
    layer->CreateField(&cases);
    layer->CreateField(&tested);
    layer->CreateField(&positive);
    if (layer->StartTransaction() != OGRERR_NONE) throw DataError("cannot write '" + path + "': " + io::gdal_error());
    for (size_t u = 0; u < parts.size(); ++u) {
      OGRFeature f(layer->GetLayerDefn());
      char name[32];
      std::snprintf(name, sizeof name, "U%03zu", u + 1);
      f.SetField(0, name);
      f.SetField(1, static_cast<GIntBig>(c.counts[static_cast<Index>(u)]));
      f.SetField(2, static_cast<GIntBig>(c.tested[static_cast<Index>(u)]));
      f.SetField(3, static_cast<GIntBig>(c.positives[static_cast<Index>(u)]));
      f.SetGeometry(&parts[u]);
      if (layer->CreateFeature(&f) != OGRERR_NONE) throw DataError("cannot write '" + path + "': " + io::gdal_error());
    }
    if (layer->CommitTransaction() != OGRERR_NONE) throw DataError("cannot write '" + path + "': " + io::gdal_error());
  }
  out.commit();
}

// The run configuration of the case counts, or (prevalence) of the survey's positives among
// those tested with the binomial model.
std::string country_config(const Country& c, bool prevalence) {
  std::ostringstream s;
  s << "# Written by vbagg-simulate --kind country. Paths are relative to this file.\n"
    << "data:\n  covariates:\n";
  for (const auto& n : c.covariate_names) s << "    - path: " << n << ".tif\n";
  s << "  population:\n    path: population.tif\n"
    << "  units:\n    path: units.gpkg\n    id_field: ID\n";
  if (!prevalence) return s.str() + "    response_field: cases\n";
  s << "    response_field: positive\n    trials_field: tested\n"
    << "model:\n  likelihood: binomial\n";
  return s.str();
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
  write_units(dir + "/units.gpkg", grid, c);
  write_field(dir + "/truth_prevalence.tif", grid, c.prevalence, "true prevalence", "prevalence (proportion positive)");
  io::write_text_atomic(dir + "/data.yaml", country_config(c, false));
  io::write_text_atomic(dir + "/prevalence.yaml", country_config(c, true));
  spdlog::info("synthetic country: {} x {} pixels, {} covariates, {} units, {:.0f} cases in all, written to {}",
               o.width, o.height, c.covariates.size(), o.units, c.counts.sum(), dir);
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
      "Writes synthetic data with a known truth: a country (covariate and population GeoTIFFs, a units "
      "GeoPackage with case counts and a prevalence survey, the true intensity and prevalence, and data.yaml and "
      "prevalence.yaml to train on) or the swiss-roll "
      "bag problem (pixels.csv, bags.csv). Deterministic for a seed.",
      "vbagg-simulate");
  std::string kind, out, size = "160x120";
  unsigned long long seed = 1;
  int units = 60, covariates = 4, bags = 100;
  double bag_mean = 150, bag_sd = 50, unit_noise = 0;
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
                 "e^u, u ~ N(-sd^2/2, sd^2), with this sd (0: plain Poisson counts; real data often 0.3-0.7)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 3.0));
  app.add_option("--bags", bags, "swissroll: number of bags")->capture_default_str()->check(CLI::PositiveNumber);
  app.add_option("--bag-mean", bag_mean, "swissroll: mean bag size")->capture_default_str();
  app.add_option("--bag-sd", bag_sd, "swissroll: standard deviation of the bag size")->capture_default_str();
  add_common_flags(app, quiet, verbose);
  return run_app(app, argc, argv, [&] {
    setup_logging("vbagg-simulate", quiet, verbose);
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
