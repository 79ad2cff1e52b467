#include "assign.hpp"

#include <gdal_alg.h>
#include <gdal_priv.h>
#include <ogr_geometry.h>

#include <algorithm>
#include <cmath>

#include "core/types.hpp"
#include "gdal_handles.hpp"

namespace vbagg::io {

namespace {

struct Window {
  int col0, cols, row0, rows;
};

// Column window of the geometry's envelope inside rows [row0, row0 + rows).
bool column_window(const OGRGeometry& g, const Grid& grid, int row0, int rows, Window& w) {
  OGREnvelope e;
  g.getEnvelope(&e);
  const double px = grid.pixel_width();
  int c0 = static_cast<int>(std::floor((e.MinX - grid.transform[0]) / px)) - 1;
  int c1 = static_cast<int>(std::ceil((e.MaxX - grid.transform[0]) / px)) + 1;
  c0 = std::max(c0, 0);
  c1 = std::min(c1, grid.width);
  if (c1 <= c0 || rows <= 0) return false;
  w = {c0, c1 - c0, row0, rows};
  return true;
}

// Burns `g` into a Byte raster covering the window (1 inside, 0 outside).
std::vector<unsigned char> burn(const OGRGeometry& g, const Grid& grid, const Window& w, bool all_touched) {
  GDALDriver* mem = GetGDALDriverManager()->GetDriverByName("MEM");
  DatasetPtr ds(mem->Create("", w.cols, w.rows, 1, GDT_Byte, nullptr));
  double gt[6] = {grid.transform[0] + w.col0 * grid.transform[1],
                  grid.transform[1],
                  0,
                  grid.transform[3] + w.row0 * grid.transform[5],
                  0,
                  grid.transform[5]};
  ds->SetGeoTransform(gt);
  int band = 1;
  double value = 1;
  OGRGeometryH h = OGRGeometry::ToHandle(const_cast<OGRGeometry*>(&g));
  char** opts = all_touched ? CSLSetNameValue(nullptr, "ALL_TOUCHED", "TRUE") : nullptr;
  const CPLErr err = GDALRasterizeGeometries(GDALDataset::ToHandle(ds.get()), 1, &band, 1, &h, nullptr, nullptr, &value,
                                             opts, nullptr, nullptr);
  CSLDestroy(opts);
  if (err != CE_None) throw DataError("cannot rasterize a unit geometry: " + gdal_error());
  std::vector<unsigned char> out(static_cast<size_t>(w.cols) * static_cast<size_t>(w.rows));
  if (ds->GetRasterBand(1)->RasterIO(GF_Read, 0, 0, w.cols, w.rows, out.data(), w.cols, w.rows, GDT_Byte, 0, 0) !=
      CE_None)
    throw DataError("cannot read a rasterized unit: " + gdal_error());
  return out;
}

GeometryPtr rectangle(double x0, double y0, double x1, double y1) {
  auto ring = std::make_unique<OGRLinearRing>();
  ring->addPoint(x0, y0);
  ring->addPoint(x1, y0);
  ring->addPoint(x1, y1);
  ring->addPoint(x0, y1);
  ring->addPoint(x0, y0);
  auto poly = std::make_unique<OGRPolygon>();
  poly->addRingDirectly(ring.release());
  return GeometryPtr(poly.release());
}

double area_of(const OGRGeometry* g) {
  if (!g || g->IsEmpty()) return 0;
  const auto t = wkbFlatten(g->getGeometryType());
  if (t == wkbPolygon) return g->toPolygon()->get_Area();
  if (t == wkbMultiPolygon) return g->toMultiPolygon()->get_Area();
  if (t == wkbGeometryCollection) return g->toGeometryCollection()->get_Area();
  return 0;
}

}  // namespace

void envelope_rows(const OGRGeometry& g, const Grid& grid, int& first, int& last) {
  OGREnvelope e;
  g.getEnvelope(&e);
  const double py = grid.pixel_height();
  first = std::max(0, static_cast<int>(std::floor((grid.transform[3] - e.MaxY) / py)) - 1);
  last = std::min(grid.height, static_cast<int>(std::ceil((grid.transform[3] - e.MinY) / py)) + 1);
  if (last < first) last = first;
}

double envelope_pixels(const OGRGeometry& g, const Grid& grid) {
  int first, last;
  envelope_rows(g, grid, first, last);
  Window w;
  if (!column_window(g, grid, first, last - first, w)) return 0;
  return static_cast<double>(w.cols) * static_cast<double>(last - first);
}

void assign_pixels(const OGRGeometry& g, const Grid& grid, PixelAssignment mode, int row0, int rows,
                   std::vector<PixelShare>& out) {
  out.clear();
  Window w;
  if (!column_window(g, grid, row0, rows, w)) return;
  const bool touched = mode != PixelAssignment::centre;
  const std::vector<unsigned char> inside = burn(g, grid, w, touched);
  if (mode != PixelAssignment::fraction) {
    for (int r = 0; r < w.rows; ++r)
      for (int c = 0; c < w.cols; ++c)
        if (inside[static_cast<size_t>(r) * w.cols + c]) out.push_back({w.col0 + c, w.row0 + r, 1.0});
    return;
  }
  // Pixels the boundary does not touch are wholly inside or outside; only the boundary's pixels
  // need an exact intersection, against the geometry clipped to this strip to keep GEOS cheap.
  GeometryPtr boundary(g.Boundary());
  const std::vector<unsigned char> edge =
      boundary ? burn(*boundary, grid, w, true) : std::vector<unsigned char>(inside.size(), 1);
  const double px = grid.pixel_width(), py = grid.pixel_height(), pixel_area = px * py;
  const double x_left = grid.transform[0] + w.col0 * px, y_top = grid.transform[3] - w.row0 * py;
  GeometryPtr strip_rect = rectangle(x_left, y_top - w.rows * py, x_left + w.cols * px, y_top);
  GeometryPtr clipped;
  for (int r = 0; r < w.rows; ++r)
    for (int c = 0; c < w.cols; ++c) {
      const size_t k = static_cast<size_t>(r) * w.cols + c;
      if (!inside[k]) continue;
      if (!edge[k]) {
        out.push_back({w.col0 + c, w.row0 + r, 1.0});
        continue;
      }
      if (!clipped) clipped.reset(g.Intersection(strip_rect.get()));
      const double x0 = x_left + c * px, y1 = y_top - r * py;
      GeometryPtr cell = rectangle(x0, y1 - py, x0 + px, y1);
      GeometryPtr piece(clipped ? clipped->Intersection(cell.get()) : nullptr);
      const double share = std::min(1.0, area_of(piece.get()) / pixel_area);
      if (share > 0) out.push_back({w.col0 + c, w.row0 + r, share});
    }
}

}  // namespace vbagg::io
