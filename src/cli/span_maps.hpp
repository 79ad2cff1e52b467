// Maps of a space-time model's intensity averaged over spans of periods (vbagg-predict --span, the
// annual mean of monthly intensities): per span its mean, sd and quantile maps, from joint draws of
// f over the span's periods at each pixel (core/span.hpp).
#pragma once

#include <string>
#include <vector>

#include "io/raster_writer.hpp"
#include "pixel_strips.hpp"

namespace vbagg::cli {

struct Span {
  std::string text;             // as given, e.g. 2019-01..2019-12
  std::string label;            // in file names: 2019-01_2019-12, or the period of a one-period span
  std::vector<size_t> periods;  // indices into the prediction's data.time
};

// Spans in data.time's form (a range, a period or a list); throws ConfigError naming one whose
// periods data.time does not list.
std::vector<Span> parse_spans(const std::vector<std::string>& texts, const io::TimeAxis& time);

// The map files of the spans: intensity_mean_<label>.tif, intensity_sd_<label>.tif and
// intensity_q<level>_<label>.tif.
std::vector<std::string> span_files(const std::vector<Span>& spans, const std::vector<double>& quantiles);

struct SpanMapOptions {
  std::vector<double> quantiles;
  int samples = 500;
  unsigned long long seed = 1;
  int strip_rows = 256;
  int threads = 1;
  double rate_per = 1;  // scales the maps as the intensity maps are
  std::string unit;     // the intensity maps' unit
  bool styles = true;   // a QGIS style beside each map
  io::RasterFormat format;
};

// Writes the spans' maps to `out`. sources[p] reads period p of the prediction's data.time. A
// pixel's span value needs every period of the span; elsewhere nodata. Throws ConfigError for a
// model without a latent GP (the constant baseline).
void write_span_maps(const LoadedModel& m, std::vector<PixelSources>& sources, const std::vector<Span>& spans,
                     const SpanMapOptions& options, const std::string& out);

}  // namespace vbagg::cli
