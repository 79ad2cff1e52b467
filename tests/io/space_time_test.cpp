// The time axis of a space-time fit: periods and their patterns, and builds where each bag is a
// unit in one period, from every layout of responses and covariates.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "core/kernel.hpp"
#include "fixtures.hpp"
#include "io/build_dataset.hpp"
#include "io/response_table.hpp"

namespace vbagg {
namespace {

using test::RasterSpec;

TEST(TimeAxis, RangesListsAndTimes) {
  const io::TimeAxis months = io::parse_time_axis("2020-11..2021-02");
  EXPECT_EQ(months.labels(), (std::vector<std::string>{"2020-11", "2020-12", "2021-01", "2021-02"}));
  EXPECT_TRUE(months.monthly());
  EXPECT_EQ(months.origin_year(), 2020);
  EXPECT_DOUBLE_EQ(months.time(0), 10.5 / 12);     // the middle of November
  EXPECT_DOUBLE_EQ(months.time(2), 1 + 0.5 / 12);  // the middle of the next January
  EXPECT_EQ(months.index_of("2021-01"), 2);
  EXPECT_EQ(months.index_of("2021-03"), -1);

  const io::TimeAxis years = io::parse_time_axis("2018..2020");
  EXPECT_EQ(years.labels(), (std::vector<std::string>{"2018", "2019", "2020"}));
  EXPECT_FALSE(years.monthly());
  EXPECT_DOUBLE_EQ(years.time(1), 1.5);
  EXPECT_EQ(io::parse_time_axis(" 2019-01, 2019-06 ").labels(), (std::vector<std::string>{"2019-01", "2019-06"}));
  EXPECT_TRUE(io::parse_time_axis("").empty());
}

TEST(TimeAxis, BadPeriodsAreNamed) {
  for (const char* text : {"2019-13", "19-01", "2019-03..2019-01", "2019, 2019-02", "2019-02, 2019-01", "2019-1x"}) {
    try {
      io::parse_time_axis(text);
      ADD_FAILURE() << text << " was accepted";
    } catch (const ConfigError& e) {
      EXPECT_NE(std::string(e.what()).find("data.time"), std::string::npos) << e.what();
    }
  }
}

TEST(TimeAxis, PatternsAndTableLabels) {
  const io::Period march = io::parse_period("2019-03", "test"), year = io::parse_period("2019", "test");
  EXPECT_EQ(io::expand_period("rain/{year}/{month}_{period}.tif", march, "k"), "rain/2019/03_2019-03.tif");
  EXPECT_EQ(io::expand_period("cases_{year}{month}", march, "k"), "cases_201903");
  EXPECT_THROW(io::expand_period("cases_{month}", year, "k"), ConfigError);
  EXPECT_TRUE(io::has_period_tokens("pop_{year}.tif"));
  EXPECT_FALSE(io::has_period_tokens("pop.tif"));
  EXPECT_EQ(io::pattern_stem("data/rain_{period}.tif"), "rain");
  EXPECT_EQ(io::pattern_stem("{year}-{month}.ndvi.tif"), "ndvi");
  for (const auto& [text, label] : std::map<std::string, std::string>{{"2019-03", "2019-03"},
                                                                      {"201903", "2019-03"},
                                                                      {"2019-3", "2019-03"},
                                                                      {"2019-03-15", "2019-03"},
                                                                      {" 2019 ", "2019"},
                                                                      {"2019-13", ""},
                                                                      {"March", ""},
                                                                      {"2019-03-xx", ""}})
    EXPECT_EQ(io::period_label(text), label) << text;
}

const std::vector<std::string> kPeriods = {"2020-11", "2020-12", "2021-01"};

// A 10 x 10 grid with a static covariate, a monthly rainfall (a band per month, and as a file per
// month), population per year, and four quadrant units with a count per month (fields and table).
struct SpaceTimeScene {
  test::TempDir dir;
  io::DataConfig config;
  RasterSpec spec;
  std::vector<double> elev = test::field(10, 10, [](int c, int r) { return c + 10.0 * r; });
  std::vector<std::vector<double>> rain;
  std::vector<double> pop2020 = test::field(10, 10, [](int c, int r) { return 1.0 + (c * 7 + r * 3) % 5; });
  std::vector<double> pop2021 = test::field(10, 10, [](int c, int r) { return 2.0 + (c * 7 + r * 3) % 5; });
  const std::vector<std::string> ids = {"A", "B", "C", "D"};

  double cases(size_t unit, size_t period) const { return 10.0 * (unit + 1) + static_cast<double>(period); }

  SpaceTimeScene() {
    for (size_t p = 0; p < kPeriods.size(); ++p) {
      rain.push_back(test::field(10, 10, [&](int c, int r) { return std::sin(c + static_cast<double>(p)) + r; }));
      test::write_raster(dir / ("rain_" + kPeriods[p] + ".tif"), spec, {rain.back()});
    }
    test::write_raster(dir / "rain_monthly.tif", spec, rain);
    test::write_raster(dir / "elev.tif", spec, {elev});
    test::write_raster(dir / "pop_2020.tif", spec, {pop2020});
    test::write_raster(dir / "pop_2021.tif", spec, {pop2021});
    write_units();
    std::ofstream table(dir / "cases.csv");
    table << "ID,month,cases\n";
    for (size_t p = 0; p < kPeriods.size(); ++p)
      for (size_t u = 0; u < ids.size(); ++u) table << ids[u] << "," << kPeriods[p] << "," << cases(u, p) << "\n";
    config.covariates = {{"elev.tif", "", "bilinear"}, {"rain_monthly.tif", "rain", "bilinear"}};
    config.covariates[1].series_bands = true;
    config.population = {"pop_{year}.tif", "population", "sum"};
    config.units = {"units.gpkg", "", "ID", "cases_{year}{month}", ""};
    config.pixel_assignment = io::PixelAssignment::centre;
    config.time = io::parse_time_axis("2020-11..2021-01");
  }

  // Quadrant units with a field cases_YYYYMM per month.
  void write_units() {
    io::ensure_gdal_registered();
    GDALDriver* drv = GetGDALDriverManager()->GetDriverByName("GPKG");
    io::DatasetPtr ds(drv->Create((dir / "units.gpkg").c_str(), 0, 0, 0, GDT_Unknown, nullptr));
    OGRSpatialReference srs;
    srs.importFromEPSG(4326);
    srs.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
    OGRLayer* layer = ds->CreateLayer("units", &srs, wkbPolygon, nullptr);
    OGRFieldDefn id("ID", OFTString);
    layer->CreateField(&id);
    for (const auto& p : kPeriods) {
      OGRFieldDefn f(("cases_" + p.substr(0, 4) + p.substr(5)).c_str(), OFTReal);
      layer->CreateField(&f);
    }
    const std::vector<std::string> boxes = {test::box(0, 5, 5, 10), test::box(5, 5, 10, 10), test::box(0, 0, 5, 5),
                                            test::box(5, 0, 10, 5)};
    for (size_t u = 0; u < ids.size(); ++u) {
      OGRFeature f(layer->GetLayerDefn());
      f.SetField(0, ids[u].c_str());
      for (size_t p = 0; p < kPeriods.size(); ++p) f.SetField(static_cast<int>(p + 1), cases(u, p));
      OGRGeometry* g = nullptr;
      OGRGeometryFactory::createFromWkt(boxes[u].c_str(), &srs, &g);
      f.SetGeometryDirectly(g);
      ASSERT_EQ(layer->CreateFeature(&f), OGRERR_NONE);
    }
  }

  void use_table(const std::string& name = "cases.csv") {
    config.units.response_table = dir / name;
    config.units.period_field = "month";
    config.units.response_field = "cases";
  }
  io::BuiltData build() const { return io::build_dataset(config, dir.path.string()); }
};

TEST(SpaceTimeBuild, BagsAreUnitsInPeriods) {
  const SpaceTimeScene s;
  const io::BuiltData b = s.build();
  const Dataset& d = b.dataset;
  ASSERT_EQ(d.num_bags(), 12);
  EXPECT_EQ(b.covariates, (std::vector<std::string>{"elev", "rain"}));
  EXPECT_EQ(b.time.labels(), kPeriods);
  // Two covariates, three geographic coordinates, the time inputs.
  ASSERT_EQ(d.num_inputs(), 2 + 3 + kTimeInputs);
  for (size_t p = 0; p < 3; ++p)
    for (size_t u = 0; u < 4; ++u) {
      const Index a = static_cast<Index>(p * 4 + u);
      EXPECT_EQ(d.bag_ids[static_cast<size_t>(a)], s.ids[u] + "@" + kPeriods[p]);
      EXPECT_EQ(b.units[static_cast<size_t>(a)].period, static_cast<int>(p));
      EXPECT_EQ(d.response[a], s.cases(u, p));
      Vector t(kTimeInputs);
      time_inputs(b.time.time(p), t);
      const auto& pop = p == 0 || p == 1 ? s.pop2020 : s.pop2021;  // population per year
      for (Index i = d.bag_begin(a); i < d.bag_begin(a) + d.bag_size(a); ++i) {
        const auto cell = static_cast<size_t>(b.cell[static_cast<size_t>(i)]);
        EXPECT_DOUBLE_EQ(d.inputs(0, i), s.elev[cell]);
        EXPECT_NEAR(d.inputs(1, i), s.rain[p][cell], 1e-6);  // the period's band
        EXPECT_DOUBLE_EQ(d.population[i], pop[cell]);
        EXPECT_EQ(Vector(d.inputs.col(i).tail(kTimeInputs)), t);
      }
    }
}

// The same data, however the responses and covariate series are laid out, build the same bags.
void expect_same_build(const io::BuiltData& a, const io::BuiltData& b) {
  EXPECT_EQ(a.dataset.bag_ids, b.dataset.bag_ids);
  EXPECT_EQ(a.dataset.response, b.dataset.response);
  EXPECT_EQ(a.dataset.offsets, b.dataset.offsets);
  EXPECT_EQ(a.dataset.inputs, b.dataset.inputs);
  EXPECT_EQ(a.covariates, b.covariates);
}

TEST(SpaceTimeBuild, LongTableAndFieldsPerPeriodAgree) {
  SpaceTimeScene s;
  const io::BuiltData wide = s.build();
  s.use_table();
  expect_same_build(wide, s.build());
}

TEST(SpaceTimeBuild, FilePerPeriodAndBandPerPeriodAgree) {
  SpaceTimeScene s;
  const io::BuiltData bands = s.build();
  s.config.covariates[1] = {"rain_{period}.tif", "", "bilinear"};  // named "rain" after the pattern
  expect_same_build(bands, s.build());
  // Bands described by their periods are found by label, in any order and among other periods.
  RasterSpec described = s.spec;
  described.descriptions = {"2021-01", "2020-10", "2020-11", "2020-12"};
  test::write_raster(s.dir / "rain_described.tif", described, {s.rain[2], s.elev, s.rain[0], s.rain[1]});
  s.config.covariates[1] = {"rain_described.tif", "rain", "bilinear"};
  s.config.covariates[1].series_bands = true;
  expect_same_build(bands, s.build());
}

TEST(SpaceTimeBuild, MissingRowsFollowTheBadUnitPolicy) {
  SpaceTimeScene s;
  std::ofstream(s.dir / "gap.csv") << "ID,month,cases\nA,2020-11,1\nB,202011,2\nC,2020-11-01,3\nD,2020-11,4\n"
                                   << "A,2020-12,1\nC,2020-12,3\nD,2020-12,4\n"  // no B in December
                                   << "A,2021-01,1\nB,2021-01,2\nC,2021-01,3\nD,2021-01,4\nA,2021-02,9\n";
  s.use_table("gap.csv");
  try {
    s.build();
    ADD_FAILURE() << "a missing row was accepted";
  } catch (const io::UnusableUnits& e) {
    ASSERT_EQ(e.issues().size(), 1u);
    EXPECT_EQ(e.issues()[0].id, "B@2020-12");
    EXPECT_NE(e.issues()[0].problem.find("no row for period 2020-12"), std::string::npos) << e.issues()[0].problem;
  }
  s.config.on_bad_unit = io::BadUnitPolicy::drop;
  const io::BuiltData b = s.build();
  EXPECT_EQ(b.dataset.num_bags(), 11);
  ASSERT_EQ(b.dropped.size(), 1u);
  EXPECT_EQ(b.dropped[0].id, "B@2020-12");
  // data.on_missing_response: predict keeps the month without a count, to be predicted.
  s.config.units.predict_missing = true;
  const io::BuiltData kept = s.build();
  EXPECT_EQ(kept.dataset.num_bags(), 12);
  EXPECT_TRUE(kept.dropped.empty());
  for (Index a = 0; a < kept.dataset.num_bags(); ++a)
    EXPECT_EQ(kept.dataset.observed(a), kept.dataset.bag_ids[static_cast<size_t>(a)] != "B@2020-12")
        << kept.dataset.bag_ids[static_cast<size_t>(a)];
}

TEST(SpaceTimeBuild, BrokenSeriesAndTablesAreNamed) {
  auto expect_error = [](SpaceTimeScene& s, const std::string& part) {
    try {
      s.build();
      ADD_FAILURE() << "expected an error with '" << part << "'";
    } catch (const std::exception& e) {
      EXPECT_NE(std::string(e.what()).find(part), std::string::npos) << e.what();
    }
  };
  {
    SpaceTimeScene s;
    std::ofstream(s.dir / "twice.csv") << "ID,month,cases\nA,2020-11,1\nA,2020-11,2\n";
    s.use_table("twice.csv");
    expect_error(s, "unit 'A' has two rows for period 2020-11");
  }
  {
    SpaceTimeScene s;
    std::ofstream(s.dir / "odd.csv") << "ID,month,cases\nA,November,1\n";
    s.use_table("odd.csv");
    expect_error(s, "row 2: the period 'November'");
  }
  {
    SpaceTimeScene s;
    s.config.time = io::parse_time_axis("2020-11..2021-02");  // four months, three undescribed bands
    expect_error(s, "has 3 bands, none described as 2020-11, and data.time has 4 periods");
  }
  {
    SpaceTimeScene s;
    s.config.units.response_field = "cases_202011";
    expect_error(s, "a response per period");
  }
  {
    SpaceTimeScene s;
    s.config.covariates[0].path = "elev_{period}.tif";
    expect_error(s, "elev_2020-11.tif");
  }
}

TEST(SpaceTimeBuild, BatchesHoldTheWholeBuildsBags) {
  const SpaceTimeScene s;
  const io::BuiltData whole = s.build();
  std::map<Index, std::pair<std::string, Matrix>> seen;
  const io::BuiltData summary = io::build_dataset_in_batches(s.config, s.dir.path.string(), 30, [&](io::BuiltData& b) {
    EXPECT_EQ(b.time.labels(), kPeriods);
    const Dataset& d = b.dataset;
    for (Index a = 0; a < d.num_bags(); ++a) {
      const Index g = d.global_bag_of(a);
      EXPECT_FALSE(seen.count(g)) << "bag " << g << " twice";
      seen[g] = {d.bag_ids[static_cast<size_t>(a)], d.inputs.middleCols(d.bag_begin(a), d.bag_size(a))};
    }
  });
  ASSERT_EQ(seen.size(), 12u);
  ASSERT_EQ(summary.units.size(), 12u);
  for (Index a = 0; a < 12; ++a) {
    const auto& [id, inputs] = seen.at(a);
    EXPECT_EQ(id, whole.dataset.bag_ids[static_cast<size_t>(a)]);
    EXPECT_EQ(summary.units[static_cast<size_t>(a)].id, id);
    EXPECT_EQ(summary.units[static_cast<size_t>(a)].period, whole.units[static_cast<size_t>(a)].period);
    EXPECT_EQ(inputs, whole.dataset.inputs.middleCols(whole.dataset.bag_begin(a), whole.dataset.bag_size(a)));
  }
}

}  // namespace
}  // namespace vbagg
