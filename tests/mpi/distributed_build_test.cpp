// io::build_dataset over the processes of an MPI job, and a batch at a time, against one process
// building everything: the same kept and dropped units, the same notes, and each process's bags
// equal to the whole build's, pixel for pixel.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>

#include "../io/fixtures.hpp"
#include "cli/processes.hpp"
#include "io/build_dataset.hpp"

namespace vbagg {
namespace {

using test::Feature;

// A 12 x 12 one-degree grid, two covariates and population, eight units of different sizes and
// three that cannot be used (zero population, outside the grid, no response), and a second
// source of two coarse units.
struct Country {
  test::TempDir dir;
  io::DataConfig config;
  test::RasterSpec spec;

  Country() {
    spec.width = spec.height = 12;
    spec.y0 = 12;
    const auto elev = test::field(12, 12, [](int c, int r) { return c + 12.0 * r; });
    const auto rain = test::field(12, 12, [](int c, int r) { return std::sin(c) + std::cos(r); });
    auto pop = test::field(12, 12, [](int c, int r) { return 1.0 + (c * 7 + r * 3) % 5; });
    for (int r = 0; r < 2; ++r)
      for (int c = 10; c < 12; ++c) pop[static_cast<size_t>(r * 12 + c)] = 0;
    test::write_raster(dir / "elev.tif", spec, {elev});
    test::write_raster(dir / "rain.tif", spec, {rain});
    test::write_raster(dir / "pop.tif", spec, {pop});
    std::vector<Feature> units;
    for (int k = 0; k < 8; ++k) {
      const double x0 = (k % 4) * 2.5, y0 = (k / 4) * 5.0;
      units.push_back({"u" + std::to_string(k), 10.0 + k, test::box(x0, y0, x0 + 1 + k % 3, y0 + 2 + k % 4)});
    }
    units.push_back({std::string("zero"), 3.0, test::box(10, 10, 12, 12)});
    units.push_back({std::string("outside"), 2.0, test::box(50, 50, 60, 60)});
    units.push_back({std::string("missing"), std::monostate{}, test::box(0, 10, 2, 12)});
    test::write_units(dir / "units.gpkg", "GPKG", 4326, units);
    test::write_units(
        dir / "provinces.gpkg", "GPKG", 4326,
        {{std::string("north"), 90.0, test::box(0, 6, 12, 12)}, {std::string("south"), 80.0, test::box(0, 0, 12, 6)}});
    config.covariates = {{"elev.tif", "", "bilinear"}, {"rain.tif", "", "bilinear"}};
    config.population = {"pop.tif", "population", "sum"};
    config.units = {"units.gpkg", "", "ID", "cases", ""};
    config.units.name = "districts";
    io::SourceConfig provinces;
    provinces.units = {"provinces.gpkg", "", "ID", "cases", ""};
    provinces.units.name = "provinces";
    config.more_sources = {provinces};
    config.pixel_assignment = io::PixelAssignment::fraction;
    config.on_bad_unit = io::BadUnitPolicy::drop;
  }
};

// The same kept units (id, source, pixels, population), dropped units, notes, warnings, sources
// and covariates.
void expect_same_units(const io::BuiltData& b, const io::BuiltData& whole) {
  ASSERT_EQ(b.units.size(), whole.units.size());
  for (size_t u = 0; u < whole.units.size(); ++u) {
    EXPECT_EQ(b.units[u].id, whole.units[u].id);
    EXPECT_EQ(b.units[u].source, whole.units[u].source);
    EXPECT_EQ(b.units[u].pixels, whole.units[u].pixels);
    EXPECT_EQ(b.units[u].population, whole.units[u].population);
  }
  ASSERT_EQ(b.dropped.size(), whole.dropped.size());
  for (size_t k = 0; k < whole.dropped.size(); ++k) {
    EXPECT_EQ(b.dropped[k].id, whole.dropped[k].id);
    EXPECT_EQ(b.dropped[k].problem, whole.dropped[k].problem);
  }
  EXPECT_EQ(b.notes, whole.notes);
  EXPECT_EQ(b.warnings, whole.warnings);
  EXPECT_EQ(b.sources, whole.sources);
  EXPECT_EQ(b.covariates, whole.covariates);
}

TEST(DistributedBuild, EachProcessBuildsItsShareOfTheSameUnits) {
  Country c;
  const io::BuiltData whole = io::build_dataset(c.config, c.dir.path.string());
  const io::BuiltData mine = io::build_dataset(c.config, c.dir.path.string(), cli::processes());
  expect_same_units(mine, whole);
  EXPECT_EQ(io::total_pixels(mine), whole.dataset.num_pixels());
  // This process's bags, pixel for pixel.
  const Dataset& d = mine.dataset;
  for (Index a = 0; a < d.num_bags(); ++a) {
    const Index g = d.global_bag_of(a);
    ASSERT_LT(g, whole.dataset.num_bags());
    EXPECT_EQ(d.bag_ids[static_cast<size_t>(a)], whole.dataset.bag_ids[static_cast<size_t>(g)]);
    EXPECT_EQ(d.source_of(a), whole.dataset.source_of(g));
    ASSERT_EQ(d.bag_size(a), whole.dataset.bag_size(g));
    const Index n = d.bag_size(a);
    EXPECT_EQ(d.inputs.middleCols(d.bag_begin(a), n), whole.dataset.inputs.middleCols(whole.dataset.bag_begin(g), n));
    EXPECT_EQ(d.population.segment(d.bag_begin(a), n), whole.dataset.population.segment(whole.dataset.bag_begin(g), n));
  }
  // Every unit is held by exactly one process.
  Vector held = Vector::Zero(static_cast<Index>(whole.units.size()));
  for (Index a = 0; a < d.num_bags(); ++a) held[d.global_bag_of(a)] += 1;
  cli::processes().sum(held);
  EXPECT_EQ(held, Vector::Ones(held.size()));
  if (cli::process_count() > 1) {
    EXPECT_LT(d.num_bags(), whole.dataset.num_bags());
  }
}

// A build a batch at a time, of one unit up to all of them, over the processes: every kept unit's
// bag once, pixel for pixel the whole build's, and the same units, dropped units, notes and warnings.
TEST(DistributedBuild, BatchesHoldTheWholeBuildsBags) {
  Country c;
  const io::BuiltData whole = io::build_dataset(c.config, c.dir.path.string());
  for (const Index batch_pixels : {Index(1), Index(20), Index(100000)}) {
    SCOPED_TRACE("batches of " + std::to_string(batch_pixels) + " pixels");
    Vector held = Vector::Zero(static_cast<Index>(whole.units.size()));
    int batches = 0;
    const io::BuiltData summary = io::build_dataset_in_batches(
        c.config, c.dir.path.string(), batch_pixels,
        [&](io::BuiltData& b) {
          ++batches;
          const Dataset& d = b.dataset;
          EXPECT_EQ(b.covariates, whole.covariates);
          for (Index a = 0; a < d.num_bags(); ++a) {
            const Index g = d.global_bag_of(a);
            ASSERT_LT(g, whole.dataset.num_bags());
            held[g] += 1;
            EXPECT_EQ(b.units[static_cast<size_t>(g - b.first_unit)].id, whole.units[static_cast<size_t>(g)].id);
            EXPECT_EQ(d.bag_ids[static_cast<size_t>(a)], whole.dataset.bag_ids[static_cast<size_t>(g)]);
            EXPECT_EQ(d.source_of(a), whole.dataset.source_of(g));
            EXPECT_EQ(d.response[a], whole.dataset.response[g]);
            ASSERT_EQ(d.bag_size(a), whole.dataset.bag_size(g));
            const Index n = d.bag_size(a), w = whole.dataset.bag_begin(g);
            EXPECT_EQ(d.inputs.middleCols(d.bag_begin(a), n), whole.dataset.inputs.middleCols(w, n));
            EXPECT_EQ(d.population.segment(d.bag_begin(a), n), whole.dataset.population.segment(w, n));
            EXPECT_EQ(d.coverage.segment(d.bag_begin(a), n), whole.dataset.coverage.segment(w, n));
          }
        },
        cli::processes());
    cli::processes().sum(held);
    EXPECT_EQ(held, Vector::Ones(held.size()));
    if (batch_pixels == 1) {
      EXPECT_EQ(batches, 12);  // every unit read without a problem, one by one
    }
    if (batch_pixels == 100000) {
      EXPECT_EQ(batches, 2);  // a batch per source
    }
    expect_same_units(summary, whole);
  }
}

// The same country over three months (one source, counts per month from a long table): each
// process builds its share of the unit-periods, whole or in batches, as one process does.
TEST(DistributedBuild, PeriodsAreSharedLikeUnits) {
  Country c;
  c.config.more_sources.clear();
  c.config.time = io::parse_time_axis("2020-01..2020-03");
  {
    std::ofstream table(c.dir / "cases.csv");
    table << "ID,month,cases\n";
    for (const char* month : {"2020-01", "2020-02", "2020-03"})
      for (int k = 0; k < 8; ++k) table << "u" << k << "," << month << "," << 10 + k + month[6] - '0' << "\n";
  }
  c.config.units.response_table = c.dir / "cases.csv";
  c.config.units.period_field = "month";
  const io::BuiltData whole = io::build_dataset(c.config, c.dir.path.string());
  ASSERT_EQ(whole.units.size(), 24u);
  const io::BuiltData mine = io::build_dataset(c.config, c.dir.path.string(), cli::processes());
  expect_same_units(mine, whole);
  Vector held = Vector::Zero(24);
  const Dataset& d = mine.dataset;
  for (Index a = 0; a < d.num_bags(); ++a) {
    const Index g = d.global_bag_of(a);
    held[g] += 1;
    EXPECT_EQ(d.bag_ids[static_cast<size_t>(a)], whole.dataset.bag_ids[static_cast<size_t>(g)]);
    EXPECT_EQ(d.response[a], whole.dataset.response[g]);
    const Index n = d.bag_size(a);
    EXPECT_EQ(d.inputs.middleCols(d.bag_begin(a), n), whole.dataset.inputs.middleCols(whole.dataset.bag_begin(g), n));
  }
  cli::processes().sum(held);
  EXPECT_EQ(held, Vector::Ones(24));
  // A unit's periods are held by one process (a unit effect shared by its periods needs them
  // together): here all three of its bags or none.
  Vector split = Vector::Zero(8);
  for (int k = 0; k < 8; ++k) {
    int here = 0;
    for (Index a = 0; a < d.num_bags(); ++a)
      here += unit_of_bag(d.bag_ids[static_cast<size_t>(a)]) == "u" + std::to_string(k);
    split[k] = here == 0 || here == 3 ? 0.0 : 1.0;
  }
  cli::processes().sum(split);
  EXPECT_EQ(split, Vector::Zero(8));

  held.setZero();
  const io::BuiltData summary = io::build_dataset_in_batches(
      c.config, c.dir.path.string(), 20,
      [&](io::BuiltData& b) {
        for (Index a = 0; a < b.dataset.num_bags(); ++a) {
          const Index g = b.dataset.global_bag_of(a);
          held[g] += 1;
          EXPECT_EQ(b.dataset.bag_ids[static_cast<size_t>(a)], whole.dataset.bag_ids[static_cast<size_t>(g)]);
        }
      },
      cli::processes());
  cli::processes().sum(held);
  EXPECT_EQ(held, Vector::Ones(24));
  expect_same_units(summary, whole);
}

// A unit that only its builder finds unusable stops every process under on_bad_unit: stop, whole
// or in batches.
TEST(DistributedBuild, BadUnitsStopEveryProcess) {
  Country c;
  c.config.on_bad_unit = io::BadUnitPolicy::stop;
  std::string whole_error, my_error;
  try {
    io::build_dataset(c.config, c.dir.path.string());
  } catch (const DataError& e) {
    whole_error = e.what();
  }
  try {
    io::build_dataset(c.config, c.dir.path.string(), cli::processes());
  } catch (const DataError& e) {
    my_error = e.what();
  }
  std::string batch_error;
  try {
    io::build_dataset_in_batches(
        c.config, c.dir.path.string(), 20, [](io::BuiltData&) {}, cli::processes());
  } catch (const DataError& e) {
    batch_error = e.what();
  }
  EXPECT_NE(whole_error.find("'zero': zero population"), std::string::npos) << whole_error;
  EXPECT_EQ(my_error, whole_error);
  EXPECT_EQ(batch_error, whole_error);
}

}  // namespace
}  // namespace vbagg
