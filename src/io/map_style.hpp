// QGIS styles that make the outputs readable the moment they are opened. QGIS loads `<map>.qml`
// beside a raster as the layer's default style, and a GeoPackage layer's default from the file's
// `layer_styles` table. GDAL has nothing QGIS reads as a colour ramp for a Float32 band (colour
// tables are for 8- and 16-bit palettes), so the ramp lives in the sidecar; the band's
// statistics, description and unit stay in the GeoTIFF for every other reader.
#pragma once

#include <string>
#include <vector>

namespace vbagg::io {

// Perceptual sequential ramps (every stop is coloured, none grey), and a diverging one.
enum class Palette { viridis, plasma, yellow_orange_red, yellow_green_blue, red_purple, blue_white_red };

// A continuous colour ramp for a single-band raster.
struct RasterStyle {
  double min = 0, max = 1;  // limits: values beyond take the end colours
  bool geometric = false;   // stops spaced geometrically, for right-skewed positive quantities
  Palette palette = Palette::viridis;
  std::string prefix, suffix;  // legend text around the limits: "P = ", " cases per person"
};

// The limits and spacing of a ramp that shows a map's values: the 2nd to 98th percentiles of a
// sample of them, rounded outwards to two significant digits; geometric when every value is
// non-negative and right-skewed (the median of the positive values in the lowest quarter of their
// 2-98 % range; the lower limit is then the 2nd percentile of the positive values). `values` is
// sorted in place.
RasterStyle ramp_limits(std::vector<float>& values);

std::string raster_style_qml(const RasterStyle& style);

// Polygons coloured by class of a numeric field.
struct GraduatedStyle {
  std::string field;
  std::vector<double> breaks;  // class bounds, ascending: breaks.size() - 1 classes
  Palette palette = Palette::red_purple;
  std::string unit;  // in the class labels: "1,200 - 3,400 cases"
  int decimals = 0;
};

// Class bounds that put about the same number of values in each of `classes` classes (fewer when
// values repeat); the first bound is the minimum and the last the maximum.
std::vector<double> quantile_breaks(std::vector<double> values, int classes);

std::string graduated_style_qml(const GraduatedStyle& style);

}  // namespace vbagg::io
