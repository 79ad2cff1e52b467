// Hostile input files: each gets a clear error naming the culprit, or a documented recovery.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>

#include "fixtures.hpp"
#include "io/build_dataset.hpp"

namespace vbagg {
namespace {

namespace fs = std::filesystem;
using test::RasterSpec;

struct Files {
  test::TempDir dir;
  io::DataConfig config;
  RasterSpec spec;
  Files() {
    const auto v = test::field(10, 10, [](int c, int r) { return c + 0.5 * r; });
    test::write_raster(dir / "a.tif", spec, {v});
    test::write_raster(dir / "pop.tif", spec, {std::vector<double>(100, 10.0)});
    test::write_units(
        dir / "u.gpkg", "GPKG", 4326,
        {{std::string("west"), 5.0, test::box(0, 0, 5, 10)}, {std::string("east"), 7.0, test::box(5, 0, 10, 10)}});
    config.covariates = {{"a.tif", "", "bilinear"}};
    config.population = {"pop.tif", "population", "sum"};
    config.units = {"u.gpkg", "", "ID", "cases", ""};
  }
  io::BuiltData build() { return io::build_dataset(config, dir.path.string()); }
  // The message of the error build() throws (fails the test when it does not throw).
  template <class E>
  std::string error() {
    try {
      build();
    } catch (const E& e) {
      return e.what();
    }
    ADD_FAILURE() << "no error";
    return "";
  }
};

TEST(Hostile, TruncatedGeoTiff) {
  Files f;
  const auto size = fs::file_size(f.dir / "a.tif");
  fs::resize_file(f.dir / "a.tif", size / 2);
  const std::string m = f.error<DataError>();
  EXPECT_NE(m.find("a.tif"), std::string::npos) << m;
  fs::resize_file(f.dir / "a.tif", 60);
  EXPECT_NE(f.error<DataError>().find("a.tif"), std::string::npos);
}

TEST(Hostile, CorruptGeoTiff) {
  Files f;
  static const char bytes[] = "II*\0garbage that is not a tiff at all";
  std::ofstream(f.dir / "a.tif", std::ios::binary) << std::string(bytes, sizeof bytes - 1);
  const std::string m = f.error<DataError>();
  EXPECT_NE(m.find("cannot open raster"), std::string::npos) << m;
  EXPECT_NE(m.find("a.tif"), std::string::npos) << m;
}

TEST(Hostile, HugeHeaderIsRefusedWithTheMemoryNeeded) {
  Files f;
  // A sparse GeoTIFF whose header claims 10^6 x 10^6 pixels: a few kilobytes on disk.
  GDALDriver* drv = GetGDALDriverManager()->GetDriverByName("GTiff");
  char** opts = CSLSetNameValue(nullptr, "SPARSE_OK", "TRUE");
  opts = CSLSetNameValue(opts, "TILED", "YES");
  opts = CSLSetNameValue(opts, "BLOCKXSIZE", "16384");
  opts = CSLSetNameValue(opts, "BLOCKYSIZE", "16384");
  opts = CSLSetNameValue(opts, "BIGTIFF", "YES");
  {
    io::DatasetPtr ds(drv->Create((f.dir / "huge.tif").c_str(), 1000000, 1000000, 1, GDT_Float32, opts));
    double gt[6] = {0, 1e-5, 0, 10, 0, -1e-5};
    ds->SetGeoTransform(gt);
    OGRSpatialReference srs;
    srs.importFromEPSG(4326);
    ds->SetSpatialRef(&srs);
  }
  CSLDestroy(opts);
  EXPECT_LT(fs::file_size(f.dir / "huge.tif"), 10u * 1000 * 1000);
  f.config.population.path = "huge.tif";
  const auto t0 = std::chrono::steady_clock::now();
  const std::string m = f.error<DataError>();
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 10.0);
  EXPECT_NE(m.find("huge.tif"), std::string::npos) << m;
  EXPECT_NE(m.find("GB"), std::string::npos) << m;
  EXPECT_NE(m.find("1e+12"), std::string::npos) << m;
}

TEST(Hostile, EmptyVectorLayer) {
  Files f;
  test::write_units(f.dir / "empty.gpkg", "GPKG", 4326, {});
  f.config.units.path = "empty.gpkg";
  const std::string m = f.error<DataError>();
  EXPECT_NE(m.find("is empty"), std::string::npos) << m;
}

TEST(Hostile, ShapefileWithoutPrjIsAssumedInTheGridCrs) {
  Files f;
  test::write_units(
      f.dir / "u.shp", "ESRI Shapefile", 4326,
      {{std::string("west"), 5.0, test::box(0, 0, 5, 10)}, {std::string("east"), 7.0, test::box(5, 0, 10, 10)}});
  fs::remove(f.dir / "u.prj");
  f.config.units.path = "u.shp";
  const io::BuiltData b = f.build();
  EXPECT_EQ(b.dataset.num_bags(), 2);
  bool noted = false;
  for (const auto& n : b.notes) noted |= n.find("have no CRS (no .prj?)") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(Hostile, ShapefileWithoutDbfNamesTheMissingFields) {
  Files f;
  test::write_units(f.dir / "u.shp", "ESRI Shapefile", 4326, {{std::string("west"), 5.0, test::box(0, 0, 5, 10)}});
  fs::remove(f.dir / "u.dbf");
  f.config.units.path = "u.shp";
  try {
    f.build();
    FAIL() << "a shapefile without .dbf has no attributes";
  } catch (const std::runtime_error& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("u.shp"), std::string::npos) << m;
  }
}

TEST(Hostile, UnitsEntirelyOutsideTheGrids) {
  Files f;
  test::write_units(
      f.dir / "far.gpkg", "GPKG", 4326,
      {{std::string("p"), 5.0, test::box(100, 40, 105, 45)}, {std::string("q"), 7.0, test::box(105, 40, 110, 45)}});
  f.config.units.path = "far.gpkg";
  std::string m = f.error<DataError>();
  EXPECT_NE(m.find("2 units: no pixels, as it lies outside the grid"), std::string::npos) << m;
  EXPECT_NE(m.find("'p', 'q'"), std::string::npos) << m;
  f.config.on_bad_unit = io::BadUnitPolicy::drop;
  m = f.error<DataError>();
  EXPECT_NE(m.find("every unit"), std::string::npos) << m;
}

TEST(Hostile, CovariateAllNodata) {
  Files f;
  RasterSpec s = f.spec;
  s.nodata = -9999;
  test::write_raster(f.dir / "a.tif", s, {std::vector<double>(100, -9999)});
  // The covariate is named with its file, not every unit as having no usable pixel.
  const std::string m = f.error<DataError>();
  EXPECT_NE(m.find("covariate 'a' ('" + (f.dir / "a.tif") + "') has no value at any of the units' 100 pixels"),
            std::string::npos)
      << m;
  EXPECT_EQ(m.find("unit '"), std::string::npos) << m;
}

// Many units failing for one reason give one line with the count and the first ids, and the
// error carries every unit for the full list.
TEST(Hostile, ManyUnitsWithOneProblemAreOneLine) {
  Files f;
  std::vector<test::Feature> points;
  for (int k = 0; k < 40; ++k)
    points.push_back({std::to_string(k), 1.0, "POINT(" + std::to_string(0.1 + 0.2 * k) + " 5)"});
  points.push_back({std::string("neg"), -3.0, test::box(0, 0, 5, 10)});
  test::write_units(f.dir / "pts.gpkg", "GPKG", 4326, points);
  f.config.units.path = "pts.gpkg";
  try {
    f.build();
    FAIL() << "no error";
  } catch (const io::UnusableUnits& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("41 of 41 units in"), std::string::npos) << m;
    EXPECT_NE(m.find("\n  40 units: geometry is a Point, not a polygon; survey points need data.units.point_buffer: "
                     "'0', '1', '2', '3', '4' and 35 more"),
              std::string::npos)
        << m;
    EXPECT_NE(m.find("\n  unit 'neg': negative response (-3)"), std::string::npos) << m;
    EXPECT_EQ(std::count(m.begin(), m.end(), '\n'), 2) << m;
    EXPECT_EQ(e.issues().size(), 41u);
  }
}

TEST(Hostile, NegativePopulationIsMissingWithANote) {
  Files f;
  auto pop = std::vector<double>(100, 10.0);
  pop[0] = -5;
  pop[1] = -1e6;
  test::write_raster(f.dir / "pop.tif", f.spec, {pop});
  const io::BuiltData b = f.build();
  EXPECT_EQ(b.dataset.num_pixels(), 98);
  bool noted = false;
  for (const auto& n : b.notes) noted |= n.find("2 pixels with negative population") != std::string::npos;
  EXPECT_TRUE(noted);
}

}  // namespace
}  // namespace vbagg
