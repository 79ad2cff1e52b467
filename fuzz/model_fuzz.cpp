// libFuzzer target: the model-file reader. Broken files must be answered with DataError; any
// other exception or a crash is a bug.
#include <cstddef>
#include <cstdint>
#include <string>

#include "core/types.hpp"
#include "io/model_file.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    (void)vbagg::io::parse_model_file(std::string(reinterpret_cast<const char*>(data), size), "fuzz/model.yaml");
  } catch (const vbagg::DataError&) {
  } catch (const vbagg::ConfigError&) {
  }
  return 0;
}
