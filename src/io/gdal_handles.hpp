// RAII ownership of GDAL/OGR objects and GDAL's error text.
#pragma once

#include <gdal_priv.h>
#include <ogr_geometry.h>
#include <ogrsf_frmts.h>

#include <memory>
#include <string>

namespace vbagg::io {

struct DatasetCloser {
  void operator()(GDALDataset* d) const { GDALClose(GDALDataset::ToHandle(d)); }
};
using DatasetPtr = std::unique_ptr<GDALDataset, DatasetCloser>;

struct GeometryDeleter {
  void operator()(OGRGeometry* g) const { OGRGeometryFactory::destroyGeometry(g); }
};
using GeometryPtr = std::unique_ptr<OGRGeometry, GeometryDeleter>;

// Registers the drivers once; safe to call repeatedly.
void ensure_gdal_registered();

// GDAL's last error message, or a fallback when there is none.
std::string gdal_error(const std::string& fallback = "unknown GDAL error");

// Opens a raster read-only; throws DataError naming the path and GDAL's reason.
DatasetPtr open_raster(const std::string& path);

// Opens a vector source read-only; throws DataError naming the path and GDAL's reason.
DatasetPtr open_vector(const std::string& path);

}  // namespace vbagg::io
