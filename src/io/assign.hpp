// Which pixels of the grid belong to a unit, and with what share of their area.
#pragma once

#include <cstdint>
#include <vector>

#include "data_config.hpp"
#include "grid.hpp"

class OGRGeometry;

namespace vbagg::io {

struct PixelShare {
  int col, row;
  double fraction;  // area share of the pixel inside the unit, in (0, 1]; 1 for centre/all_touched
};

// Pixels of `grid` in rows [row0, row0 + rows) assigned to `geometry` (in the grid's CRS):
// centre: pixel centre inside; all_touched: every pixel the polygon touches; fraction: every pixel
// with a positive area share, the share computed exactly (GEOS) for pixels the boundary crosses.
void assign_pixels(const OGRGeometry& geometry, const Grid& grid, PixelAssignment mode, int row0, int rows,
                   std::vector<PixelShare>& out);

// Row range [first, last) of the grid covered by the geometry's envelope (empty when outside).
void envelope_rows(const OGRGeometry& geometry, const Grid& grid, int& first, int& last);

// Number of grid pixels inside the geometry's envelope: an upper bound of the pixels it gets.
double envelope_pixels(const OGRGeometry& geometry, const Grid& grid);

}  // namespace vbagg::io
