#include "gdal_handles.hpp"

#include <cpl_error.h>

#include <mutex>

#include "core/types.hpp"

namespace vbagg::io {

void ensure_gdal_registered() {
  static std::once_flag once;
  std::call_once(once, [] {
    GDALAllRegister();
    // GDAL would print its own warnings to stderr; vbagg reports problems itself.
    CPLSetErrorHandler(CPLQuietErrorHandler);
    // vbagg reads and writes strip by strip, so a few strips of tiles is all the block cache
    // needs; GDAL's default (5 % of RAM) would grow the footprint with the machine. A
    // GDAL_CACHEMAX set by the user wins.
    if (!CPLGetConfigOption("GDAL_CACHEMAX", nullptr)) GDALSetCacheMax64(512LL << 20);
  });
}

std::string gdal_error(const std::string& fallback) {
  const char* msg = CPLGetLastErrorMsg();
  return (msg && *msg) ? std::string(msg) : fallback;
}

DatasetPtr open_raster(const std::string& path) {
  ensure_gdal_registered();
  CPLErrorReset();
  DatasetPtr ds(GDALDataset::Open(path.c_str(), GDAL_OF_RASTER | GDAL_OF_READONLY));
  if (!ds) throw DataError("cannot open raster '" + path + "': " + gdal_error("not a readable raster"));
  if (ds->GetRasterCount() < 1) throw DataError("raster '" + path + "' has no bands");
  return ds;
}

DatasetPtr open_vector(const std::string& path) {
  ensure_gdal_registered();
  CPLErrorReset();
  DatasetPtr ds(GDALDataset::Open(path.c_str(), GDAL_OF_VECTOR | GDAL_OF_READONLY));
  if (!ds) throw DataError("cannot open vector source '" + path + "': " + gdal_error("not a readable vector file"));
  return ds;
}

}  // namespace vbagg::io
