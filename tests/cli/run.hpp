// Running the real executables from the tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>

namespace vbagg::test {

struct RunResult {
  int code;
  std::string output;  // stdout and stderr together
};

inline std::string bin(const std::string& app) { return std::string(VBAGG_BIN_DIR) + "/" + app; }

inline RunResult run(const std::string& command) {
  RunResult r{-1, ""};
  FILE* p = ::popen((command + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf{};
  size_t n;
  while ((n = std::fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  const int status = ::pclose(p);
  r.code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return r;
}

// The number of the first `"key": x` in a JSON text (NaN when missing or null).
inline double json_number(const std::string& text, const std::string& key) {
  const size_t at = text.find("\"" + key + "\": ");
  if (at == std::string::npos) return NAN;
  std::istringstream in(text.substr(at + key.size() + 4));
  double x = NAN;
  return in >> x ? x : NAN;
}

// The object `"key": {...}` of a JSON text, braces included (empty when missing), so that a search
// inside it cannot run on into the next object.
inline std::string json_object(const std::string& text, const std::string& key) {
  const size_t at = text.find("\"" + key + "\": {");
  if (at == std::string::npos) return "";
  const size_t open = text.find('{', at);
  int depth = 0;
  for (size_t i = open; i < text.size(); ++i) {
    if (text[i] == '{') ++depth;
    if (text[i] == '}' && --depth == 0) return text.substr(open, i - open + 1);
  }
  return "";
}

// How often `what` occurs in `text` (overlapping occurrences count).
inline int occurrences(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace vbagg::test
