#include "span_maps.hpp"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <sstream>

#include "core/span.hpp"
#include "io/atomic_file.hpp"
#include "io/map_style.hpp"
#include "processes.hpp"

namespace vbagg::cli {

namespace {

std::string level_text(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

}  // namespace

std::vector<Span> parse_spans(const std::vector<std::string>& texts, const io::TimeAxis& time) {
  std::vector<Span> spans;
  for (const std::string& text : texts) {
    const io::TimeAxis axis = io::parse_time_axis(text, "--span " + text);
    if (axis.empty()) throw ConfigError("--span is empty: give periods such as 2019-01..2019-12");
    Span s{text, "", {}};
    for (const io::Period& p : axis.periods()) {
      const long k = time.index_of(p.label);
      if (k < 0)
        throw ConfigError("--span " + text + ": " + p.label + " is not among the periods of data.time (" +
                          time.labels().front() + " to " + time.labels().back() + ")");
      s.periods.push_back(static_cast<size_t>(k));
    }
    s.label = axis.size() == 1 ? axis[0].label : axis.periods().front().label + "_" + axis.periods().back().label;
    spans.push_back(s);
  }
  return spans;
}

std::vector<std::string> span_files(const std::vector<Span>& spans, const std::vector<double>& quantiles) {
  std::vector<std::string> files;
  for (const Span& s : spans) {
    files.push_back("intensity_mean_" + s.label + ".tif");
    files.push_back("intensity_sd_" + s.label + ".tif");
    for (double q : quantiles) files.push_back("intensity_q" + level_text(q) + "_" + s.label + ".tif");
  }
  return files;
}

void write_span_maps(const LoadedModel& m, std::vector<PixelSources>& sources, const std::vector<Span>& spans,
                     const SpanMapOptions& o, const std::string& out) {
  if (spans.empty()) return;
  if (m.file.kind == ModelKind::constant)
    throw ConfigError("--span averages a latent GP over periods; the constant model has none");
  const Model model = m.file.model.spec.num_tasks() == 1 ? m.file.model : m.file.model.for_task(0);
  const io::Grid& grid = sources.front().grid;
  const io::CoordinateMapper coords(grid);
  const bool leader = leading_process();
  std::vector<std::vector<double>> values(sources.front().covariates.size());
  for (const Span& span : spans) {
    const std::vector<std::string> files = span_files({span}, o.quantiles);
    std::vector<std::unique_ptr<io::RasterWriter>> writers;
    if (leader) {
      const std::string over = " over " + span.text;
      std::vector<std::string> what = {"posterior mean of the mean intensity" + over,
                                       "posterior standard deviation of the mean intensity" + over};
      for (double q : o.quantiles)
        what.push_back("posterior " + level_text(q) + " quantile of the mean intensity" + over);
      for (size_t k = 0; k < files.size(); ++k)
        writers.push_back(std::make_unique<io::RasterWriter>(out + "/" + files[k], grid, what[k], o.unit, o.format));
    }
    const Index P = static_cast<Index>(span.periods.size());
    const long long strips = (grid.height + o.strip_rows - 1) / o.strip_rows;
    auto rows_of = [&](long long k) {
      return std::min(o.strip_rows, grid.height - static_cast<int>(k) * o.strip_rows);
    };
    std::vector<Strip> strips_of(span.periods.size());
    share_jobs(
        strips, files.size(),
        [&](long long k) { return static_cast<size_t>(rows_of(k)) * static_cast<size_t>(grid.width); },
        [&](long long k, std::vector<std::vector<float>>& maps) {
          const int row0 = static_cast<int>(k) * o.strip_rows, rows = rows_of(k);
          const size_t n = static_cast<size_t>(rows) * static_cast<size_t>(grid.width);
          // The pixels with data in every period of the span, their inputs period after period.
          std::vector<int> seen(n, 0);
          for (size_t j = 0; j < span.periods.size(); ++j) {
            read_strip(sources[span.periods[j]], m, coords, row0, rows, values, strips_of[j]);
            for (Index i : strips_of[j].valid) ++seen[static_cast<size_t>(i)];
          }
          std::vector<Index> keep;
          for (size_t i = 0; i < n; ++i)
            if (seen[i] == P) keep.push_back(static_cast<Index>(i));
          Matrix X(model.inducing.rows(), static_cast<Index>(keep.size()) * P);
          std::vector<std::int64_t> keys;
          for (size_t j = 0; j < span.periods.size(); ++j) {
            const Strip& s = strips_of[j];
            size_t at = 0;
            for (size_t c = 0; c < s.valid.size(); ++c) {
              if (at < keep.size() && s.valid[c] == keep[at]) {
                X.col(static_cast<Index>(at) * P + static_cast<Index>(j)) = s.inputs.col(static_cast<Index>(c));
                ++at;
              }
            }
          }
          for (Index i : keep) keys.push_back(static_cast<std::int64_t>(row0) * grid.width + i);
          const SpanPrediction p = predict_span_means(model, X, P, keys, o.quantiles, o.samples, o.seed, o.threads);
          for (auto& v : maps) v.assign(n, NAN);
          for (size_t j = 0; j < keep.size(); ++j) {
            const auto i = static_cast<size_t>(keep[j]);
            const auto r = static_cast<Index>(j);
            maps[0][i] = static_cast<float>(o.rate_per * p.mean[r]);
            maps[1][i] = static_cast<float>(o.rate_per * p.sd[r]);
            for (size_t q = 0; q < o.quantiles.size(); ++q)
              maps[2 + q][i] = static_cast<float>(o.rate_per * p.quantiles(r, static_cast<Index>(q)));
          }
        },
        [&](long long k, const std::vector<std::vector<float>>& maps) {
          for (size_t f = 0; f < writers.size(); ++f)
            writers[f]->write_rows(static_cast<int>(k) * o.strip_rows, rows_of(k), maps[f]);
        });
    if (!leader) continue;
    for (auto& w : writers) w->finish();
    if (o.styles) {
      // The mean and its quantiles share a ramp; the sd has its own.
      std::vector<float> pooled, sd = writers[1]->value_sample();
      for (size_t f = 0; f < writers.size(); ++f)
        if (f != 1) pooled.insert(pooled.end(), writers[f]->value_sample().begin(), writers[f]->value_sample().end());
      io::RasterStyle level = io::ramp_limits(pooled), spread = io::ramp_limits(sd);
      level.suffix = spread.suffix = " " + o.unit;
      spread.palette = io::Palette::yellow_orange_red;
      for (size_t f = 0; f < files.size(); ++f)
        io::write_text_atomic(out + "/" + files[f].substr(0, files[f].size() - 4) + ".qml",
                              io::raster_style_qml(f == 1 ? spread : level));
    }
    spdlog::info("wrote the mean intensity over {} ({} periods): {} maps", span.text, P, files.size());
  }
}

}  // namespace vbagg::cli
