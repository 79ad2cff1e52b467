// A CSV field as RFC 4180 writes it: quoted, with its quotes doubled, when it holds a comma, a
// quote or a line break.
#pragma once

#include <string>

namespace vbagg::io {

inline std::string csv_field(const std::string& s) {
  if (s.find_first_of(",\"\n") == std::string::npos) return s;
  std::string e = "\"";
  for (char c : s) e += c == '"' ? std::string("\"\"") : std::string(1, c);
  return e + "\"";
}

}  // namespace vbagg::io
