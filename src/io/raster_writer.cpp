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
                           const std::string& unit, const RasterFormat& format)
    : path_(path), format_(format), grid_(grid), out_(std::make_unique<AtomicOutput>(path)) {
  ensure_gdal_registered();
  GDALDriver* gtiff = GetGDALDriverManager()->GetDriverByName("GTiff");
  const bool cog = format.driver == "COG";
  char** opts = creation_options(format, cog);
  CPLErrorReset();
  ds_.reset(gtiff->Create(out_->temp_path().c_str(), grid.width, grid.height, 1, GDT_Float32, opts));
  CSLDestroy(opts);
  if (!ds_) throw DataError("cannot create '" + path + "': " + gdal_error());
  double gt[6];
  for (int k = 0; k < 6; ++k) gt[k] = grid.transform[static_cast<size_t>(k)];
  ds_->SetGeoTransform(gt);
  if (!grid.crs_wkt.empty()) ds_->SetProjection(grid.crs_wkt.c_str());
  GDALRasterBand* band = ds_->GetRasterBand(1);
  band->SetNoDataValue(kOutputNodata);
  band->SetDescription(description.c_str());
  band->SetUnitType(unit.c_str());
  sample_stride_ = std::max<long long>(1, static_cast<long long>(grid.width) * grid.height / 100000);
}

RasterWriter::~RasterWriter() = default;

void RasterWriter::set_metadata(const std::string& key, const std::string& value) {
  ds_->SetMetadataItem(key.c_str(), value.c_str());
}

void RasterWriter::write_rows(int row0, int rows, const std::vector<float>& values) {
  std::vector<float> v(values);
  const long long first = static_cast<long long>(row0) * grid_.width;
  for (size_t i = 0; i < v.size(); ++i) {
    float& x = v[i];
    if (!std::isfinite(x)) {
      x = static_cast<float>(kOutputNodata);
      continue;
    }
    if ((first + static_cast<long long>(i)) % sample_stride_ == 0) sample_.push_back(x);
    min_ = std::min(min_, static_cast<double>(x));
    max_ = std::max(max_, static_cast<double>(x));
    sum_ += x;
    sum2_ += static_cast<double>(x) * x;
    ++count_;
  }
  if (ds_->GetRasterBand(1)->RasterIO(GF_Write, 0, row0, grid_.width, rows, v.data(), grid_.width, rows, GDT_Float32, 0,
                                      0) != CE_None)
    throw DataError("cannot write '" + path_ + "': " + gdal_error());
}

void RasterWriter::finish() {
  GDALRasterBand* band = ds_->GetRasterBand(1);
  if (count_ > 0) {
    const double mean = sum_ / static_cast<double>(count_);
    const double sd = std::sqrt(std::max(0.0, sum2_ / static_cast<double>(count_) - mean * mean));
    band->SetStatistics(min_, max_, mean, sd);
    band->SetMetadataItem("STATISTICS_VALID_PERCENT", std::to_string(100.0 * static_cast<double>(count_) /
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
