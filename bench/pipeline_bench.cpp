// The input pipeline at scale: a synthetic country of W x H pixels, C covariates and U units.
//   pipeline_bench generate DIR [--size 10000] [--covariates 5] [--units 1000]
//   pipeline_bench build DIR [--assignment centre|all_touched|fraction]
// `build` reports the time to build the dataset and the process's peak resident memory.
#include <gdal_priv.h>
#include <ogrsf_frmts.h>
#include <sys/resource.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <random>
#include <string>

#include "io/build_dataset.hpp"
#include "io/gdal_handles.hpp"

using namespace vbagg;

namespace {

int arg_int(int argc, char** argv, const std::string& key, int fallback) {
  for (int i = 3; i + 1 < argc; ++i)
    if (key == argv[i]) return std::stoi(argv[i + 1]);
  return fallback;
}

std::string arg_str(int argc, char** argv, const std::string& key, const std::string& fallback) {
  for (int i = 3; i + 1 < argc; ++i)
    if (key == argv[i]) return argv[i + 1];
  return fallback;
}

// A tiled Float32 GeoTIFF of smooth values, written strip by strip; 1 km pixels in UTM 37S.
void write_layer(const std::string& path, int size, int seed) {
  GDALDriver* drv = GetGDALDriverManager()->GetDriverByName("GTiff");
  char** opts = CSLSetNameValue(nullptr, "TILED", "YES");
  opts = CSLSetNameValue(opts, "BIGTIFF", "YES");
  io::DatasetPtr ds(drv->Create(path.c_str(), size, size, 1, GDT_Float32, opts));
  CSLDestroy(opts);
  double gt[6] = {200000, 1000, 0, 9900000, 0, -1000};
  ds->SetGeoTransform(gt);
  OGRSpatialReference srs;
  srs.importFromEPSG(32737);
  ds->SetSpatialRef(&srs);
  GDALRasterBand* band = ds->GetRasterBand(1);
  band->SetNoDataValue(-9999);
  const double a = 0.001 * (seed + 1), b = 0.0007 * (seed + 2);
  std::vector<float> row(static_cast<size_t>(size) * 256);
  for (int r0 = 0; r0 < size; r0 += 256) {
    const int rows = std::min(256, size - r0);
    for (int r = 0; r < rows; ++r)
      for (int c = 0; c < size; ++c)
        row[static_cast<size_t>(r) * size + c] =
            static_cast<float>(seed == 99 ? 50.0 + 40.0 * std::sin(a * c) * std::cos(b * (r0 + r)) + 45.0
                                          : std::sin(a * c + seed) + std::cos(b * (r0 + r)));
    if (band->RasterIO(GF_Write, 0, r0, size, rows, row.data(), size, rows, GDT_Float32, 0, 0) != CE_None)
      throw std::runtime_error("write failed");
  }
}

// Units: a jittered grid of quadrilaterals sharing corners, so they tile the country.
void write_units(const std::string& path, int size, int units) {
  const int nx = static_cast<int>(std::round(std::sqrt(units * 1.6))), ny = (units + nx - 1) / nx;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> jitter(-0.3, 0.3);
  const double x0 = 200000, y1 = 9900000, w = size * 1000.0 / nx, h = size * 1000.0 / ny;
  std::vector<std::vector<std::pair<double, double>>> corner(nx + 1, std::vector<std::pair<double, double>>(ny + 1));
  for (int i = 0; i <= nx; ++i)
    for (int j = 0; j <= ny; ++j) {
      const bool edge_x = i == 0 || i == nx, edge_y = j == 0 || j == ny;
      corner[i][j] = {x0 + (i + (edge_x ? 0 : jitter(rng))) * w, y1 - (j + (edge_y ? 0 : jitter(rng))) * h};
    }
  GDALDriver* drv = GetGDALDriverManager()->GetDriverByName("GPKG");
  io::DatasetPtr ds(drv->Create(path.c_str(), 0, 0, 0, GDT_Unknown, nullptr));
  OGRSpatialReference srs;
  srs.importFromEPSG(32737);
  OGRLayer* layer = ds->CreateLayer("units", &srs, wkbPolygon, nullptr);
  OGRFieldDefn id("ID", OFTString), cases("cases", OFTReal);
  layer->CreateField(&id);
  layer->CreateField(&cases);
  if (layer->StartTransaction() != OGRERR_NONE) throw std::runtime_error("cannot write " + path);
  int k = 0;
  for (int j = 0; j < ny; ++j)
    for (int i = 0; i < nx; ++i) {
      OGRLinearRing ring;
      for (auto [a, b] :
           {std::pair{i, j}, std::pair{i + 1, j}, std::pair{i + 1, j + 1}, std::pair{i, j + 1}, std::pair{i, j}})
        ring.addPoint(corner[a][b].first, corner[a][b].second);
      OGRPolygon poly;
      poly.addRing(&ring);
      OGRFeature f(layer->GetLayerDefn());
      f.SetField(0, ("U" + std::to_string(k++)).c_str());
      f.SetField(1, 100.0 + k % 37);
      f.SetGeometry(&poly);
      if (layer->CreateFeature(&f) != OGRERR_NONE) throw std::runtime_error("cannot write " + path);
    }
  if (layer->CommitTransaction() != OGRERR_NONE) throw std::runtime_error("cannot write " + path);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: pipeline_bench generate|build DIR [options]\n");
    return 2;
  }
  io::ensure_gdal_registered();
  const std::string mode = argv[1], dir = argv[2];
  if (mode == "generate") {
    const int size = arg_int(argc, argv, "--size", 10000), covs = arg_int(argc, argv, "--covariates", 5);
    std::filesystem::create_directories(dir);
    for (int c = 0; c < covs; ++c) write_layer(dir + "/cov" + std::to_string(c) + ".tif", size, c);
    write_layer(dir + "/population.tif", size, 99);
    write_units(dir + "/units.gpkg", size, arg_int(argc, argv, "--units", 1000));
    return 0;
  }
  io::DataConfig config;
  for (int c = 0;; ++c) {
    const std::string p = dir + "/cov" + std::to_string(c) + ".tif";
    if (!std::filesystem::exists(p)) break;
    config.covariates.push_back({p, "", "bilinear"});
  }
  config.population = {dir + "/population.tif", "population", "sum"};
  config.units = {dir + "/units.gpkg", "", "ID", "cases", ""};
  config.pixel_assignment = io::parse_pixel_assignment(arg_str(argc, argv, "--assignment", "fraction"));
  const auto t0 = std::chrono::steady_clock::now();
  const io::BuiltData b = io::build_dataset(config);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  std::printf("| %d x %d | %zu | %ld | %s | %ld | %.1f | %.0f | %.0f |\n", b.grid.width, b.grid.height,
              config.covariates.size(), static_cast<long>(b.dataset.num_bags()),
              io::to_string(config.pixel_assignment).c_str(), static_cast<long>(b.dataset.num_pixels()), secs,
              static_cast<double>(b.dataset.inputs.size() + 2 * b.dataset.num_pixels()) * 8 / 1048576.0,
              static_cast<double>(ru.ru_maxrss) / 1024.0);
  return 0;
}
