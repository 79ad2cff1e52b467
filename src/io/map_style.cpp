#include "map_style.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

namespace vbagg::io {

namespace {

struct Rgb {
  int r, g, b;
};

std::vector<Rgb> stops(Palette p) {
  switch (p) {
    case Palette::viridis:
      return {{68, 1, 84},    {71, 45, 123}, {59, 82, 139},  {44, 114, 142}, {33, 145, 140},
              {40, 174, 128}, {94, 201, 98}, {173, 220, 48}, {253, 231, 37}};
    case Palette::plasma:
      return {{13, 8, 135},   {76, 2, 161},   {126, 3, 168},  {169, 35, 149}, {204, 71, 120},
              {230, 108, 92}, {248, 149, 64}, {253, 197, 39}, {240, 249, 33}};
    case Palette::yellow_orange_red:
      return {{255, 255, 204}, {255, 237, 160}, {254, 217, 118}, {254, 178, 76}, {253, 141, 60},
              {252, 78, 42},   {227, 26, 28},   {189, 0, 38},    {128, 0, 38}};
    case Palette::yellow_green_blue:
      return {{255, 255, 217}, {237, 248, 177}, {199, 233, 180}, {127, 205, 187}, {65, 182, 196},
              {29, 145, 192},  {34, 94, 168},   {37, 52, 148},   {8, 29, 88}};
    case Palette::red_purple:  // magma's light half to its dark purple, for choropleths
      return {{252, 253, 191}, {254, 159, 109}, {222, 73, 104}, {140, 41, 129}, {59, 15, 112}};
    case Palette::blue_white_red:
      return {{33, 102, 172}, {103, 169, 207}, {247, 247, 247}, {239, 138, 98}, {178, 24, 43}};
  }
  return {};
}

// The colour at t in [0, 1] along a palette's stops, linearly between neighbours.
Rgb colour_at(Palette p, double t) {
  const std::vector<Rgb> s = stops(p);
  const double x = std::clamp(t, 0.0, 1.0) * static_cast<double>(s.size() - 1);
  const size_t i = std::min(static_cast<size_t>(x), s.size() - 2);
  const double f = x - static_cast<double>(i);
  auto mix = [&](int a, int b) { return static_cast<int>(std::lround(a + f * (b - a))); };
  return {mix(s[i].r, s[i + 1].r), mix(s[i].g, s[i + 1].g), mix(s[i].b, s[i + 1].b)};
}

std::string hex(const Rgb& c) {
  char buf[8];
  std::snprintf(buf, sizeof buf, "#%02x%02x%02x", c.r, c.g, c.b);
  return buf;
}

std::string number(double v, int digits = 9) {
  std::ostringstream s;
  s.precision(digits);
  s << v;
  return s.str();
}

// XML attribute text.
std::string escape(const std::string& s) {
  std::string e;
  for (char c : s) {
    if (c == '&')
      e += "&amp;";
    else if (c == '<')
      e += "&lt;";
    else if (c == '>')
      e += "&gt;";
    else if (c == '"')
      e += "&quot;";
    else
      e += c;
  }
  return e;
}

// v rounded to two significant digits, down or up.
double round2(double v, bool up) {
  if (v == 0 || !std::isfinite(v)) return v;
  const double scale = std::pow(10.0, std::floor(std::log10(std::abs(v))) - 1);
  // The tolerance keeps a value that is already round (0.98 stored as 0.98000002f) where it is.
  return (up ? std::ceil(v / scale - 1e-4) : std::floor(v / scale + 1e-4)) * scale;
}

// Decimals that print both limits with their two significant digits.
int legend_decimals(double lo, double hi) {
  const double smallest = std::min(lo != 0 ? std::abs(lo) : std::abs(hi), hi != 0 ? std::abs(hi) : std::abs(lo));
  if (!(smallest > 0)) return 0;
  return std::clamp(1 - static_cast<int>(std::floor(std::log10(smallest))), 0, 10);
}

float percentile(const std::vector<float>& sorted, double p) {
  const size_t k = static_cast<size_t>(std::lround(p * static_cast<double>(sorted.size() - 1)));
  return sorted[k];
}

// "1234567.8" as "1,234,568" for the class labels.
std::string grouped(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  std::string s = buf;
  const size_t dot = s.find('.');
  size_t end = dot == std::string::npos ? s.size() : dot;
  const size_t begin = s[0] == '-' ? 1 : 0;
  for (size_t i = end; i > begin + 3; i -= 3) s.insert(i - 3, ",");
  return s;
}

}  // namespace

RasterStyle ramp_limits(std::vector<float>& values) {
  RasterStyle s;
  values.erase(std::remove_if(values.begin(), values.end(), [](float v) { return !std::isfinite(v); }), values.end());
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  double lo = percentile(values, 0.02), hi = percentile(values, 0.98);
  // Right-skewed and positive (rates, counts, sds): the median sits in the lowest quarter of the
  // linear range, so geometric stops are needed to tell most of the map apart.
  if (values.front() >= 0) {
    const auto positive = std::upper_bound(values.begin(), values.end(), 0.0f);
    if (positive != values.end()) {
      const std::vector<float> pos(positive, values.end());
      const double plo = percentile(pos, 0.02), median = percentile(pos, 0.5);
      if (hi > plo && (median - plo) < 0.25 * (hi - plo)) {
        s.geometric = true;
        lo = plo;
      }
    }
  }
  s.min = round2(lo, false);
  s.max = round2(hi, true);
  if (!(s.max > s.min)) s.max = s.min + (s.min != 0 ? std::abs(s.min) : 1.0);
  return s;
}

std::string raster_style_qml(const RasterStyle& style) {
  const int n = 9, decimals = legend_decimals(style.min, style.max);
  const std::string lo = number(style.min), hi = number(style.max);
  std::ostringstream q;
  q << "<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
    << "<qgis version=\"3.22.16\" styleCategories=\"Symbology\">\n  <pipe>\n"
    << "    <rasterrenderer type=\"singlebandpseudocolor\" band=\"1\" opacity=\"1\" alphaBand=\"-1\" nodataColor=\"\" "
    << "classificationMin=\"" << lo << "\" classificationMax=\"" << hi << "\">\n"
    << "      <minMaxOrigin>\n        <limits>None</limits>\n        <extent>WholeRaster</extent>\n"
    << "        <statAccuracy>Exact</statAccuracy>\n      </minMaxOrigin>\n"
    << "      <rastershader>\n"
    << "        <colorrampshader colorRampType=\"INTERPOLATED\" classificationMode=\"1\" clip=\"0\" minimumValue=\""
    << lo << "\" maximumValue=\"" << hi << "\" labelPrecision=\"" << decimals << "\">\n";
  for (int i = 0; i < n; ++i) {
    const double t = static_cast<double>(i) / (n - 1);
    const double v =
        style.geometric ? style.min * std::pow(style.max / style.min, t) : style.min + t * (style.max - style.min);
    q << "          <item value=\"" << number(v) << "\" color=\"" << hex(colour_at(style.palette, t))
      << "\" alpha=\"255\" label=\"" << number(v, 3) << "\"/>\n";
  }
  q << "          <rampLegendSettings useContinuousLegend=\"1\" prefix=\"" << escape(style.prefix) << "\" suffix=\""
    << escape(style.suffix) << "\" minimumLabel=\"\" maximumLabel=\"\" orientation=\"2\" direction=\"0\">\n"
    << "            <numericFormat id=\"basic\">\n              <Option type=\"Map\">\n"
    << "                <Option name=\"decimals\" type=\"int\" value=\"" << decimals << "\"/>\n"
    << "                <Option name=\"show_trailing_zeros\" type=\"bool\" value=\"false\"/>\n"
    << "                <Option name=\"show_thousand_separator\" type=\"bool\" value=\"true\"/>\n"
    << "              </Option>\n            </numericFormat>\n          </rampLegendSettings>\n"
    << "        </colorrampshader>\n      </rastershader>\n    </rasterrenderer>\n  </pipe>\n</qgis>\n";
  return q.str();
}

std::vector<double> quantile_breaks(std::vector<double> values, int classes) {
  values.erase(std::remove_if(values.begin(), values.end(), [](double v) { return !std::isfinite(v); }), values.end());
  if (values.empty()) return {};
  std::sort(values.begin(), values.end());
  std::vector<double> b;
  for (int k = 0; k <= classes; ++k) {
    const double v = values[static_cast<size_t>(
        std::lround(static_cast<double>(k) / classes * static_cast<double>(values.size() - 1)))];
    if (b.empty() || v > b.back()) b.push_back(v);
  }
  if (b.size() == 1) b.push_back(b.front());
  return b;
}

std::string graduated_style_qml(const GraduatedStyle& style) {
  const size_t k = style.breaks.size() < 2 ? 0 : style.breaks.size() - 1;
  const std::string unit = style.unit.empty() ? "" : " " + style.unit;
  std::ostringstream q;
  q << "<!DOCTYPE qgis PUBLIC 'http://mrcc.com/qgis.dtd' 'SYSTEM'>\n"
    << "<qgis version=\"3.22.16\" styleCategories=\"Symbology\">\n"
    << "  <renderer-v2 type=\"graduatedSymbol\" attr=\"" << escape(style.field)
    << "\" graduatedMethod=\"GraduatedColor\" symbollevels=\"0\" enableorderby=\"0\" forceraster=\"0\">\n"
    << "    <ranges>\n";
  for (size_t i = 0; i < k; ++i) {
    // QGIS draws a feature only inside some class: the outer bounds reach past the data.
    const double lower = style.breaks[i] - (i == 0 ? 1e-9 * (1 + std::abs(style.breaks[i])) : 0.0);
    const double upper = style.breaks[i + 1] + (i + 1 == k ? 1e-9 * (1 + std::abs(style.breaks[i + 1])) : 0.0);
    q << "      <range lower=\"" << number(lower, 17) << "\" upper=\"" << number(upper, 17) << "\" symbol=\"" << i
      << "\" label=\""
      << escape(grouped(style.breaks[i], style.decimals) + " - " + grouped(style.breaks[i + 1], style.decimals) + unit)
      << "\" render=\"true\"/>\n";
  }
  q << "    </ranges>\n    <symbols>\n";
  auto rgba = [](const Rgb& c) {
    return std::to_string(c.r) + "," + std::to_string(c.g) + "," + std::to_string(c.b) + ",255";
  };
  for (size_t i = 0; i < k; ++i) {
    const double t = k > 1 ? static_cast<double>(i) / static_cast<double>(k - 1) : 0.5;
    q << "      <symbol name=\"" << i << "\" type=\"fill\" alpha=\"1\" clip_to_extent=\"1\" force_rhr=\"0\">\n"
      << "        <layer class=\"SimpleFill\" enabled=\"1\" locked=\"0\" pass=\"0\">\n"
      << "          <Option type=\"Map\">\n"
      << "            <Option name=\"color\" type=\"QString\" value=\"" << rgba(colour_at(style.palette, t)) << "\"/>\n"
      << "            <Option name=\"style\" type=\"QString\" value=\"solid\"/>\n"
      << "            <Option name=\"outline_color\" type=\"QString\" value=\"35,35,35,255\"/>\n"
      << "            <Option name=\"outline_style\" type=\"QString\" value=\"solid\"/>\n"
      << "            <Option name=\"outline_width\" type=\"QString\" value=\"0.26\"/>\n"
      << "            <Option name=\"outline_width_unit\" type=\"QString\" value=\"MM\"/>\n"
      << "          </Option>\n        </layer>\n      </symbol>\n";
  }
  const std::vector<Rgb> s = stops(style.palette);
  std::string inner;
  for (size_t i = 1; i + 1 < s.size(); ++i)
    inner += (inner.empty() ? "" : ":") + number(static_cast<double>(i) / static_cast<double>(s.size() - 1), 4) + ";" +
             rgba(s[i]);
  q << "    </symbols>\n    <colorramp name=\"[source]\" type=\"gradient\">\n      <Option type=\"Map\">\n"
    << "        <Option name=\"color1\" type=\"QString\" value=\"" << rgba(s.front()) << "\"/>\n"
    << "        <Option name=\"color2\" type=\"QString\" value=\"" << rgba(s.back()) << "\"/>\n"
    << "        <Option name=\"stops\" type=\"QString\" value=\"" << inner << "\"/>\n"
    << "        <Option name=\"discrete\" type=\"QString\" value=\"0\"/>\n"
    << "        <Option name=\"rampType\" type=\"QString\" value=\"gradient\"/>\n"
    << "      </Option>\n    </colorramp>\n"
    << "    <classificationMethod id=\"Quantile\">\n"
    << "      <labelFormat format=\"%1 - %2" << escape(unit) << "\" labelprecision=\"" << style.decimals
    << "\" trimtrailingzeroes=\"1\"/>\n    </classificationMethod>\n"
    << "  </renderer-v2>\n  <layerGeometryType>2</layerGeometryType>\n</qgis>\n";
  return q.str();
}

}  // namespace vbagg::io
