#include "aligned_layer.hpp"

#include <gdal_utils.h>
#include <ogr_spatialref.h>

#include <cmath>
#include <sstream>

#include "core/types.hpp"

namespace vbagg::io {

namespace {

std::string num(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

// Throws unless the source's extent, in the reference CRS, overlaps the reference extent.
void check_overlap(const Grid& src, const std::string& src_path, const Grid& ref, const std::string& ref_path) {
  auto e = src.extent();
  if (!src.crs_wkt.empty() && !ref.crs_wkt.empty() && !same_crs(src.crs_wkt, ref.crs_wkt)) {
    OGRSpatialReference s, r;
    s.importFromWkt(src.crs_wkt.c_str());
    r.importFromWkt(ref.crs_wkt.c_str());
    s.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
    r.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
    std::unique_ptr<OGRCoordinateTransformation> ct(OGRCreateCoordinateTransformation(&s, &r));
    if (!ct) throw DataError("cannot transform '" + src_path + "' into the CRS of '" + ref_path + "': " + gdal_error());
    double x0, y0, x1, y1;
    if (!ct->TransformBounds(e[0], e[1], e[2], e[3], &x0, &y0, &x1, &y1, 21))
      throw DataError("cannot transform the extent of '" + src_path + "' into the CRS of '" + ref_path + "'");
    e = {x0, y0, x1, y1};
  }
  const auto r = ref.extent();
  if (e[2] <= r[0] || e[0] >= r[2] || e[3] <= r[1] || e[1] >= r[3])
    throw DataError("raster '" + src_path + "' does not overlap the reference grid '" + ref_path +
                    "': they cannot be aligned");
}

}  // namespace

AlignedLayer::AlignedLayer(const std::string& path, const std::string& resampling, const Grid& reference,
                           const std::string& reference_path)
    : path_(path), source_(open_raster(path)) {
  bands_ = source_->GetRasterCount();
  for (int b = 1; b <= bands_; ++b) descriptions_.push_back(source_->GetRasterBand(b)->GetDescription());
  const Grid g = Grid::of(*source_, path);
  if (g.crs_wkt.empty() != reference.crs_wkt.empty())
    throw DataError("raster '" + path + "' " + (g.crs_wkt.empty() ? "has no CRS" : "has a CRS") +
                    " but the reference grid '" + reference_path + "' " +
                    (reference.crs_wkt.empty() ? "has none" : "has one") + "; assign one with gdal_edit.py -a_srs");
  check_overlap(g, path, reference, reference_path);
  if (g.aligned_with(reference)) return;

  warped_ = true;
  const auto e = reference.extent();
  std::vector<std::string> args = {"-of",
                                   "VRT",
                                   "-r",
                                   resampling,
                                   "-ot",
                                   "Float64",
                                   "-dstnodata",
                                   "nan",
                                   "-te",
                                   num(e[0]),
                                   num(e[1]),
                                   num(e[2]),
                                   num(e[3]),
                                   "-ts",
                                   std::to_string(reference.width),
                                   std::to_string(reference.height)};
  if (!reference.crs_wkt.empty()) {
    args.insert(args.end(), {"-t_srs", reference.crs_wkt});
  }
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  GDALWarpAppOptions* opts = GDALWarpAppOptionsNew(argv.data(), nullptr);
  if (!opts) throw DataError("cannot set up warping of '" + path + "': " + gdal_error());
  GDALDatasetH src = GDALDataset::ToHandle(source_.get());
  int usage_error = 0;
  CPLErrorReset();
  GDALDatasetH out = GDALWarp("", nullptr, 1, &src, opts, &usage_error);
  GDALWarpAppOptionsFree(opts);
  if (!out) throw DataError("cannot warp '" + path + "' onto the grid of '" + reference_path + "': " + gdal_error());
  view_.reset(GDALDataset::FromHandle(out));
}

void AlignedLayer::read(int band, int col0, int row0, int cols, int rows, std::vector<double>& out) const {
  GDALDataset& ds = view_ ? *view_ : *source_;
  GDALRasterBand* b = ds.GetRasterBand(band);
  const size_t n = static_cast<size_t>(cols) * static_cast<size_t>(rows);
  out.resize(n);
  CPLErrorReset();
  if (b->RasterIO(GF_Read, col0, row0, cols, rows, out.data(), cols, rows, GDT_Float64, 0, 0) != CE_None)
    throw DataError("cannot read band " + std::to_string(band) + " of '" + path_ + "': " + gdal_error());
  GDALRasterBand* mask = b->GetMaskBand();
  if (!(b->GetMaskFlags() & GMF_ALL_VALID)) {
    std::vector<unsigned char> valid(n);
    if (mask->RasterIO(GF_Read, col0, row0, cols, rows, valid.data(), cols, rows, GDT_Byte, 0, 0) != CE_None)
      throw DataError("cannot read the mask of band " + std::to_string(band) + " of '" + path_ + "': " + gdal_error());
    for (size_t i = 0; i < n; ++i)
      if (!valid[i]) out[i] = NAN;
  }
  for (auto& v : out)
    if (!std::isfinite(v) || std::abs(v) >= 1e38) v = NAN;
}

}  // namespace vbagg::io
