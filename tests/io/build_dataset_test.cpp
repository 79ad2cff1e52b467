// The input pipeline on files generated here: alignment, nodata, pixel assignment, coordinates,
// bad units, and the formats users bring.
#include "io/build_dataset.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "fixtures.hpp"
#include "io/build_report.hpp"
#include "io/coordinates.hpp"

namespace vbagg {
namespace {

using test::Feature;
using test::RasterSpec;

// A 10 x 10 one-degree grid with two covariates, population, and four quadrant units.
struct Scene {
  test::TempDir dir;
  io::DataConfig config;
  RasterSpec spec;
  std::vector<double> elev = test::field(10, 10, [](int c, int r) { return c + 10.0 * r; });
  std::vector<double> rain = test::field(10, 10, [](int c, int r) { return std::sin(c) + std::cos(r); });
  std::vector<double> pop = test::field(10, 10, [](int c, int r) { return 1.0 + (c * 7 + r * 3) % 5; });

  Scene() {
    test::write_raster(dir / "elev.tif", spec, {elev});
    test::write_raster(dir / "rain.tif", spec, {rain});
    test::write_raster(dir / "pop.tif", spec, {pop});
    write_quadrants("GPKG", "units.gpkg");
    config.covariates = {{"elev.tif", "", "bilinear"}, {"rain.tif", "", "bilinear"}};
    config.population = {"pop.tif", "population", "sum"};
    config.units = {"units.gpkg", "", "ID", "cases", ""};
    config.pixel_assignment = io::PixelAssignment::centre;
  }
  void write_quadrants(const std::string& driver, const std::string& name) {
    test::write_units(dir / name, driver, 4326,
                      {{std::string("A"), 10.0, test::box(0, 5, 5, 10)},
                       {std::string("B"), 20.0, test::box(5, 5, 10, 10)},
                       {std::string("C"), 30.0, test::box(0, 0, 5, 5)},
                       {std::string("D"), 40.0, test::box(5, 0, 10, 5)}});
  }
  io::BuiltData build() { return io::build_dataset(config, dir.path.string()); }
  double pop_total() const { return std::accumulate(pop.begin(), pop.end(), 0.0); }
};

double weighted_population(const Dataset& d) { return d.weights().sum(); }

TEST(BuildDataset, AlignedGridsAreReadDirectly) {
  Scene s;
  const io::BuiltData b = s.build();
  EXPECT_EQ(b.dataset.num_bags(), 4);
  EXPECT_EQ(b.dataset.num_pixels(), 100);
  EXPECT_EQ(b.covariates, (std::vector<std::string>{"elev", "rain"}));
  EXPECT_EQ(b.num_coordinates, 3);
  EXPECT_NEAR(weighted_population(b.dataset), s.pop_total(), 1e-9);
  for (Index i = 0; i < b.dataset.num_pixels(); ++i) {
    const auto cell = static_cast<size_t>(b.cell[static_cast<size_t>(i)]);
    EXPECT_DOUBLE_EQ(b.dataset.inputs(0, i), s.elev[cell]);
    EXPECT_NEAR(b.dataset.inputs(1, i), s.rain[cell], 1e-6);  // stored as float32
  }
  for (const auto& n : b.notes) EXPECT_EQ(n.find("warped"), std::string::npos) << n;
  // Bag order follows the layer; A is the top-left quadrant: rows 0-4, cols 0-4.
  EXPECT_EQ(b.dataset.bag_ids[0], "A");
  EXPECT_EQ(b.dataset.bag_size(0), 25);
  EXPECT_LT(b.cell[0] % 10, 5);
  EXPECT_LT(b.cell[0] / 10, 5);
}

TEST(BuildDataset, GeotransformFloatNoiseDoesNotWarp) {
  Scene s;
  RasterSpec noisy = s.spec;
  noisy.x0 += 1e-12;
  noisy.dx += 1e-12;
  test::write_raster(s.dir / "elev.tif", noisy, {s.elev});
  const io::BuiltData b = s.build();
  for (const auto& n : b.notes) EXPECT_EQ(n.find("warped"), std::string::npos) << n;
  EXPECT_DOUBLE_EQ(b.dataset.inputs(0, 0), s.elev[static_cast<size_t>(b.cell[0])]);
}

TEST(BuildDataset, FractionalOriginShiftIsWarped) {
  Scene s;
  RasterSpec shifted = s.spec;
  shifted.x0 += 0.03;  // 0.03 pixel to the east
  shifted.y0 += 0.03;
  shifted.width = shifted.height = 11;
  test::write_raster(s.dir / "elev.tif", shifted, {test::field(11, 11, [](int c, int r) { return c + 10.0 * r; })});
  const io::BuiltData b = s.build();
  bool warped = false;
  for (const auto& n : b.notes) warped |= n.find("'" + (s.dir / "elev.tif") + "' warped") != std::string::npos;
  EXPECT_TRUE(warped);
  // A linear field resampled bilinearly at 0.03 pixel offset: value = c - 0.03 + 10 (r + 0.03).
  for (Index i = 0; i < b.dataset.num_pixels(); ++i) {
    const auto cell = b.cell[static_cast<size_t>(i)];
    const int c = static_cast<int>(cell % 10), r = static_cast<int>(cell / 10);
    if (c == 0 || r == 0) continue;  // edge pixels see the raster border
    EXPECT_NEAR(b.dataset.inputs(0, i), c - 0.03 + 10 * (r + 0.03), 1e-6);
  }
}

TEST(BuildDataset, PopulationSumResamplingPreservesTotal) {
  for (double factor : {2.0, 0.5}) {  // coarser and finer population grids
    Scene s;
    RasterSpec ps = s.spec;
    ps.dx = ps.dy = factor;
    ps.width = ps.height = static_cast<int>(10 / factor);
    const auto fine = test::field(ps.width, ps.height, [](int c, int r) { return 1.0 + (c + 2 * r) % 3; });
    test::write_raster(s.dir / "pop_other.tif", ps, {fine});
    s.config.population.path = "pop_other.tif";
    s.config.grid = "elev";
    const io::BuiltData b = s.build();
    const double total = std::accumulate(fine.begin(), fine.end(), 0.0);
    EXPECT_NEAR(weighted_population(b.dataset), total, 1e-6 * total) << "factor " << factor;
  }
}

TEST(BuildDataset, OtherCrsIsReprojected) {
  Scene s;
  // The rain covariate in Web Mercator, covering the same area.
  RasterSpec merc;
  merc.epsg = 3857;
  merc.width = merc.height = 40;
  merc.x0 = -20000;
  merc.dx = 1113194.9 * 1.1 / 40;  // a bit more than 10 degrees of longitude
  merc.y0 = 1130000;
  merc.dy = 1130000 * 1.05 / 40;
  // Each Mercator pixel holds its column index, so nearest-neighbour reprojection is checkable.
  test::write_raster(s.dir / "rain.tif", merc, {test::field(40, 40, [](int c, int) { return c; })});
  // Units in NAD27 (EPSG:4267), a slightly different datum.
  test::write_units(s.dir / "units_nad27.gpkg", "GPKG", 4267,
                    {{std::string("all"), 5.0, test::box(0.5, 0.5, 9.5, 9.5)}});
  s.config.units.path = "units_nad27.gpkg";
  s.config.covariates[1].resampling = "near";
  const io::BuiltData b = s.build();
  bool reprojected = false;
  for (const auto& n : b.notes) reprojected |= n.find("reprojected") != std::string::npos;
  EXPECT_TRUE(reprojected);
  EXPECT_EQ(b.dataset.num_bags(), 1);
  EXPECT_GE(b.dataset.num_pixels(), 64);
  EXPECT_LE(b.dataset.num_pixels(), 100);
  for (Index i = 0; i < b.dataset.num_pixels(); ++i) {
    const double lon = 0.5 + static_cast<double>(b.cell[static_cast<size_t>(i)] % 10);
    const double x = 6378137.0 * lon * M_PI / 180;  // spherical Mercator easting of the pixel centre
    EXPECT_EQ(b.dataset.inputs(1, i), std::floor((x - merc.x0) / merc.dx)) << "lon " << lon;
  }
}

TEST(BuildDataset, DisjointGridsNameBothFiles) {
  Scene s;
  RasterSpec far = s.spec;
  far.x0 = 100;
  test::write_raster(s.dir / "elev.tif", far, {s.elev});
  try {
    s.build();
    FAIL();
  } catch (const DataError& e) {
    const std::string m = e.what();
    EXPECT_NE(m.find("elev.tif"), std::string::npos) << m;
    EXPECT_NE(m.find("pop.tif"), std::string::npos) << m;
    EXPECT_NE(m.find("does not overlap"), std::string::npos) << m;
  }
}

TEST(BuildDataset, NodataInEveryFormIsDropped) {
  Scene s;
  // elev: NaN without declared nodata at (0,0); -3.4e38 declared at (1,0)
  auto elev = s.elev;
  elev[0] = NAN;
  elev[1] = -3.4e38;
  RasterSpec e = s.spec;
  e.nodata = -3.4e38;
  test::write_raster(s.dir / "elev.tif", e, {elev});
  // rain: -9999 declared at (2,0), and an explicit mask hiding (3,0)
  auto rain = s.rain;
  rain[2] = -9999;
  RasterSpec r = s.spec;
  r.nodata = -9999;
  test::write_raster(s.dir / "rain.tif", r, {rain});
  test::write_raster(
      s.dir / "rain_masked.tif",
      [&] {
        RasterSpec m = s.spec;
        m.mask_band = true;
        return m;
      }(),
      {rain},
      [] {
        static std::vector<bool> m(100, false);
        m[3] = true;
        return &m;
      }());
  s.config.covariates.push_back({"rain_masked.tif", "", "bilinear"});
  // population: NaN nodata at (4,0)
  auto pop = s.pop;
  pop[4] = NAN;
  RasterSpec p = s.spec;
  p.nodata = NAN;
  test::write_raster(s.dir / "pop.tif", p, {pop});
  const io::BuiltData b = s.build();
  // Pixels (0..4, row 0) all lie in unit A and are dropped; rain's -9999 is in rain and rain_masked.
  EXPECT_EQ(b.dataset.num_pixels(), 95);
  EXPECT_EQ(b.units[0].id, "A");
  EXPECT_EQ(b.units[0].dropped_pixels, 5);
  EXPECT_EQ(b.units[0].pixels, 20);
  EXPECT_EQ(b.units[1].dropped_pixels, 0);
  for (auto c : b.cell) EXPECT_GE(c, 5);
  const auto lines = io::report_lines(b);
  EXPECT_NE(std::find(lines.begin(), lines.end(),
                      "unit 'A': pixels dropped for missing data, a covariate or the population (5 of 25)"),
            lines.end());
  EXPECT_NE(lines.back().find("5 pixels dropped for missing data"), std::string::npos) << lines.back();
}

TEST(BuildDataset, FractionAssignmentSplitsBorderPixels) {
  Scene s;
  // Units that cut pixels: a left strip to x = 3.4, a right part from 3.4, and a tiny unit
  // inside one pixel of the right part's area (overlap is allowed for the test of shares).
  test::write_units(s.dir / "cut.gpkg", "GPKG", 4326,
                    {{std::string("left"), 3.0, test::box(0, 0.5, 3.4, 9.5)},
                     {std::string("right"), 7.0, test::box(3.4, 0.5, 10, 9.5)},
                     {std::string("tiny"), 1.0, test::box(7.2, 4.2, 7.4, 4.5)}});
  s.config.units.path = "cut.gpkg";
  s.config.pixel_assignment = io::PixelAssignment::fraction;
  const io::BuiltData b = s.build();
  ASSERT_EQ(b.dataset.num_bags(), 3);
  // Population inside the union of left and right: rows 1-8 fully, rows 0 and 9 half.
  double inside = 0;
  for (int r = 0; r < 10; ++r)
    for (int c = 0; c < 10; ++c) inside += s.pop[static_cast<size_t>(r * 10 + c)] * (r == 0 || r == 9 ? 0.5 : 1.0);
  const Vector P = b.dataset.bag_weights();
  EXPECT_NEAR(P[0] + P[1], inside, 1e-9);
  // The tiny unit gets the population of its share of one pixel: 0.2 x 0.3 = 6 % of it.
  const double tiny_pop = s.pop[5 * 10 + 7];
  EXPECT_EQ(b.dataset.bag_size(2), 1);
  EXPECT_NEAR(P[2], 0.06 * tiny_pop, 1e-9);
  // The border column 3 is split 0.4 / 0.6 between left and right.
  for (Index i = 0; i < b.dataset.num_pixels(); ++i)
    if (b.cell[static_cast<size_t>(i)] == 5 * 10 + 3) {
      const double f = b.dataset.coverage[i];
      EXPECT_TRUE(std::abs(f - 0.4) < 1e-9 || std::abs(f - 0.6) < 1e-9) << f;
    }
}

TEST(BuildDataset, CentreAndAllTouchedDiffer) {
  Scene s;
  test::write_units(s.dir / "cut.gpkg", "GPKG", 4326, {{std::string("u"), 3.0, test::box(0.2, 0.2, 3.4, 9.6)}});
  s.config.units.path = "cut.gpkg";
  s.config.pixel_assignment = io::PixelAssignment::centre;
  const Index centre = s.build().dataset.num_pixels();
  s.config.pixel_assignment = io::PixelAssignment::all_touched;
  const Index touched = s.build().dataset.num_pixels();
  EXPECT_EQ(centre, 3 * 10);  // centres x in {0.5, 1.5, 2.5}, every row
  EXPECT_EQ(touched, 4 * 10);
}

TEST(BuildDataset, ProjectedCoordinatesInKilometres) {
  Scene s;
  for (const char* f : {"elev.tif", "rain.tif", "pop.tif"}) {
    RasterSpec utm = s.spec;
    utm.epsg = 32737;  // UTM 37S, metres
    utm.x0 = 500000;
    utm.y0 = 9000000;
    utm.dx = utm.dy = 1000;
    test::write_raster(s.dir / f, utm, {s.elev});
  }
  test::write_units(s.dir / "utm.gpkg", "GPKG", 32737,
                    {{std::string("u"), 3.0, test::box(500000, 8990000, 510000, 9000000)}});
  s.config.units.path = "utm.gpkg";
  const io::BuiltData b = s.build();
  ASSERT_EQ(b.num_coordinates, 2);
  const auto cell = b.cell[0];
  EXPECT_NEAR(b.dataset.inputs(2, 0), 500.5 + static_cast<double>(cell % 10), 1e-9);
  EXPECT_NEAR(b.dataset.inputs(3, 0), 8999.5 - static_cast<double>(cell / 10), 1e-9);
}

TEST(BuildDataset, GeographicCoordinatesAreChordal) {
  Scene s;
  const io::BuiltData b = s.build();
  ASSERT_EQ(b.num_coordinates, 3);
  for (Index i = 0; i < b.dataset.num_pixels(); ++i) EXPECT_NEAR(b.dataset.inputs.col(i).tail(3).norm(), 6371.0, 1e-9);
  // Neighbouring pixels one degree apart on the equator are ~111 km apart.
  double xyz0[3], xyz1[3];
  const io::CoordinateMapper map(b.grid);
  map(0, 9, xyz0);
  map(1, 9, xyz1);
  const double d =
      std::sqrt(std::pow(xyz0[0] - xyz1[0], 2) + std::pow(xyz0[1] - xyz1[1], 2) + std::pow(xyz0[2] - xyz1[2], 2));
  EXPECT_NEAR(d, 111.19, 0.1);
}

TEST(BuildDataset, ConstantCovariateIsLeftOut) {
  Scene s;
  test::write_raster(s.dir / "rain.tif", s.spec, {std::vector<double>(100, 4.0)});
  const io::BuiltData b = s.build();
  EXPECT_EQ(b.covariates, std::vector<std::string>{"elev"});
  EXPECT_EQ(b.dataset.num_inputs(), 1 + 3);
  bool noted = false;
  for (const auto& n : b.notes)
    noted |= n.find("covariate 'rain' ('" + (s.dir / "rain.tif") + "') is constant") != std::string::npos;
  EXPECT_TRUE(noted);
}

TEST(BuildDataset, MultiBandFileGivesOneCovariatePerBand) {
  Scene s;
  RasterSpec two = s.spec;
  two.descriptions = {"day", ""};
  test::write_raster(s.dir / "lst.tif", two, {s.elev, s.rain});
  s.config.covariates = {{"lst.tif", "lst", "bilinear"}};
  const io::BuiltData b = s.build();
  EXPECT_EQ(b.covariates, (std::vector<std::string>{"lst_day", "lst_2"}));
}

std::vector<Feature> bad_units() {
  return {{std::string("ok"), 5.0, test::box(0, 5, 5, 10)},
          {std::string("zero"), 1.0, test::box(5, 5, 10, 10)},       // population zero there
          {std::string("outside"), 2.0, test::box(50, 50, 60, 60)},  // no pixels
          {std::string("missing"), std::monostate{}, test::box(0, 0, 2, 5)},
          {std::string("negative"), -3.0, test::box(2, 0, 4, 5)},
          {std::string("dup"), 1.0, test::box(4, 0, 5, 5)},
          {std::string("dup"), 1.0, test::box(5, 0, 6, 5)},
          // a bow-tie (self-intersection) that MakeValid repairs into two triangles
          {std::string("bowtie"), 4.0, "POLYGON((6 0,10 5,10 0,6 5,6 0))"},
          {std::string("line"), 1.0, "LINESTRING(0 0,1 1)"}};
}

TEST(BuildDataset, BadUnitsStopNamingEveryOne) {
  Scene s;
  auto pop = s.pop;
  for (int r = 0; r < 5; ++r)
    for (int c = 5; c < 10; ++c) pop[static_cast<size_t>(r * 10 + c)] = 0;
  test::write_raster(s.dir / "pop.tif", s.spec, {pop});
  test::write_units(s.dir / "bad.gpkg", "GPKG", 4326, bad_units());
  s.config.units.path = "bad.gpkg";
  try {
    s.build();
    FAIL();
  } catch (const DataError& e) {
    const std::string m = e.what();
    for (const char* name : {"'zero': zero population", "'outside': no pixels", "'missing': missing response",
                             "'negative': negative response", "2 units: duplicate id: 'dup', 'dup'",
                             "'line': geometry is a Line String, not a polygon"})
      EXPECT_NE(m.find(name), std::string::npos) << name << " in\n" << m;
    EXPECT_EQ(m.find("'ok'"), std::string::npos);
    EXPECT_EQ(m.find("'bowtie'"), std::string::npos);
  }
  s.config.on_bad_unit = io::BadUnitPolicy::drop;
  const io::BuiltData b = s.build();
  EXPECT_EQ(b.dataset.bag_ids, (std::vector<std::string>{"ok", "bowtie"}));
  EXPECT_EQ(b.dropped.size(), 7u);
  bool repaired = false;
  for (const auto& n : b.notes)
    repaired |= n.find("'bowtie': invalid geometry repaired with MakeValid (Self-intersection") != std::string::npos;
  EXPECT_TRUE(repaired);
  EXPECT_GT(b.dataset.bag_size(1), 0);
}

// Built a batch at a time, units that all fail to read leave no batch and the same error.
TEST(BuildDataset, BatchesOfUnreadableUnitsGiveTheWholeBuildsError) {
  Scene s;
  test::write_units(s.dir / "none.gpkg", "GPKG", 4326,
                    {{std::string("missing"), std::monostate{}, test::box(0, 0, 2, 5)},
                     {std::string("line"), 1.0, "LINESTRING(0 0,1 1)"}});
  s.config.units.path = "none.gpkg";
  for (const auto policy : {io::BadUnitPolicy::stop, io::BadUnitPolicy::drop}) {
    s.config.on_bad_unit = policy;
    std::string whole, batches;
    try {
      s.build();
    } catch (const DataError& e) {
      whole = e.what();
    }
    int consumed = 0;
    try {
      io::build_dataset_in_batches(s.config, s.dir.path.string(), 10, [&](io::BuiltData&) { ++consumed; });
    } catch (const DataError& e) {
      batches = e.what();
    }
    const char* expected = policy == io::BadUnitPolicy::stop ? "'missing': missing response" : "nothing is left to fit";
    EXPECT_NE(whole.find(expected), std::string::npos) << whole;
    EXPECT_EQ(batches, whole);
    EXPECT_EQ(consumed, 0);
  }
}

TEST(BuildDataset, ResponsesAsTextAndIntegerIds) {
  Scene s;
  test::write_units(s.dir / "text.gpkg", "GPKG", 4326,
                    {{101L, std::string(" 12.5"), test::box(0, 0, 5, 10)},
                     {102L, std::string("7"), test::box(5, 0, 10, 10)},
                     {103L, std::string("n/a"), test::box(5, 0, 6, 1)}},
                    OFTInteger, OFTString);
  s.config.units.path = "text.gpkg";
  s.config.on_bad_unit = io::BadUnitPolicy::drop;
  const io::BuiltData b = s.build();
  EXPECT_EQ(b.dataset.bag_ids, (std::vector<std::string>{"101", "102"}));
  EXPECT_DOUBLE_EQ(b.dataset.response[0], 12.5);
  EXPECT_DOUBLE_EQ(b.dataset.response[1], 7);
  ASSERT_EQ(b.dropped.size(), 1u);
  EXPECT_EQ(b.dropped[0].problem, "non-numeric response ('n/a')");
}

// A blank or null response is missing: a bad unit by default; with predict_missing
// (data.on_missing_response: predict) a unit without one (NaN), listed in the build's report,
// while a response that is there but wrong stays a bad unit.
TEST(BuildDataset, MissingResponsesArePredictedOnRequest) {
  Scene s;
  test::write_units(s.dir / "blank.gpkg", "GPKG", 4326,
                    {{101L, std::string("12"), test::box(0, 0, 5, 10)},
                     {102L, std::string("  "), test::box(5, 0, 10, 5)},
                     {103L, std::string("-1"), test::box(5, 5, 10, 10)}},
                    OFTInteger, OFTString);
  s.config.units.path = "blank.gpkg";
  s.config.on_bad_unit = io::BadUnitPolicy::drop;
  io::BuiltData b = s.build();
  EXPECT_EQ(b.dataset.bag_ids, (std::vector<std::string>{"101"}));
  ASSERT_EQ(b.dropped.size(), 2u);
  EXPECT_EQ(b.dropped[0].problem, "missing response");
  s.config.units.predict_missing = true;
  b = s.build();
  EXPECT_EQ(b.dataset.bag_ids, (std::vector<std::string>{"101", "102"}));
  EXPECT_TRUE(b.dataset.observed(0));
  EXPECT_FALSE(b.dataset.observed(1));
  EXPECT_FALSE(b.units[1].observed());
  ASSERT_EQ(b.dropped.size(), 1u);
  EXPECT_EQ(b.dropped[0].problem, "negative response (-1)");
  const std::vector<std::string> lines = io::report_lines(b);
  EXPECT_TRUE(std::any_of(lines.begin(), lines.end(), [](const std::string& l) {
    return l.find("1 unit without a response is predicted, not fitted") != std::string::npos &&
           l.find("102") != std::string::npos;
  }));
}

TEST(BuildDataset, ShapefileAndGeoJson) {
  for (auto [driver, name] : {std::pair{"ESRI Shapefile", "units.shp"}, std::pair{"GeoJSON", "units.geojson"}}) {
    Scene s;
    s.write_quadrants(driver, name);
    s.config.units.path = name;
    const io::BuiltData b = s.build();
    EXPECT_EQ(b.dataset.num_bags(), 4) << driver;
    EXPECT_EQ(b.dataset.num_pixels(), 100) << driver;
  }
}

TEST(BuildDataset, ConfigurationErrorsNameTheKey) {
  Scene s;
  s.config.units.id_field = "NAME_2";
  try {
    s.build();
    FAIL();
  } catch (const ConfigError& e) {
    EXPECT_NE(std::string(e.what()).find("data.units.id_field"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("fields: ID, cases"), std::string::npos) << e.what();
  }
  Scene t;
  t.config.covariates[0].resampling = "nearest";
  EXPECT_THROW(t.build(), ConfigError);
  Scene u;
  u.config.covariates[0].path = "missing.tif";
  try {
    u.build();
    FAIL();
  } catch (const DataError& e) {
    EXPECT_NE(std::string(e.what()).find("missing.tif"), std::string::npos);
  }
}

// The realistic set of the issue: four covariates on a 0.125 degree grid (one shifted by 0.03
// pixel), population on a coarser 0.15 degree grid with NaN nodata, units in a shapefile with
// string ids and real-valued counts.
TEST(BuildDataset, EndToEndRealisticSet) {
  test::TempDir dir;
  const double res = 0.125;
  RasterSpec cov;
  cov.width = 48;   // 6 degrees
  cov.height = 40;  // 5 degrees
  cov.x0 = 30;
  cov.y0 = -1;
  cov.dx = cov.dy = res;
  std::vector<io::LayerSpec> covs;
  for (int k = 0; k < 4; ++k) {
    RasterSpec s = cov;
    if (k == 2) {
      s.x0 += 0.03 * res;
      s.y0 -= 0.03 * res;
    }
    const std::string name = "cov" + std::to_string(k) + ".tif";
    test::write_raster(dir / name, s,
                       {test::field(s.width, s.height, [k](int c, int r) { return k + 0.1 * c - 0.05 * r; })});
    covs.push_back({name, "", "bilinear"});
  }
  RasterSpec pop;
  pop.width = 40;
  pop.height = 34;
  pop.x0 = 30;
  pop.y0 = -1;
  pop.dx = pop.dy = 0.15;
  pop.nodata = NAN;
  auto pv = test::field(pop.width, pop.height, [](int c, int r) { return 100.0 + c + r; });
  for (int c = 0; c < 5; ++c) pv[static_cast<size_t>(10 * pop.width + c)] = NAN;  // a row of nodata
  test::write_raster(dir / "pop.tif", pop, {pv});
  std::vector<Feature> units;
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 2; ++j)
      units.push_back({std::string("KE-") + std::to_string(i) + std::to_string(j), 100.5 + i + j,
                       test::box(30 + 2 * i, -6 + 2.5 * j, 32 + 2 * i, -3.5 + 2.5 * j)});
  test::write_units(dir / "admin.shp", "ESRI Shapefile", 4326, units);
  io::DataConfig config;
  config.covariates = covs;
  config.population = {"pop.tif", "population", "sum"};
  config.units = {"admin.shp", "", "ID", "cases", ""};
  config.grid = "cov0";
  config.pixel_assignment = io::PixelAssignment::centre;
  const io::BuiltData b = io::build_dataset(config, dir.path.string());
  EXPECT_EQ(b.dataset.num_bags(), 6);
  EXPECT_EQ(b.dataset.bag_ids[0], "KE-00");
  EXPECT_DOUBLE_EQ(b.dataset.response[5], 103.5);
  EXPECT_EQ(b.covariates.size(), 4u);
  // The units tile the whole 6 x 5 degree grid: 48 x 40 pixels less those under the nodata row.
  const Index dropped = std::accumulate(b.units.begin(), b.units.end(), Index(0),
                                        [](Index s, const io::UnitSummary& u) { return s + u.dropped_pixels; });
  EXPECT_EQ(b.dataset.num_pixels() + dropped, 48 * 40);
  EXPECT_GT(dropped, 0);
  EXPECT_LT(dropped, 48 * 3);
  // Population total: the valid part of the coarse raster, redistributed by sum resampling.
  double valid = 0;
  for (double v : pv)
    if (std::isfinite(v)) valid += v;
  const double total = b.dataset.weights().sum();
  EXPECT_GT(total, 0.9 * valid);
  EXPECT_LE(total, valid * (1 + 1e-9));
}

// A unit inside one pixel, with a rate far above the others', is named in the build's warnings.
TEST(BuildDataset, WarnsOfTinyUnitsAndImplausibleRates) {
  Scene s;
  s.config.pixel_assignment = io::PixelAssignment::fraction;
  test::write_units(s.dir / "town.gpkg", "GPKG", 4326,
                    {{std::string("A"), 10.0, test::box(0, 5, 5, 10)},
                     {std::string("B"), 20.0, test::box(5, 5, 10, 10)},
                     {std::string("C"), 30.0, test::box(0, 0, 5, 5)},
                     {std::string("D"), 40.0, test::box(5, 0, 10, 5)},
                     {std::string("town"), 50.0, test::box(7.2, 4.2, 7.5, 4.5)}});
  s.config.units.path = "town.gpkg";
  const io::BuiltData b = s.build();
  ASSERT_EQ(b.warnings.size(), 2u);
  EXPECT_NE(b.warnings[0].find("1 units cover fewer than 4 pixels of the grid (smallest 'town', 0.09 pixels)"),
            std::string::npos)
      << b.warnings[0];
  EXPECT_NE(b.warnings[1].find("(worst 'town',"), std::string::npos) << b.warnings[1];
  s.config.units.path = "units.gpkg";
  EXPECT_TRUE(s.build().warnings.empty());
}

// A refined working grid: k x k times the pixels, the same people, the covariates resampled.
TEST(BuildDataset, RefinedGridKeepsThePopulation) {
  Scene s;
  s.config.pixel_assignment = io::PixelAssignment::fraction;
  const io::BuiltData coarse = s.build();
  s.config.grid_refine = 3;
  const io::BuiltData fine = s.build();
  EXPECT_EQ(fine.grid.width, 30);
  EXPECT_DOUBLE_EQ(fine.grid.pixel_width(), coarse.grid.pixel_width() / 3);
  EXPECT_EQ(fine.dataset.num_pixels(), 9 * coarse.dataset.num_pixels());
  EXPECT_NEAR(weighted_population(fine.dataset), weighted_population(coarse.dataset), 1e-9 * s.pop_total());
  for (Index a = 0; a < 4; ++a)
    EXPECT_NEAR(fine.dataset.bag_weights()[a], coarse.dataset.bag_weights()[a], 1e-9 * s.pop_total());
}

// Binomial data: the number tested per unit becomes the dataset's trials, and impossible surveys
// are named (no one tested, more positives than tested, trials missing).
TEST(BuildDataset, TrialsOfASurvey) {
  Scene s;
  test::write_units(s.dir / "survey.gpkg", "GPKG", 4326,
                    {{std::string("A"), 10.0, test::box(0, 5, 5, 10), 40.0},
                     {std::string("B"), 0.0, test::box(5, 5, 10, 10), 25.0},
                     {std::string("C"), 30.0, test::box(0, 0, 5, 5), 30.0},
                     {std::string("D"), 4.0, test::box(5, 0, 10, 5), 12.0}});
  s.config.units = {"survey.gpkg", "", "ID", "cases", "tested"};
  const io::BuiltData b = s.build();
  EXPECT_EQ(b.dataset.trials, (Vector(4) << 40, 25, 30, 12).finished());
  EXPECT_EQ(b.dataset.response, (Vector(4) << 10, 0, 30, 4).finished());

  test::write_units(s.dir / "bad.gpkg", "GPKG", 4326,
                    {{std::string("A"), 10.0, test::box(0, 5, 5, 10), 40.0},
                     {std::string("none"), 0.0, test::box(5, 5, 10, 10), 0.0},
                     {std::string("over"), 31.0, test::box(0, 0, 5, 5), 30.0},
                     {std::string("blank"), 4.0, test::box(5, 0, 10, 5), std::monostate{}}});
  s.config.units.path = "bad.gpkg";
  try {
    s.build();
    FAIL() << "no error";
  } catch (const io::UnusableUnits& e) {
    const std::string m = e.what();
    for (const char* p : {"unit 'none': no one tested (trials 0)", "unit 'over': more positives than trials (31 of 30)",
                          "unit 'blank': missing trials"})
      EXPECT_NE(m.find(p), std::string::npos) << p << " in\n" << m;
  }
  // Without a trials field, the field is not read and the dataset has no trials.
  s.config.units = {"survey.gpkg", "", "ID", "cases", ""};
  EXPECT_EQ(s.build().dataset.trials.size(), 0);
}

// Survey points: with point_buffer 0 a point's bag is the one pixel it falls in (whatever the
// assignment); with a radius, a disc of that area; a point off the grid is named.
TEST(BuildDataset, SurveyPointsAsBags) {
  Scene s;
  test::write_units(s.dir / "points.gpkg", "GPKG", 4326,
                    {{std::string("p1"), 3.0, "POINT(2.5 7.5)", 20.0},
                     {std::string("p2"), 5.0, "POINT(7.2 1.1)", 30.0},
                     {std::string("far"), 1.0, "POINT(50 50)", 10.0}});
  s.config.units = {"points.gpkg", "", "ID", "cases", "tested"};
  s.config.units.point_buffer = 0;
  s.config.on_bad_unit = io::BadUnitPolicy::drop;
  for (auto assignment : {io::PixelAssignment::centre, io::PixelAssignment::fraction}) {
    s.config.pixel_assignment = assignment;
    const io::BuiltData b = s.build();
    ASSERT_EQ(b.dataset.bag_ids, (std::vector<std::string>{"p1", "p2"}));
    EXPECT_EQ(b.dataset.bag_size(0), 1);
    EXPECT_EQ(b.dataset.bag_size(1), 1);
    EXPECT_EQ(b.cell[0], 2 * 10 + 2);  // column 2, row 2 (y = 7.5 is the third row from the top)
    EXPECT_EQ(b.cell[1], 8 * 10 + 7);
    EXPECT_DOUBLE_EQ(b.dataset.coverage[0], 1.0);
    ASSERT_EQ(b.dropped.size(), 1u);
    EXPECT_EQ(b.dropped[0].id, "far");
    EXPECT_EQ(b.dropped[0].problem, "point outside the grid");
  }
  // A disc of radius 1.2 pixels: its area in pixels is pi r^2.
  s.config.units.point_buffer = 1.2;
  s.config.pixel_assignment = io::PixelAssignment::fraction;
  const io::BuiltData disc = s.build();
  EXPECT_NEAR(disc.dataset.coverage.segment(0, disc.dataset.bag_size(0)).sum(), M_PI * 1.2 * 1.2, 0.01);
  // Without point_buffer points are refused, with the setting named.
  s.config.units.point_buffer = -1;
  s.config.on_bad_unit = io::BadUnitPolicy::stop;
  try {
    s.build();
    FAIL() << "no error";
  } catch (const io::UnusableUnits& e) {
    EXPECT_NE(std::string(e.what()).find("survey points need data.units.point_buffer"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace vbagg
