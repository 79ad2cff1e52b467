// What a build has to say: warnings about units whose numbers look wrong, and its log lines.
#pragma once

#include <string>
#include <vector>

#include "build_dataset.hpp"

namespace vbagg::io {

// Units whose numbers should be checked before they are trusted: those covering fewer than a few
// pixels (their population is a share of pixels they barely touch), and those whose observed
// rate is far above the median unit's (often the same units: their population is diluted).
// `points`: the units are survey points (data.units.point_buffer set), one pixel or a small disc by
// design, so their size is not suspect.
std::vector<std::string> implausible_units(const BuiltData& built, bool points);

// Log lines for a build: its notes, the units that lost pixels to missing data and the dropped
// units (grouped by reason), and a closing summary.
std::vector<std::string> report_lines(const BuiltData& built);

}  // namespace vbagg::io
