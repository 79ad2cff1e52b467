#include "report.hpp"

#include <cairo.h>
#include <cpl_vsi.h>
#include <gdal_utils.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <sstream>

#include "core/metrics.hpp"
#include "core/predict.hpp"
#include "io/atomic_file.hpp"
#include "io/gdal_handles.hpp"
#include "settings.hpp"

namespace vbagg::cli {

namespace {

std::string base64(const unsigned char* data, size_t n) {
  static const char* table = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < n; i += 3) {
    const unsigned v = (data[i] << 16) | ((i + 1 < n ? data[i + 1] : 0) << 8) | (i + 2 < n ? data[i + 2] : 0);
    out += table[(v >> 18) & 63];
    out += table[(v >> 12) & 63];
    out += i + 1 < n ? table[(v >> 6) & 63] : '=';
    out += i + 2 < n ? table[v & 63] : '=';
  }
  return out;
}

cairo_status_t append_png(void* closure, const unsigned char* data, unsigned int length) {
  static_cast<std::string*>(closure)->append(reinterpret_cast<const char*>(data), length);
  return CAIRO_STATUS_SUCCESS;
}

// A chart canvas with a plotting area and linear axes over [x0, x1] x [y0, y1].
struct Chart {
  static constexpr int W = 520, H = 420, L = 70, R = 20, T = 40, B = 60;
  cairo_surface_t* surface;
  cairo_t* cr;
  double x0, x1, y0, y1;

  Chart(const std::string& title, const std::string& xlabel, const std::string& ylabel, double x0_, double x1_,
        double y0_, double y1_)
      : surface(cairo_image_surface_create(CAIRO_FORMAT_RGB24, W, H)),
        cr(cairo_create(surface)),
        x0(x0_),
        x1(x1_),
        y0(y0_),
        y1(y1_) {
    cairo_set_source_rgb(cr, 1, 1, 1);
    cairo_paint(cr);
    cairo_select_font_face(cr, "sans-serif", CAIRO_FONT_SLANT_NORMAL, CAIRO_FONT_WEIGHT_NORMAL);
    cairo_set_source_rgb(cr, 0, 0, 0);
    cairo_set_font_size(cr, 15);
    text(title, W / 2.0, 24, 0.5);
    cairo_set_font_size(cr, 12);
    text(xlabel, L + (W - L - R) / 2.0, H - 14, 0.5);
    cairo_save(cr);
    cairo_translate(cr, 18, T + (H - T - B) / 2.0);
    cairo_rotate(cr, -M_PI / 2);
    text(ylabel, 0, 0, 0.5);
    cairo_restore(cr);
    cairo_set_line_width(cr, 1);
    cairo_rectangle(cr, L, T, W - L - R, H - T - B);
    cairo_stroke(cr);
  }
  ~Chart() {
    cairo_destroy(cr);
    cairo_surface_destroy(surface);
  }
  double px(double x) const { return L + (x - x0) / (x1 - x0) * (W - L - R); }
  double py(double y) const { return H - B - (y - y0) / (y1 - y0) * (H - T - B); }
  void text(const std::string& s, double x, double y, double anchor) {
    cairo_text_extents_t e;
    cairo_text_extents(cr, s.c_str(), &e);
    cairo_move_to(cr, x - anchor * e.width, y);
    cairo_show_text(cr, s.c_str());
  }
  void xtick(double v, const std::string& label) {
    cairo_move_to(cr, px(v), H - B);
    cairo_line_to(cr, px(v), H - B + 5);
    cairo_stroke(cr);
    text(label, px(v), H - B + 18, 0.5);
  }
  void ytick(double v, const std::string& label) {
    cairo_move_to(cr, L - 5, py(v));
    cairo_line_to(cr, L, py(v));
    cairo_stroke(cr);
    text(label, L - 8, py(v) + 4, 1.0);
  }
  void line(double xa, double ya, double xb, double yb) {
    cairo_move_to(cr, px(xa), py(ya));
    cairo_line_to(cr, px(xb), py(yb));
    cairo_stroke(cr);
  }
  void dot(double x, double y, double r) {
    cairo_arc(cr, px(x), py(y), r, 0, 2 * M_PI);
    cairo_fill(cr);
  }
  std::string png_base64() {
    std::string bytes;
    cairo_surface_write_to_png_stream(surface, append_png, &bytes);
    return base64(reinterpret_cast<const unsigned char*>(bytes.data()), bytes.size());
  }
};

std::string fmt(double v, int precision = 3) {
  std::ostringstream s;
  s.precision(precision);
  s << v;
  return s.str();
}

std::string calibration_plot(const Metrics& r) {
  Chart c("Calibration of central intervals", "nominal level", "fraction covered", 0.4, 1.0, 0.0, 1.0);
  for (double v = 0.4; v <= 1.001; v += 0.1) c.xtick(v, fmt(v, 2));
  for (double v = 0; v <= 1.001; v += 0.2) c.ytick(v, fmt(v, 2));
  // Where a calibrated model's coverage of these units and pixels would fall in 90 % of its
  // draws: shaded in each series' colour.
  auto shade = [&](const Matrix& draws, double red, double green, double blue, const std::string& name, double ly) {
    const CoverageBand band = coverage_band(draws, r.levels);
    if (band.low.empty()) return;
    cairo_set_source_rgba(c.cr, red, green, blue, 0.15);
    cairo_move_to(c.cr, c.px(r.levels.front()), c.py(band.low.front()));
    for (size_t l = 1; l < r.levels.size(); ++l) cairo_line_to(c.cr, c.px(r.levels[l]), c.py(band.low[l]));
    for (size_t l = r.levels.size(); l-- > 0;) cairo_line_to(c.cr, c.px(r.levels[l]), c.py(band.high[l]));
    cairo_close_path(c.cr);
    cairo_fill(c.cr);
    cairo_set_source_rgb(c.cr, red, green, blue);
    c.text("shaded: a calibrated model's " + name + " (90 %)", c.px(0.6), c.py(ly), 0);
  };
  shade(r.count_draw_coverage, 0.12, 0.47, 0.71, "units", 0.17);
  if (!r.pixel_coverage.empty()) shade(r.pixel_draw_coverage, 0.85, 0.37, 0.01, "pixels", 0.1);
  cairo_set_source_rgb(c.cr, 0.6, 0.6, 0.6);
  c.line(0.4, 0.4, 1.0, 1.0);
  auto series = [&](const std::vector<double>& cov, double red, double green, double blue, const std::string& name,
                    double ly) {
    cairo_set_source_rgb(c.cr, red, green, blue);
    cairo_set_line_width(c.cr, 2);
    for (size_t l = 0; l + 1 < cov.size(); ++l) c.line(r.levels[l], cov[l], r.levels[l + 1], cov[l + 1]);
    for (size_t l = 0; l < cov.size(); ++l) c.dot(r.levels[l], cov[l], 4);
    c.text(name, c.px(0.43), c.py(ly), 0);
  };
  series(r.count_coverage, 0.12, 0.47, 0.71, "observed unit counts", 0.92);
  if (!r.pixel_coverage.empty()) series(r.pixel_coverage, 0.85, 0.37, 0.01, "true pixel intensity", 0.85);
  return c.png_base64();
}

// Randomised PIT of the unit counts: flat at 1 when the predictive distributions are calibrated,
// U-shaped when they are too narrow, hump-shaped when too wide.
std::string pit_plot(const Metrics& r) {
  const double bins = static_cast<double>(r.count_pit.size());
  double top = 2.0;
  for (double f : r.count_pit) top = std::max(top, std::ceil(f * bins + 0.5));
  Chart c("PIT of the observed unit counts", "PIT value", "density (1 = calibrated)", 0.0, 1.0, 0.0, top);
  for (double v = 0; v <= 1.001; v += 0.2) c.xtick(v, fmt(v, 2));
  for (double v = 0; v <= top + 1e-9; v += top > 4 ? 1.0 : 0.5) c.ytick(v, fmt(v, 2));
  cairo_set_source_rgb(c.cr, 0.12, 0.47, 0.71);
  for (size_t b = 0; b < r.count_pit.size(); ++b) {
    const double x0 = static_cast<double>(b) / bins, x1 = static_cast<double>(b + 1) / bins;
    const double hgt = r.count_pit[b] * bins;
    cairo_rectangle(c.cr, c.px(x0) + 1, c.py(hgt), c.px(x1) - c.px(x0) - 2, c.py(0) - c.py(hgt));
    cairo_fill(c.cr);
  }
  cairo_set_source_rgb(c.cr, 0.6, 0.6, 0.6);
  cairo_set_line_width(c.cr, 2);
  c.line(0, 1, 1, 1);
  return c.png_base64();
}

std::string observed_vs_predicted_plot(const Metrics& r) {
  double lo = 1e300, hi = 0;
  for (size_t i = 0; i < r.observed.size(); ++i)
    for (double v : {r.observed[i], r.predicted[i]})
      if (v > 0) {
        lo = std::min(lo, v);
        hi = std::max(hi, v);
      }
  if (!(hi > 0)) lo = 1, hi = 10;
  const double a = std::floor(std::log10(lo)), b = std::max(a + 1, std::ceil(std::log10(hi)));
  Chart c("Unit totals (" + r.split + ")", "observed count (log scale)", "predicted total (log scale)", a, b, a, b);
  for (double e = a; e <= b; ++e) {
    c.xtick(e, "1e" + fmt(e));
    c.ytick(e, "1e" + fmt(e));
  }
  cairo_set_source_rgb(c.cr, 0.6, 0.6, 0.6);
  c.line(a, a, b, b);
  cairo_set_source_rgba(c.cr, 0.12, 0.47, 0.71, 0.8);
  for (size_t i = 0; i < r.observed.size(); ++i)
    if (r.observed[i] > 0 && r.predicted[i] > 0) c.dot(std::log10(r.observed[i]), std::log10(r.predicted[i]), 3.5);
  return c.png_base64();
}

// A space-time unit's counts over the periods: observed dots, the predicted total as a line and
// its central 95 % predictive interval as a band.
struct SeasonalCurve {
  std::string unit;
  std::vector<std::string> periods;
  std::vector<double> observed, predicted, lower, upper;
};

// The curve of `unit` (an id without its period), or of the unit with the most cases when empty;
// an empty curve when the data have no time axis. Throws DataError for a unit the data lack.
SeasonalCurve seasonal_curve(const LoadedModel& m, const io::BuiltData& built, const std::string& unit, int samples,
                             int threads) {
  SeasonalCurve c;
  if (built.time.empty()) return c;
  const Dataset& d = built.dataset;
  auto base = [](const std::string& id) { return id.substr(0, id.rfind('@')); };
  c.unit = unit;
  if (c.unit.empty()) {
    std::map<std::string, double> total;
    for (Index a = 0; a < d.num_bags(); ++a)
      if (d.observed(a)) total[base(d.bag_ids[static_cast<size_t>(a)])] += d.response[a];
    double most = -1;
    for (const auto& [id, t] : total)
      if (t > most) {
        most = t;
        c.unit = id;
      }
  }
  std::vector<Index> bags;
  for (Index a = 0; a < d.num_bags(); ++a)
    if (base(d.bag_ids[static_cast<size_t>(a)]) == c.unit) bags.push_back(a);
  if (bags.empty()) throw DataError("--unit " + c.unit + ": no unit of that id in the data");
  const Vector totals = m.predictor->unit_totals(d, bags, threads);
  m.predictor->unit_draws(d, bags, samples, threads, [&](size_t k, const Vector& draws) {
    const Index a = bags[k];
    c.periods.push_back(built.time[static_cast<size_t>(built.units[static_cast<size_t>(a)].period)].label);
    c.observed.push_back(d.response[a]);
    c.predicted.push_back(totals[static_cast<Index>(k)]);
    c.lower.push_back(empirical_quantile(draws, 0.025));
    c.upper.push_back(empirical_quantile(draws, 0.975));
  });
  return c;
}

std::string seasonal_plot(const SeasonalCurve& c) {
  const double n = static_cast<double>(c.periods.size());
  double top = 0;
  // A period without a count (NaN) has no dot.
  for (size_t k = 0; k < c.periods.size(); ++k)
    top = std::max({top, std::isnan(c.observed[k]) ? 0.0 : c.observed[k], c.upper[k]});
  top = top > 0 ? 1.1 * top : 1.0;
  Chart ch("Unit " + c.unit + " over the periods", "period", "cases", -0.5, n - 0.5, 0.0, top);
  const size_t every = std::max<size_t>(1, c.periods.size() / 6);
  for (size_t k = 0; k < c.periods.size(); k += every) ch.xtick(static_cast<double>(k), c.periods[k]);
  for (int t = 0; t <= 4; ++t) ch.ytick(top * t / 5.0, fmt(top * t / 5.0));
  cairo_set_source_rgba(ch.cr, 0.12, 0.47, 0.71, 0.25);
  for (size_t k = 0; k < c.periods.size(); ++k) {
    const double x = static_cast<double>(k);
    cairo_rectangle(ch.cr, ch.px(x - 0.35), ch.py(c.upper[k]), ch.px(x + 0.35) - ch.px(x - 0.35),
                    ch.py(c.lower[k]) - ch.py(c.upper[k]));
    cairo_fill(ch.cr);
  }
  cairo_set_source_rgb(ch.cr, 0.12, 0.47, 0.71);
  cairo_set_line_width(ch.cr, 2);
  for (size_t k = 0; k + 1 < c.periods.size(); ++k)
    ch.line(static_cast<double>(k), c.predicted[k], static_cast<double>(k + 1), c.predicted[k + 1]);
  cairo_set_source_rgb(ch.cr, 0.85, 0.37, 0.01);
  for (size_t k = 0; k < c.periods.size(); ++k)
    if (!std::isnan(c.observed[k])) ch.dot(static_cast<double>(k), c.observed[k], 4);
  ch.text("dots: observed; line and band: predicted total, 95 %", ch.px(-0.3), ch.py(0.95 * top), 0);
  return ch.png_base64();
}

// A quick-look map: values on a (subsampled) grid, coloured with GDAL's color-relief, as PNG.
std::string map_png(const std::vector<float>& values, int w, int h, const std::string& name) {
  std::vector<float> finite;
  for (float v : values)
    if (std::isfinite(v)) finite.push_back(v);
  if (finite.empty()) return "";
  std::sort(finite.begin(), finite.end());
  const double lo = finite[finite.size() / 50],
               hi = std::max(static_cast<double>(finite[finite.size() * 49 / 50]), lo + 1e-12);
  GDALDriver* mem = GetGDALDriverManager()->GetDriverByName("MEM");
  io::DatasetPtr src(mem->Create("", w, h, 1, GDT_Float32, nullptr));
  std::vector<float> v(values);
  for (auto& x : v)
    if (!std::isfinite(x)) x = -9999;
  src->GetRasterBand(1)->SetNoDataValue(-9999);
  if (src->GetRasterBand(1)->RasterIO(GF_Write, 0, 0, w, h, v.data(), w, h, GDT_Float32, 0, 0) != CE_None) return "";
  // A viridis-like ramp between the 2nd and 98th percentiles; nodata transparent.
  const std::string ramp = "/vsimem/vbagg_ramp_" + name + ".txt";
  std::ostringstream colours;
  const int stops[5][3] = {{68, 1, 84}, {59, 82, 139}, {33, 145, 140}, {94, 201, 98}, {253, 231, 37}};
  for (int k = 0; k < 5; ++k)
    colours << (lo + (hi - lo) * k / 4.0) << " " << stops[k][0] << " " << stops[k][1] << " " << stops[k][2] << "\n";
  colours << "nv 255 255 255 0\n";
  const std::string text = colours.str();
  VSIFCloseL(
      VSIFileFromMemBuffer(ramp.c_str(), reinterpret_cast<GByte*>(const_cast<char*>(text.data())), text.size(), FALSE));
  char* args[] = {const_cast<char*>("-of"), const_cast<char*>("PNG"), const_cast<char*>("-alpha"), nullptr};
  GDALDEMProcessingOptions* opts = GDALDEMProcessingOptionsNew(args, nullptr);
  const std::string png = "/vsimem/vbagg_map_" + name + ".png";
  GDALDatasetH out =
      GDALDEMProcessing(png.c_str(), GDALDataset::ToHandle(src.get()), "color-relief", ramp.c_str(), opts, nullptr);
  GDALDEMProcessingOptionsFree(opts);
  VSIUnlink(ramp.c_str());
  if (!out) return "";
  GDALClose(out);
  vsi_l_offset size = 0;
  GByte* bytes = VSIGetMemFileBuffer(png.c_str(), &size, FALSE);
  const std::string encoded = bytes ? base64(bytes, static_cast<size_t>(size)) : "";
  VSIUnlink(png.c_str());
  return encoded;
}

}  // namespace

void write_report(const std::string& path, const LoadedModel& m, const io::BuiltData& built, const Metrics& r,
                  const std::string& table, int threads, const std::string& unit) {
  const SeasonalCurve curve = seasonal_curve(m, built, unit, settings_of(m.config).predict.samples, threads);
  // Quick-look maps over every unit pixel, subsampled to at most ~600 pixels across.
  const io::Grid& g = built.grid;
  const int stride = std::max(1, (std::max(g.width, g.height) + 599) / 600);
  const int w = (g.width + stride - 1) / stride, h = (g.height + stride - 1) / stride;
  std::vector<Index> pick;
  std::vector<size_t> where;
  // A space-time build's maps show its last period.
  Index first_pixel = 0;
  if (!built.time.empty())
    for (Index a = 0; a < built.dataset.num_bags(); ++a)
      if (built.units[static_cast<size_t>(a)].period + 1 < static_cast<int>(built.time.size()))
        first_pixel = built.dataset.bag_begin(a) + built.dataset.bag_size(a);
  for (size_t i = static_cast<size_t>(first_pixel); i < built.cell.size(); ++i) {
    const int col = static_cast<int>(built.cell[i] % g.width), row = static_cast<int>(built.cell[i] / g.width);
    if (col % stride || row % stride) continue;
    pick.push_back(static_cast<Index>(i));
    where.push_back(static_cast<size_t>(row / stride) * w + static_cast<size_t>(col / stride));
  }
  PredictOptions po;
  po.threads = threads;
  const Prediction p = predict_dataset_pixels(m, built, pick, po);
  std::vector<float> mean(static_cast<size_t>(w) * h, NAN), sd = mean;
  for (size_t j = 0; j < pick.size(); ++j) {
    mean[where[j]] = static_cast<float>(p.mean[static_cast<Index>(j)]);
    sd[where[j]] = static_cast<float>(p.sd[static_cast<Index>(j)]);
  }
  const std::string mean_png = map_png(mean, w, h, "mean");
  const std::string sd_png = m.predictor->has_posterior() ? map_png(sd, w, h, "sd") : "";

  std::ostringstream html;
  html << "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>vbagg evaluation</title>\n"
       << "<style>body{font-family:sans-serif;max-width:1100px;margin:2em auto;color:#222}"
       << "pre{background:#f4f4f4;padding:1em}figure{display:inline-block;margin:0 1em 1em 0}"
       << "img{border:1px solid #ccc;image-rendering:pixelated}</style></head><body>\n"
       << "<h1>vbagg evaluation</h1>\n<p>Model: " << to_string(m.file.kind) << "; "
       << to_string(m.file.model.spec.likelihood) << " likelihood, " << to_string(m.file.model.spec.link) << " link, "
       << to_string(m.file.model.spec.expectation) << " expectation, " << m.file.model.num_inducing()
       << " inducing points; " << m.file.training.epochs << " epochs (" << m.file.training.stop_reason << ").</p>\n"
       << "<h2>Metrics</h2>\n<pre>" << table << "</pre>\n<h2>Plots</h2>\n"
       << "<figure><img alt=\"calibration\" src=\"data:image/png;base64," << calibration_plot(r) << "\"></figure>\n"
       << (r.count_pit.empty()
               ? std::string()
               : "<figure><img alt=\"PIT histogram\" src=\"data:image/png;base64," + pit_plot(r) + "\"></figure>\n")
       << "<figure><img alt=\"observed vs predicted\" src=\"data:image/png;base64," << observed_vs_predicted_plot(r)
       << "\"></figure>\n"
       << (curve.periods.empty() ? std::string()
                                 : "<figure><img alt=\"seasonal curve of unit " + curve.unit +
                                       "\" src=\"data:image/png;base64," + seasonal_plot(curve) + "\"></figure>\n")
       << "<h2>Quick-look maps</h2>\n<p>"
       << (built.time.empty() ? "" : "Period " + built.time.periods().back().label + ": every unit pixel")
       << (built.time.empty() ? "Every unit pixel" : "")
       << (stride > 1 ? ", one in " + std::to_string(stride) + " along each axis" : "")
       << "; colours from the 2nd to the 98th percentile (dark: low, yellow: high). Full-resolution maps come from "
          "vbagg-predict.</p>\n";
  if (!mean_png.empty())
    html << "<figure><img alt=\"intensity mean\" width=\"" << std::max(w, 400) << "\" src=\"data:image/png;base64,"
         << mean_png << "\"><figcaption>posterior mean intensity</figcaption></figure>\n";
  if (!sd_png.empty())
    html << "<figure><img alt=\"intensity sd\" width=\"" << std::max(w, 400) << "\" src=\"data:image/png;base64,"
         << sd_png << "\"><figcaption>posterior sd of the intensity</figcaption></figure>\n";
  html << "</body></html>\n";
  io::write_text_atomic(path, html.str());
}

}  // namespace vbagg::cli
