// Running the real executables from the tests.
#pragma once

#include <sys/wait.h>

#include <array>
#include <cstdio>
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

}  // namespace vbagg::test
