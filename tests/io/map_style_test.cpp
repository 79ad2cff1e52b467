// The QGIS styles' numbers: ramp limits from percentiles, geometric stops for skewed positive
// maps, quantile classes.
#include "io/map_style.hpp"

#include <gtest/gtest.h>

#include <cmath>
#include <regex>

namespace vbagg {
namespace {

std::vector<double> stop_values(const std::string& qml) {
  std::vector<double> v;
  const std::regex item("<item value=\"([^\"]+)\"");
  for (auto it = std::sregex_iterator(qml.begin(), qml.end(), item); it != std::sregex_iterator(); ++it)
    v.push_back(std::stod((*it)[1]));
  return v;
}

TEST(MapStyle, EvenValuesGetALinearRampOverTheirCentralRange) {
  std::vector<float> v;
  for (int i = 0; i <= 1000; ++i) v.push_back(static_cast<float>(i) / 1000);
  const io::RasterStyle s = io::ramp_limits(v);
  EXPECT_FALSE(s.geometric);
  EXPECT_DOUBLE_EQ(s.min, 0.02);  // 2nd percentile
  EXPECT_DOUBLE_EQ(s.max, 0.98);  // 98th
  const std::vector<double> stops = stop_values(io::raster_style_qml(s));
  ASSERT_EQ(stops.size(), 9u);
  EXPECT_DOUBLE_EQ(stops.front(), 0.02);
  EXPECT_NEAR(stops[4], 0.5, 1e-9);
  EXPECT_DOUBLE_EQ(stops.back(), 0.98);
}

TEST(MapStyle, SkewedPositiveValuesGetGeometricStops) {
  std::vector<float> v;
  for (int i = 0; i < 1000; ++i) v.push_back(static_cast<float>(std::exp(-4.0 + 8.0 * i / 999)));  // e^-4 .. e^4
  v.push_back(0.0f);  // zeros (no population) do not pull the lower limit to zero
  const io::RasterStyle s = io::ramp_limits(v);
  EXPECT_TRUE(s.geometric);
  EXPECT_GT(s.min, 0);
  EXPECT_NEAR(s.min, std::exp(-4.0 + 8.0 * 0.02), 0.05 * s.min);  // rounded down to two digits
  EXPECT_NEAR(s.max, std::exp(-4.0 + 8.0 * 0.98), 0.05 * s.max);  // rounded up
  const std::vector<double> stops = stop_values(io::raster_style_qml(s));
  ASSERT_EQ(stops.size(), 9u);
  EXPECT_NEAR(stops[4], std::sqrt(s.min * s.max), 1e-6 * stops[4]);
}

TEST(MapStyle, ConstantValuesStillGetAnIncreasingRamp) {
  std::vector<float> v(50, 3.0f);
  const io::RasterStyle s = io::ramp_limits(v);
  EXPECT_GT(s.max, s.min);
}

TEST(MapStyle, QuantileBreaksSplitTheValuesEvenly) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  const std::vector<double> b = io::quantile_breaks(v, 4);
  EXPECT_EQ(b, (std::vector<double>{1, 26, 51, 75, 100}));  // nearest ranks 0, 25, 50 (49.5 rounded), 74, 99
  EXPECT_EQ(io::quantile_breaks({5, 5, 5, 7}, 4), (std::vector<double>{5, 7}));  // repeats merge classes
  const std::string qml = io::graduated_style_qml({"predicted", b, io::Palette::red_purple, "cases", 0});
  EXPECT_NE(qml.find("label=\"1 - 26 cases\""), std::string::npos) << qml;
  EXPECT_NE(qml.find("attr=\"predicted\""), std::string::npos);
}

}  // namespace
}  // namespace vbagg
