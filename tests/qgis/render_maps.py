#!/usr/bin/python3
"""Render vbagg map outputs through QGIS and check that their default styles apply.

Usage: render_maps.py <maps_dir> <out_dir> [--screenshot <png>]

Each <maps_dir>/*.tif is opened as a QGIS user would open it, so a sidecar
<name>.qml is picked up as the layer's default style.  <maps_dir>/units.gpkg,
if present, gets its default style from its layer_styles table (or a sidecar
units.qml).  Every layer is rendered offscreen into <out_dir>/<name>.png and
must (a) use the expected renderer and (b) produce a coloured image rather
than QGIS's grey fallback.  Exits 1 naming every layer that fails.

Needs python3-qgis (Debian: apt-get install --no-install-recommends python3-qgis)
and must run under the system python3, which is the one PyQGIS is built for.
"""
import argparse
import atexit
import os
import shutil
import sys
import tempfile
from collections import Counter
from pathlib import Path

# Both must be set before Qt starts: there is no display in CI, and Qt warns
# on every run when the runtime dir is missing.
os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
if "XDG_RUNTIME_DIR" not in os.environ:
    os.environ["XDG_RUNTIME_DIR"] = tempfile.mkdtemp(prefix="qgis-runtime-")
    atexit.register(shutil.rmtree, os.environ["XDG_RUNTIME_DIR"], True)

from qgis.core import (QgsApplication, QgsFillSymbol, QgsLayoutExporter,
                       QgsLayoutItemLegend, QgsLayoutItemMap, QgsLayoutPoint,
                       QgsLayoutSize, QgsMapRendererSequentialJob,
                       QgsMapSettings, QgsPrintLayout, QgsProject,
                       QgsRasterLayer, QgsSingleSymbolRenderer, QgsUnitTypes,
                       QgsVectorLayer)
from qgis.PyQt.QtCore import QRectF, QSize
from qgis.PyQt.QtGui import QColor, QImage

SIZE = QSize(400, 300)
CHROMA = 30          # max(r,g,b) - min(r,g,b) above this counts as coloured
MIN_COLOURED = 0.5   # QGIS's unstyled fallback is a grey stretch: ~0 coloured
BUCKET_SHARE = 0.002 # buckets with fewer pixels than this share are noise
# (expected renderer, minimum number of distinct colour buckets)
RASTER_EXPECT = ("singlebandpseudocolor", 8)
UNITS_EXPECT = ("graduatedSymbol", 4)  # one per class, less one in case a class is tiny


def render(layers, extent, crs, size=SIZE):
    settings = QgsMapSettings()
    settings.setLayers(layers)
    settings.setDestinationCrs(crs)
    settings.setOutputSize(size)
    settings.setExtent(extent)
    # Transparent background so nodata pixels stay out of the statistics.
    settings.setBackgroundColor(QColor(0, 0, 0, 0))
    # Antialiased polygon edges blend fill and outline into many extra colours,
    # which would let a single-colour fill pass for a graduated one.
    settings.setFlag(QgsMapSettings.Antialiasing, False)
    job = QgsMapRendererSequentialJob(settings)
    job.start()
    job.waitForFinished()
    for err in job.errors():
        print(f"  render error in {err.layerID}: {err.message}", file=sys.stderr)
    return job.renderedImage()


def colour_stats(image):
    """Opaque pixel count, fraction of them coloured, and distinct colours among those."""
    image = image.convertToFormat(QImage.Format_RGBA8888)  # straight alpha, fixed byte order
    bits = image.constBits()
    bits.setsize(image.sizeInBytes())
    data = bytes(bits)
    opaque = coloured = 0
    buckets = Counter()
    for i in range(0, len(data), 4):
        r, g, b, a = data[i:i + 4]
        if a < 128:
            continue
        opaque += 1
        if max(r, g, b) - min(r, g, b) > CHROMA:
            coloured += 1
            buckets[(r >> 5, g >> 5, b >> 5)] += 1
    distinct = sum(1 for n in buckets.values() if n >= BUCKET_SHARE * max(opaque, 1))
    return opaque, (coloured / opaque if opaque else 0.0), distinct


def check(layer, expect, out_dir):
    """Render one layer, print its line and return True when it passes."""
    name = layer.name()
    if not layer.isValid():
        print(f"{name}: FAIL layer did not load")
        return False
    renderer, min_buckets = expect
    kind = layer.renderer().type() if layer.renderer() else "none"
    image = render([layer], layer.extent(), layer.crs())
    image.save(str(out_dir / f"{name}.png"))
    opaque, coloured, distinct = colour_stats(image)
    problems = []
    if kind != renderer:
        problems.append(f"renderer is {kind}, expected {renderer} (default style not applied)")
    if opaque == 0:
        problems.append("nothing drawn")
    if coloured <= MIN_COLOURED:
        problems.append(f"only {coloured:.0%} of pixels coloured (grey map)")
    if distinct < min_buckets:
        problems.append(f"only {distinct} colours, need {min_buckets}")
    status = "ok" if not problems else "FAIL " + "; ".join(problems)
    print(f"{name}: renderer={kind} opaque_px={opaque} coloured={coloured:.2f} "
          f"colours={distinct} {status}")
    return not problems


def screenshot(raster, units, path):
    """Map of the raster with unit outlines on top, plus the raster's legend."""
    layers = [raster]
    if units is not None:
        outlines = units.clone()
        outlines.setRenderer(QgsSingleSymbolRenderer(QgsFillSymbol.createSimple(
            {"style": "no", "outline_color": "255,255,255,255", "outline_width": "0.3"})))
        layers.insert(0, outlines)
    # The layers stay out of the project: it would take ownership and delete
    # them behind Python's back.  Its CRS still matters, or the layout's scale
    # computations print proj errors.
    project = QgsProject.instance()
    project.setCrs(raster.crs())

    # Map across the page width at the raster's aspect ratio, legend below it,
    # page cut to fit: no empty bands and no legend text running off the edge.
    width = 190.0
    extent = raster.extent()
    map_height = width * extent.height() / extent.width()
    layout = QgsPrintLayout(project)
    layout.initializeDefaults()
    map_item = QgsLayoutItemMap(layout)
    map_item.attemptSetSceneRect(QRectF(5, 5, width, map_height))
    map_item.setCrs(raster.crs())
    map_item.setLayers(layers)
    map_item.setExtent(extent)
    layout.addLayoutItem(map_item)
    legend = QgsLayoutItemLegend(layout)
    legend.setAutoUpdateModel(False)
    legend.model().rootGroup().clear()
    legend.model().rootGroup().addLayer(raster)
    layout.addLayoutItem(legend)
    legend.attemptMove(QgsLayoutPoint(5, map_height + 8, QgsUnitTypes.LayoutMillimeters))

    # renderPageToImage rather than exportToImage: the latter georeferences the
    # PNG through GDAL, which cannot update PNGs and complains on stderr.
    exporter = QgsLayoutExporter(layout)
    # A legend only knows its size once it has been painted, so render a
    # throwaway page before cutting the page to fit.
    exporter.renderPageToImage(0, QSize(100, 100))
    legend.adjustBoxSize()
    page_height = map_height + 8 + legend.sizeWithUnits().height() + 5
    layout.pageCollection().page(0).setPageSize(
        QgsLayoutSize(width + 10, page_height, QgsUnitTypes.LayoutMillimeters))
    image = exporter.renderPageToImage(0, QSize(800, round(800 * page_height / (width + 10))))
    return not image.isNull() and image.save(str(path))


def run(maps_dir, out_dir, screenshot_path):
    """Check every map in maps_dir; return the names of the layers that fail."""
    failed = []
    # Plain constructors load the default style (<file>.qml, or the gpkg
    # layer_styles row) just as adding the file in the QGIS desktop does.
    rasters = [QgsRasterLayer(str(p), p.stem) for p in sorted(maps_dir.glob("*.tif"))]
    units = None
    if (maps_dir / "units.gpkg").exists():
        units = QgsVectorLayer(f"{maps_dir / 'units.gpkg'}|layername=units", "units", "ogr")
    if not rasters:
        failed.append(f"(no *.tif in {maps_dir})")
    for layer in rasters:
        if not check(layer, RASTER_EXPECT, out_dir):
            failed.append(layer.name())
    if units is not None and not check(units, UNITS_EXPECT, out_dir):
        failed.append("units")

    if screenshot_path:
        main_map = next((l for l in rasters if l.name() == "intensity_mean"), None)
        if main_map is None or not main_map.isValid():
            failed.append("screenshot (no intensity_mean.tif)")
        elif not screenshot(main_map, units if units and units.isValid() else None,
                            screenshot_path):
            failed.append("screenshot")
        else:
            print(f"screenshot: {screenshot_path}")
    return failed


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("maps_dir", type=Path)
    parser.add_argument("out_dir", type=Path)
    parser.add_argument("--screenshot", type=Path)
    args = parser.parse_args()
    args.out_dir.mkdir(parents=True, exist_ok=True)

    app = QgsApplication([], False)
    app.initQgis()
    # All layers live inside run(), so they are gone before exitQgis():
    # a layer outliving it makes the interpreter crash on exit.
    failed = run(args.maps_dir, args.out_dir, args.screenshot)
    app.exitQgis()
    if failed:
        print("FAILED: " + ", ".join(failed))
        return 1
    print("all layers styled")
    return 0


if __name__ == "__main__":
    sys.exit(main())
