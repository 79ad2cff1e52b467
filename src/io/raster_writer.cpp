#include "raster_writer.hpp"

#include <gdal_utils.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "core/types.hpp"

namespace vbagg::io {

namespace {

// Defaults for the intermediate GeoTIFF; a COG is re-encoded by its own driver at the end.
char** creation_options(const RasterFormat& f, bool for_cog_source) {
  char** opts = nullptr;
  opts = CSLSetNameValue(opts, "TILED", "YES");
  opts = CSLSetNameValue(opts, "BLOCKXSIZE", "256");
  opts = CSLSetNameValue(opts, "BLOCKYSIZE", "256");
  opts = CSLSetNameValue(opts, "COMPRESS", for_cog_source ? "ZSTD" : "DEFLATE");
  opts = CSLSetNameValue(opts, "PREDICTOR", "3");
  opts = CSLSetNameValue(opts, "BIGTIFF", "IF_SAFER");
  // DEFLATE runs at about 40 MB/s per core: compressing on every thread keeps writing off the
  // critical path of large predictions.
  opts = CSLSetNameValue(opts, "NUM_THREADS", std::to_string(std::max(1, f.threads)).c_str());
  if (!for_cog_source)
    for (const auto& kv : f.creation_options) {
      const auto eq = kv.find('=');
      opts = CSLSetNameValue(opts, kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str());
    }
  return opts;
}

}  // namespace

void RasterFormat::validate() const {
  ensure_gdal_registered();
  if (driver != "GTiff" && driver != "COG")
    throw ConfigError("--of " + driver + ": unknown output format (allowed: GTiff, COG)");
  GDALDriver* drv = GetGDALDriverManager()->GetDriverByName(driver.c_str());
  if (!drv) throw ConfigError("this GDAL has no " + driver + " driver");
  char** opts = nullptr;
  for (const auto& kv : creation_options) {
    const auto eq = kv.find('=');
    if (eq == std::string::npos || eq == 0)
      throw ConfigError("--co " + kv + ": expected KEY=VALUE, e.g. --co COMPRESS=LZW");
    opts = CSLSetNameValue(opts, kv.substr(0, eq).c_str(), kv.substr(eq + 1).c_str());
  }
  CPLErrorReset();
  const bool ok = opts == nullptr || GDALValidateCreationOptions(GDALDriver::ToHandle(drv), opts);
  CSLDestroy(opts);
  if (!ok) throw ConfigError("invalid --co for " + driver + ": " + gdal_error("option rejected by the driver"));
}

RasterWriter::RasterWriter(const std::string& path, const Grid& grid, const std::string& description,
                           const std::string& unit, const RasterFormat& format,
                           const std::vector<std::string>& band_names)
    : path_(path),
      format_(format),
      grid_(grid),
      out_(std::make_unique<AtomicOutput>(path)),
      stats_(std::max<size_t>(1, band_names.size())) {
  ensure_gdal_registered();
  GDALDriver* gtiff = GetGDALDriverManager()->GetDriverByName("GTiff");
  const bool cog = format.driver == "COG";
  char** opts = creation_options(format, cog);
  CPLErrorReset();
  const int bands = static_cast<int>(stats_.size());
  // Band-interleaved: each band's strips are written whole, in turn.
  if (bands > 1) opts = CSLSetNameValue(opts, "INTERLEAVE", "BAND");
  ds_.reset(gtiff->Create(out_->temp_path().c_str(), grid.width, grid.height, bands, GDT_Float32, opts));
  CSLDestroy(opts);
  if (!ds_) throw DataError("cannot create '" + path + "': " + gdal_error());
  double gt[6];
  for (int k = 0; k < 6; ++k) gt[k] = grid.transform[static_cast<size_t>(k)];
  ds_->SetGeoTransform(gt);
  if (!grid.crs_wkt.empty()) ds_->SetProjection(grid.crs_wkt.c_str());
  for (int b = 1; b <= bands; ++b) {
    GDALRasterBand* band = ds_->GetRasterBand(b);
    band->SetNoDataValue(kOutputNodata);
    band->SetDescription(band_names.empty() ? description.c_str() : band_names[static_cast<size_t>(b - 1)].c_str());
    band->SetUnitType(unit.c_str());
  }
  if (!band_names.empty()) ds_->SetMetadataItem("VBAGG_QUANTITY", description.c_str());
  sample_stride_ = std::max<long long>(1, static_cast<long long>(grid.width) * grid.height / 100000);
}

RasterWriter::~RasterWriter() = default;

void RasterWriter::set_metadata(const std::string& key, const std::string& value) {
  ds_->SetMetadataItem(key.c_str(), value.c_str());
}

void RasterWriter::write_rows(int row0, int rows, const std::vector<float>& values, int band) {
  if (band < 0 || band >= static_cast<int>(stats_.size()))
    throw DataError("'" + path_ + "' has no band " + std::to_string(band + 1));
  BandStatistics& st = stats_[static_cast<size_t>(band)];
  std::vector<float> v(values);
  const long long first = static_cast<long long>(row0) * grid_.width;
  for (size_t i = 0; i < v.size(); ++i) {
    float& x = v[i];
    if (!std::isfinite(x)) {
      x = static_cast<float>(kOutputNodata);
      continue;
    }
    if ((first + static_cast<long long>(i)) % sample_stride_ == 0) sample_.push_back(x);
    st.min = std::min(st.min, static_cast<double>(x));
    st.max = std::max(st.max, static_cast<double>(x));
    st.sum += x;
    st.sum2 += static_cast<double>(x) * x;
    ++st.count;
  }
  if (ds_->GetRasterBand(band + 1)->RasterIO(GF_Write, 0, row0, grid_.width, rows, v.data(), grid_.width, rows,
                                             GDT_Float32, 0, 0) != CE_None)
    throw DataError("cannot write '" + path_ + "': " + gdal_error());
}

void RasterWriter::finish() {
  for (size_t b = 0; b < stats_.size(); ++b) {
    const BandStatistics& st = stats_[b];
    if (st.count == 0) continue;
    GDALRasterBand* band = ds_->GetRasterBand(static_cast<int>(b + 1));
    const double mean = st.sum / static_cast<double>(st.count);
    const double sd = std::sqrt(std::max(0.0, st.sum2 / static_cast<double>(st.count) - mean * mean));
    band->SetStatistics(st.min, st.max, mean, sd);
    band->SetMetadataItem("STATISTICS_VALID_PERCENT", std::to_string(100.0 * static_cast<double>(st.count) /
                                                                     (static_cast<double>(grid_.width) * grid_.height))
                                                          .c_str());
  }
  if (format_.driver != "COG") {
    CPLErrorReset();
    ds_.reset();  // GDAL 3.6's close reports failures only through the error state
    if (CPLGetLastErrorType() >= CE_Failure) throw DataError("cannot finish '" + path_ + "': " + gdal_error());
    out_->commit();
    return;
  }
  // COG: the driver writes tiles, overviews and the header layout from the finished GeoTIFF.
  ds_->FlushCache();
  AtomicOutput cog(path_);
  std::vector<std::string> args = {"-of", "COG", "-co", "COMPRESS=DEFLATE", "-co", "OVERVIEWS=IGNORE_EXISTING"};
  for (const auto& kv : format_.creation_options) args.insert(args.end(), {"-co", kv});
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  GDALTranslateOptions* opts = GDALTranslateOptionsNew(argv.data(), nullptr);
  int usage_error = 0;
  CPLErrorReset();
  GDALDatasetH done = GDALTranslate(cog.temp_path().c_str(), GDALDataset::ToHandle(ds_.get()), opts, &usage_error);
  GDALTranslateOptionsFree(opts);
  if (!done) throw DataError("cannot write COG '" + path_ + "': " + gdal_error());
  GDALClose(done);
  if (CPLGetLastErrorType() >= CE_Failure) throw DataError("cannot write COG '" + path_ + "': " + gdal_error());
  ds_.reset();
  cog.commit();
}

}  // namespace vbagg::io
