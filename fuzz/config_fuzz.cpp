// libFuzzer target: the run.yaml loader with --set overrides. Input: YAML text, optionally
// followed by a line "---set---" and one KEY=VALUE override per line. Configuration errors are
// expected answers; any other exception or a crash is a bug.
#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <vector>

#include "cli/config.hpp"
#include "core/types.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string input(reinterpret_cast<const char*>(data), size);
  const auto split = input.find("\n---set---\n");
  const std::string yaml = input.substr(0, split);
  std::vector<std::string> overrides;
  if (split != std::string::npos) {
    std::istringstream lines(input.substr(split + 11));
    for (std::string line; std::getline(lines, line);) overrides.push_back(line);
  }
  try {
    const vbagg::cli::Config c =
        vbagg::cli::Config::parse(yaml, "fuzz.yaml", "/tmp", overrides, vbagg::cli::RequiredData::none);
    (void)c.resolved_yaml();
    (void)c.data_config();
  } catch (const vbagg::ConfigError&) {
  } catch (const vbagg::DataError&) {
  }
  return 0;
}
