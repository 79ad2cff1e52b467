// Files generated inside the io tests: GeoTIFFs, vector layers, a scratch folder.
#pragma once

#include <gdal_priv.h>
#include <ogr_spatialref.h>
#include <ogrsf_frmts.h>

#include <filesystem>
#include <fstream>
#include <optional>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <variant>
#include <vector>

#include "io/gdal_handles.hpp"

namespace vbagg::test {

// A whole text file ("" when it cannot be read).
inline std::string read_text(const std::string& path) {
  std::ifstream f(path);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// Band `band` of a raster as floats, row after row.
inline std::vector<float> band_values(const std::string& path, int band = 1) {
  io::DatasetPtr ds = io::open_raster(path);
  const int w = ds->GetRasterXSize(), h = ds->GetRasterYSize();
  std::vector<float> v(static_cast<size_t>(w) * static_cast<size_t>(h));
  if (ds->GetRasterBand(band)->RasterIO(GF_Read, 0, 0, w, h, v.data(), w, h, GDT_Float32, 0, 0) != CE_None)
    throw std::runtime_error("cannot read band " + std::to_string(band) + " of " + path);
  return v;
}

// A fresh folder under the system temp dir, removed at the end of the test.
struct TempDir {
  std::filesystem::path path;
  TempDir() {
    static std::mt19937_64 rng(std::random_device{}());
    path = std::filesystem::temp_directory_path() / ("vbagg-test-" + std::to_string(rng()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() { std::filesystem::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

inline std::string wkt_of_epsg(int epsg) {
  OGRSpatialReference srs;
  srs.importFromEPSG(epsg);
  char* wkt = nullptr;
  srs.exportToWkt(&wkt);
  std::string s = wkt;
  CPLFree(wkt);
  return s;
}

struct RasterSpec {
  int width = 10, height = 10;
  double x0 = 0, y0 = 10, dx = 1, dy = 1;  // origin (top-left) and pixel size
  int epsg = 4326;                         // 0: no CRS
  GDALDataType type = GDT_Float32;
  std::optional<double> nodata;
  bool mask_band = false;  // write an explicit per-dataset mask (.msk)
  std::vector<std::string> descriptions;
};

// Writes bands (each row-major width x height) as a GeoTIFF; with mask_band, pixels whose value
// is NaN in `masked` are marked invalid in the mask.
inline void write_raster(const std::string& path, const RasterSpec& s, const std::vector<std::vector<double>>& bands,
                         const std::vector<bool>* masked = nullptr) {
  io::ensure_gdal_registered();
  GDALDriver* drv = GetGDALDriverManager()->GetDriverByName("GTiff");
  io::DatasetPtr ds(drv->Create(path.c_str(), s.width, s.height, static_cast<int>(bands.size()), s.type, nullptr));
  double gt[6] = {s.x0, s.dx, 0, s.y0, 0, -s.dy};
  ds->SetGeoTransform(gt);
  if (s.epsg) {
    OGRSpatialReference srs;
    srs.importFromEPSG(s.epsg);
    ds->SetSpatialRef(&srs);
  }
  for (size_t b = 0; b < bands.size(); ++b) {
    GDALRasterBand* band = ds->GetRasterBand(static_cast<int>(b + 1));
    if (s.nodata) band->SetNoDataValue(*s.nodata);
    if (b < s.descriptions.size()) band->SetDescription(s.descriptions[b].c_str());
    std::vector<double> v = bands[b];
    if (band->RasterIO(GF_Write, 0, 0, s.width, s.height, v.data(), s.width, s.height, GDT_Float64, 0, 0) != CE_None)
      throw std::runtime_error("test raster write failed");
  }
  if (s.mask_band && masked) {
    ds->CreateMaskBand(GMF_PER_DATASET);
    GDALRasterBand* mask = ds->GetRasterBand(1)->GetMaskBand();
    std::vector<unsigned char> m(masked->size());
    for (size_t i = 0; i < m.size(); ++i) m[i] = (*masked)[i] ? 0 : 255;
    if (mask->RasterIO(GF_Write, 0, 0, s.width, s.height, m.data(), s.width, s.height, GDT_Byte, 0, 0) != CE_None)
      throw std::runtime_error("test mask write failed");
  }
}

// A field value: text, real, integer, or null (monostate).
using Value = std::variant<std::monostate, std::string, double, long>;

struct Feature {
  Value id;
  Value response;
  std::string wkt;  // empty: no geometry
  Value trials{};   // written as field "tested" when any feature sets it
};

// Writes a polygon layer named "units" with fields ID (text or integer) and cases (text, real or
// integer), and tested when a feature has trials, through the given OGR driver ("GPKG", "ESRI
// Shapefile", "GeoJSON").
inline void write_units(const std::string& path, const std::string& driver, int epsg,
                        const std::vector<Feature>& features, OGRFieldType id_type = OFTString,
                        OGRFieldType response_type = OFTReal) {
  io::ensure_gdal_registered();
  GDALDriver* drv = GetGDALDriverManager()->GetDriverByName(driver.c_str());
  io::DatasetPtr ds(drv->Create(path.c_str(), 0, 0, 0, GDT_Unknown, nullptr));
  OGRSpatialReference srs;
  if (epsg) {
    srs.importFromEPSG(epsg);
    srs.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
  }
  OGRLayer* layer = ds->CreateLayer("units", epsg ? &srs : nullptr, wkbUnknown, nullptr);
  OGRFieldDefn id("ID", id_type), cases("cases", response_type), tested("tested", response_type);
  layer->CreateField(&id);
  layer->CreateField(&cases);
  bool trials = false;
  for (const auto& f : features) trials |= !std::holds_alternative<std::monostate>(f.trials);
  if (trials) layer->CreateField(&tested);
  for (const auto& f : features) {
    OGRFeature feat(layer->GetLayerDefn());
    auto set = [&](int i, const Value& v) {
      if (std::holds_alternative<std::string>(v)) feat.SetField(i, std::get<std::string>(v).c_str());
      if (std::holds_alternative<double>(v)) feat.SetField(i, std::get<double>(v));
      if (std::holds_alternative<long>(v)) feat.SetField(i, static_cast<GIntBig>(std::get<long>(v)));
      if (std::holds_alternative<std::monostate>(v)) feat.SetFieldNull(i);
    };
    set(0, f.id);
    set(1, f.response);
    if (trials) set(2, f.trials);
    if (!f.wkt.empty()) {
      OGRGeometry* g = nullptr;
      OGRGeometryFactory::createFromWkt(f.wkt.c_str(), epsg ? &srs : nullptr, &g);
      feat.SetGeometryDirectly(g);
    }
    if (layer->CreateFeature(&feat) != OGRERR_NONE) throw std::runtime_error("test feature write failed");
  }
}

inline std::string box(double x0, double y0, double x1, double y1) {
  auto n = [](double v) { return std::to_string(v); };
  return "POLYGON((" + n(x0) + " " + n(y0) + "," + n(x1) + " " + n(y0) + "," + n(x1) + " " + n(y1) + "," + n(x0) + " " +
         n(y1) + "," + n(x0) + " " + n(y0) + "))";
}

// Row-major values f(col, row).
template <class F>
std::vector<double> field(int width, int height, F f) {
  std::vector<double> v(static_cast<size_t>(width) * height);
  for (int r = 0; r < height; ++r)
    for (int c = 0; c < width; ++c) v[static_cast<size_t>(r) * width + c] = f(c, r);
  return v;
}

}  // namespace vbagg::test
