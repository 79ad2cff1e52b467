#include "data_config.hpp"

#include <algorithm>

#include "core/types.hpp"

namespace vbagg::io {

PixelAssignment parse_pixel_assignment(const std::string& s) {
  if (s == "centre" || s == "center") return PixelAssignment::centre;
  if (s == "all_touched") return PixelAssignment::all_touched;
  if (s == "fraction") return PixelAssignment::fraction;
  throw ConfigError("unknown pixel assignment '" + s + "' (allowed: centre, all_touched, fraction)");
}

BadUnitPolicy parse_bad_unit_policy(const std::string& s) {
  if (s == "stop") return BadUnitPolicy::stop;
  if (s == "drop") return BadUnitPolicy::drop;
  throw ConfigError("unknown bad-unit policy '" + s + "' (allowed: stop, drop)");
}

std::string to_string(PixelAssignment p) {
  return p == PixelAssignment::centre ? "centre" : p == PixelAssignment::all_touched ? "all_touched" : "fraction";
}

std::string to_string(BadUnitPolicy p) { return p == BadUnitPolicy::stop ? "stop" : "drop"; }

void check_resampling(const std::string& name, const std::string& where) {
  static const std::vector<std::string> allowed = {"near",    "bilinear", "cubic", "cubicspline", "lanczos",
                                                   "average", "rms",      "mode",  "max",         "min",
                                                   "med",     "q1",       "q3",    "sum"};
  if (std::find(allowed.begin(), allowed.end(), name) != allowed.end()) return;
  std::string list;
  for (const auto& a : allowed) list += (list.empty() ? "" : ", ") + a;
  throw ConfigError(where + ": unknown resampling '" + name + "' (allowed: " + list + ")");
}

}  // namespace vbagg::io
