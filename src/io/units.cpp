#include "units.hpp"

#include <geos_c.h>
#include <ogr_spatialref.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>

#include "core/types.hpp"
#include "response_table.hpp"

namespace vbagg::io {

OGRLayer* units_layer(GDALDataset& ds, const UnitsSpec& spec) {
  if (!spec.layer.empty()) {
    OGRLayer* l = ds.GetLayerByName(spec.layer.c_str());
    if (l) return l;
  } else if (ds.GetLayerCount() == 1) {
    return ds.GetLayer(0);
  }
  std::string names;
  for (int i = 0; i < ds.GetLayerCount(); ++i) names += (i ? ", " : "") + std::string(ds.GetLayer(i)->GetName());
  if (ds.GetLayerCount() == 0) throw DataError("units source '" + spec.path + "' has no layers");
  if (spec.layer.empty())
    throw ConfigError("units source '" + spec.path + "' has several layers; set data.units.layer (one of: " + names +
                      ")");
  throw ConfigError("units source '" + spec.path + "' has no layer '" + spec.layer + "' (layers: " + names + ")");
}

int units_field(OGRFeatureDefn* defn, const std::string& name, const std::string& key, const std::string& path) {
  if (name.empty()) throw ConfigError(key + " is not set (the field of '" + path + "' to use)");
  const int i = defn->GetFieldIndex(name.c_str());
  if (i >= 0) return i;
  std::string fields;
  for (int k = 0; k < defn->GetFieldCount(); ++k)
    fields += (k ? ", " : "") + std::string(defn->GetFieldDefn(k)->GetNameRef());
  throw ConfigError(key + ": '" + path + "' has no field '" + name + "' (fields: " + fields + ")");
}

namespace {

// Null, or blank text (a CSV's empty cell): no response given.
bool response_missing(OGRFeature& f, int idx) {
  if (!f.IsFieldSetAndNotNull(idx)) return true;
  const OGRFieldType type = f.GetFieldDefnRef(idx)->GetType();
  if (type == OFTInteger || type == OFTInteger64 || type == OFTReal) return false;
  const std::string text = f.GetFieldAsString(idx);
  return text.find_first_not_of(" \t") == std::string::npos;
}

// Parses a response stored as integer, real or numeric text. Returns false when it is not a number.
bool parse_response(OGRFeature& f, int idx, double& out) {
  const OGRFieldType type = f.GetFieldDefnRef(idx)->GetType();
  if (type == OFTInteger || type == OFTInteger64 || type == OFTReal) {
    out = f.GetFieldAsDouble(idx);
    return std::isfinite(out);
  }
  const std::string text = f.GetFieldAsString(idx);
  const char* begin = text.c_str();
  while (*begin == ' ') ++begin;
  char* end = nullptr;
  errno = 0;
  out = std::strtod(begin, &end);
  while (end && *end == ' ') ++end;
  return end != begin && end && *end == '\0' && errno == 0 && std::isfinite(out);
}

// Polygons of a geometry collection (what MakeValid may return), as one multipolygon.
GeometryPtr polygonal_part(const OGRGeometry& g) {
  const auto type = wkbFlatten(g.getGeometryType());
  if (type == wkbPolygon || type == wkbMultiPolygon) return GeometryPtr(g.clone());
  if (type != wkbGeometryCollection) return nullptr;
  auto multi = std::make_unique<OGRMultiPolygon>();
  for (const OGRGeometry* part : *g.toGeometryCollection()) {
    const auto pt = wkbFlatten(part->getGeometryType());
    if (pt == wkbPolygon) multi->addGeometry(part);
    if (pt == wkbMultiPolygon)
      for (const OGRPolygon* p : *part->toMultiPolygon()) multi->addGeometry(p);
  }
  if (multi->IsEmpty()) return nullptr;
  return GeometryPtr(multi.release());
}

// GEOS's explanation of why a geometry is invalid (e.g. "Self-intersection[1 1]").
std::string invalid_reason(const OGRGeometry& g) {
  GEOSContextHandle_t ctx = OGRGeometry::createGEOSContext();
  GEOSGeom geos = g.exportToGEOS(ctx);
  std::string reason = "invalid";
  if (geos) {
    if (char* r = GEOSisValidReason_r(ctx, geos)) {
      reason = r;
      GEOSFree_r(ctx, r);
    }
    GEOSGeom_destroy_r(ctx, geos);
  }
  OGRGeometry::freeGEOSContext(ctx);
  return reason;
}

}  // namespace

namespace {

// A survey point's bag in the grid's CRS: the pixel it falls in (radius 0) or a disc of the radius.
// Null when the point lies outside the grid.
GeometryPtr point_bag(const OGRPoint& p, const Grid& grid, double radius) {
  if (radius > 0) return GeometryPtr(p.Buffer(radius, 16));
  const double col = std::floor((p.getX() - grid.transform[0]) / grid.transform[1]);
  const double row = std::floor((p.getY() - grid.transform[3]) / grid.transform[5]);
  if (col < 0 || row < 0 || col >= grid.width || row >= grid.height) return nullptr;
  const double x0 = grid.transform[0] + col * grid.transform[1], y0 = grid.transform[3] + row * grid.transform[5];
  const double x1 = x0 + grid.transform[1], y1 = y0 + grid.transform[5];
  OGRLinearRing ring;
  ring.addPoint(x0, y0);
  ring.addPoint(x1, y0);
  ring.addPoint(x1, y1);
  ring.addPoint(x0, y1);
  ring.closeRings();
  auto poly = std::make_unique<OGRPolygon>();
  poly->addRing(&ring);
  return GeometryPtr(poly.release());
}

}  // namespace

UnitsRead read_units(const UnitsSpec& spec, const Grid& grid) {
  const std::string& grid_crs_wkt = grid.crs_wkt;
  DatasetPtr ds = open_vector(spec.path);
  OGRLayer* layer = units_layer(*ds, spec);
  OGRFeatureDefn* defn = layer->GetLayerDefn();
  const int id_idx = units_field(defn, spec.id_field, "data.units.id_field", spec.path);
  // The observations come from the units' own fields, or from a long table's rows of the period.
  std::unique_ptr<PeriodRows> table;
  if (!spec.response_table.empty()) table = std::make_unique<PeriodRows>(spec);
  const int y_idx =
      table ? table->response_index() : units_field(defn, spec.response_field, "data.units.response_field", spec.path);
  const int n_idx = table ? table->trials_index()
                    : spec.trials_field.empty()
                        ? -1
                        : units_field(defn, spec.trials_field, "data.units.trials_field", spec.path);

  UnitsRead out;
  std::unique_ptr<OGRCoordinateTransformation> ct;
  const OGRSpatialReference* src_srs = layer->GetSpatialRef();
  if (!grid_crs_wkt.empty()) {
    OGRSpatialReference grid;
    grid.importFromWkt(grid_crs_wkt.c_str());
    grid.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
    if (!src_srs) {
      out.notes.push_back("units '" + spec.path + "' have no CRS (no .prj?); assuming the reference grid's CRS");
    } else {
      OGRSpatialReference src(*src_srs);
      src.SetAxisMappingStrategy(OAMS_TRADITIONAL_GIS_ORDER);
      const char* opts[] = {"IGNORE_DATA_AXIS_TO_SRS_AXIS_MAPPING=YES", "CRITERION=EQUIVALENT", nullptr};
      if (!src.IsSame(&grid, opts)) {
        ct.reset(OGRCreateCoordinateTransformation(&src, &grid));
        if (!ct) throw DataError("cannot reproject units '" + spec.path + "' to the grid's CRS: " + gdal_error());
        out.notes.push_back("units '" + spec.path + "' reprojected to the reference grid's CRS");
      }
    }
  }

  std::map<std::string, size_t> first_of_id;
  layer->ResetReading();
  for (auto& f : *layer) {
    Unit u;
    u.id = f->IsFieldSetAndNotNull(id_idx) ? f->GetFieldAsString(id_idx) : "";
    if (u.id.empty()) {
      u.id = "<feature " + std::to_string(f->GetFID()) + ">";
      u.problems.push_back("missing id");
    }
    OGRFeature* row = table ? table->row(u.id) : f.get();
    // A space-time bag is a unit in one period: "<id>@<period>" names it everywhere from here on.
    if (!spec.period.empty()) u.id += "@" + spec.period;
    // A binomial unit without a row has no trials either, and its positives scale with them.
    if (!row && spec.predict_missing && n_idx < 0) {
      u.response = NAN;
    } else if (!row) {
      u.problems.push_back("no row for period " + spec.period + " in the response table");
    } else {
      if (response_missing(*row, y_idx)) {
        if (spec.predict_missing)
          u.response = NAN;
        else
          u.problems.push_back("missing response");
      } else if (!parse_response(*row, y_idx, u.response)) {
        u.problems.push_back("non-numeric response ('" + std::string(row->GetFieldAsString(y_idx)) + "')");
      } else if (u.response < 0) {
        u.problems.push_back("negative response (" + std::string(row->GetFieldAsString(y_idx)) + ")");
      }
      if (n_idx >= 0) {
        if (!row->IsFieldSetAndNotNull(n_idx)) {
          u.problems.push_back("missing trials");
        } else if (!parse_response(*row, n_idx, u.trials)) {
          u.problems.push_back("non-numeric trials ('" + std::string(row->GetFieldAsString(n_idx)) + "')");
        } else if (!(u.trials > 0)) {
          u.problems.push_back("no one tested (trials " + std::string(row->GetFieldAsString(n_idx)) + ")");
        } else if (u.response > u.trials) {
          u.problems.push_back("more positives than trials (" + std::string(row->GetFieldAsString(y_idx)) + " of " +
                               std::string(row->GetFieldAsString(n_idx)) + ")");
        }
      }
    }
    const OGRGeometry* g = f->GetGeometryRef();
    if (!g || g->IsEmpty()) {
      u.problems.push_back("no geometry");
    } else if (wkbFlatten(g->getGeometryType()) == wkbPoint && spec.point_buffer >= 0) {
      GeometryPtr point(g->clone());
      if (ct && point->transform(ct.get()) != OGRERR_NONE) {
        u.problems.push_back("geometry cannot be reprojected to the grid's CRS");
      } else {
        u.geometry = point_bag(*point->toPoint(), grid, spec.point_buffer);
        if (!u.geometry) u.problems.push_back("point outside the grid");
      }
    } else if (const auto t = wkbFlatten(g->getGeometryType()); t != wkbPolygon && t != wkbMultiPolygon) {
      u.problems.push_back(std::string("geometry is a ") + OGRGeometryTypeToName(g->getGeometryType()) +
                           (wkbFlatten(g->getGeometryType()) == wkbPoint
                                ? ", not a polygon; survey points need data.units.point_buffer"
                                : ", not a polygon"));
    } else {
      GeometryPtr geom(g->clone());
      if (!geom->IsValid()) {
        GeometryPtr fixed(geom->MakeValid());
        GeometryPtr poly = fixed ? polygonal_part(*fixed) : nullptr;
        if (poly && poly->IsValid()) {
          out.repaired.push_back({u.id, "invalid geometry repaired with MakeValid (" + invalid_reason(*geom) + ")"});
          geom = std::move(poly);
        } else {
          u.problems.push_back("invalid geometry that MakeValid cannot repair");
          geom.reset();
        }
      }
      if (geom && ct && geom->transform(ct.get()) != OGRERR_NONE) {
        u.problems.push_back("geometry cannot be reprojected to the grid's CRS");
        geom.reset();
      }
      u.geometry = std::move(geom);
    }
    auto [it, fresh] = first_of_id.emplace(u.id, out.units.size());
    if (!fresh) {
      u.problems.push_back("duplicate id");
      auto& first = out.units[it->second].problems;
      if (std::find(first.begin(), first.end(), "duplicate id") == first.end()) first.push_back("duplicate id");
    }
    out.units.push_back(std::move(u));
  }
  if (out.units.empty())
    throw DataError("units layer '" + std::string(layer->GetName()) + "' of '" + spec.path + "' is empty");
  return out;
}

}  // namespace vbagg::io
