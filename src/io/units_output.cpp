#include "units_output.hpp"

#include <cmath>

#include "atomic_file.hpp"
#include "core/types.hpp"
#include "gdal_handles.hpp"
#include "units.hpp"

namespace vbagg::io {

namespace {

// SQL text literal.
std::string quoted(const std::string& s) {
  std::string q = "'";
  for (char c : s) q += c == '\'' ? std::string("''") : std::string(1, c);
  return q + "'";
}

void execute(GDALDataset& ds, const std::string& sql, const std::string& path) {
  CPLErrorReset();
  OGRLayer* result = ds.ExecuteSQL(sql.c_str(), nullptr, nullptr);
  if (result) ds.ReleaseResultSet(result);
  if (CPLGetLastErrorType() >= CE_Failure)
    throw DataError("cannot write the styles of '" + path + "': " + gdal_error());
}

// The table QGIS reads a GeoPackage layer's saved styles from.
void create_styles_table(GDALDataset& ds, const std::string& path) {
  execute(ds,
          "CREATE TABLE layer_styles (id INTEGER PRIMARY KEY AUTOINCREMENT NOT NULL, f_table_catalog TEXT(256), "
          "f_table_schema TEXT(256), f_table_name TEXT(256), f_geometry_column TEXT(256), styleName TEXT(30), "
          "styleQML TEXT, styleSLD TEXT, useAsDefault BOOLEAN, description TEXT, owner TEXT(30), ui TEXT(30), "
          "update_time DATETIME DEFAULT (strftime('%Y-%m-%dT%H:%M:%fZ','now')))",
          path);
  execute(ds,
          "INSERT INTO gpkg_contents (table_name, data_type, identifier, last_change) VALUES ('layer_styles', "
          "'attributes', 'layer_styles', strftime('%Y-%m-%dT%H:%M:%fZ','now'))",
          path);
}

// One layer's rows of it.
void write_styles(GDALDataset& ds, const std::string& layer, const std::string& geometry_column,
                  const std::vector<LayerStyle>& styles, const std::string& path) {
  for (const LayerStyle& s : styles)
    execute(ds,
            "INSERT INTO layer_styles (f_table_catalog, f_table_schema, f_table_name, f_geometry_column, styleName, "
            "styleQML, styleSLD, useAsDefault, description, owner) VALUES ('', '', " +
                quoted(layer) + ", " + quoted(geometry_column) + ", " + quoted(s.name) + ", " + quoted(s.qml) +
                ", '', " + (s.use_as_default ? "1" : "0") + ", " + quoted(s.description) + ", 'vbagg')",
            path);
}

}  // namespace

namespace {

// One source's features with their results into a new layer of ds.
void write_units_layer(GDALDataset& ds, const UnitsLayer& l, const std::string& path, const std::string& lower_field,
                       const std::string& upper_field) {
  DatasetPtr in = open_vector(l.source.path);
  OGRLayer* src = units_layer(*in, l.source);
  const int id_idx = units_field(src->GetLayerDefn(), l.source.id_field, "data.units.id_field", l.source.path);
  OGRLayer* layer = ds.CreateLayer(l.name.c_str(), src->GetSpatialRef(), src->GetGeomType(), nullptr);
  if (!layer) throw DataError("cannot create the layer '" + l.name + "' of '" + path + "': " + gdal_error());
  const std::vector<std::pair<std::string, OGRFieldType>> fields = {
      {"id", OFTString},       {"split", OFTString},     {"observed", OFTReal},
      {"predicted", OFTReal},  {lower_field, OFTReal},   {upper_field, OFTReal},
      {"population", OFTReal}, {"pixels", OFTInteger64}, {"log_residual", OFTReal}};
  for (const auto& [name, type] : fields) {
    OGRFieldDefn f(name.c_str(), type);
    if (layer->CreateField(&f) != OGRERR_NONE) throw DataError("cannot create field " + name + " in '" + path + "'");
  }
  ds.StartTransaction();
  src->ResetReading();
  for (auto& f : *src) {
    OGRFeature g(layer->GetLayerDefn());
    const std::string id = f->IsFieldSetAndNotNull(id_idx) ? f->GetFieldAsString(id_idx) : "";
    g.SetField(0, id.c_str());
    const auto it = l.results.find(id);
    if (it == l.results.end()) {
      g.SetField(1, "unused");
      for (int k = 2; k < static_cast<int>(fields.size()); ++k) g.SetFieldNull(k);
    } else {
      const UnitResult& r = it->second;
      g.SetField(1, r.split.c_str());
      if (std::isnan(r.observed))
        g.SetFieldNull(2);
      else
        g.SetField(2, r.observed);
      g.SetField(3, r.predicted);
      g.SetField(4, r.lower);
      g.SetField(5, r.upper);
      g.SetField(6, r.population);
      g.SetField(7, static_cast<GIntBig>(r.pixels));
      if (r.observed > 0 && r.predicted > 0)
        g.SetField(8, std::log(r.observed) - std::log(r.predicted));
      else
        g.SetFieldNull(8);
    }
    if (const OGRGeometry* geom = f->GetGeometryRef()) g.SetGeometry(geom);
    if (layer->CreateFeature(&g) != OGRERR_NONE) throw DataError("cannot write '" + path + "': " + gdal_error());
  }
  ds.CommitTransaction();
}

}  // namespace

void write_units_geopackage(const std::string& path, const std::string& lower_field, const std::string& upper_field,
                            const std::vector<UnitsLayer>& layers) {
  AtomicOutput out(path);
  GDALDriver* gpkg = GetGDALDriverManager()->GetDriverByName("GPKG");
  CPLErrorReset();
  DatasetPtr ds(gpkg->Create(out.temp_path().c_str(), 0, 0, 0, GDT_Unknown, nullptr));
  if (!ds) throw DataError("cannot create '" + path + "': " + gdal_error());
  bool styled = false;
  for (const UnitsLayer& l : layers) {
    write_units_layer(*ds, l, path, lower_field, upper_field);
    if (l.styles.empty()) continue;
    if (!styled) create_styles_table(*ds, path);
    styled = true;
    write_styles(*ds, l.name, ds->GetLayerByName(l.name.c_str())->GetGeometryColumn(), l.styles, path);
  }
  CPLErrorReset();
  ds.reset();
  if (CPLGetLastErrorType() >= CE_Failure) throw DataError("cannot finish '" + path + "': " + gdal_error());
  out.commit();
}

}  // namespace vbagg::io
