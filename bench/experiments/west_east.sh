# Splitting a simulated country's districts in two (sourced by the experiment scripts, not run).
# west_east DATA: DATA/west.gpkg and DATA/east.gpkg from DATA/units.gpkg, and DATA/west_reports.gpkg:
# every district, the east's cases empty (for data.on_missing_response: predict). The grid spans
# 34 to 42 degrees east: a district whose centre lies west of 38 is in the west. Needs ogr2ogr
# (gdal-bin).
west_east() {
  local side op
  for side in west east; do
    op=$([ $side = west ] && echo "<" || echo ">=")
    ogr2ogr -q -f GPKG "$1/$side.gpkg" "$1/units.gpkg" -nln units -dialect SQLite \
      -sql "SELECT * FROM units WHERE ST_X(ST_Centroid(geom)) $op 38.0"
  done
  ogr2ogr -q -f GPKG "$1/west_reports.gpkg" "$1/units.gpkg" -nln units -dialect SQLite \
    -sql "SELECT ID, CASE WHEN ST_X(ST_Centroid(geom)) < 38.0 THEN cases END AS cases, tested, positive, province, geom FROM units"
}
