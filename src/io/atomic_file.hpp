// Outputs appear under their final name only when complete: written to a temporary name in the
// same folder, then renamed (atomic on POSIX file systems). A failed or killed run leaves no
// partial file under the final name.
#pragma once

#include <string>

namespace vbagg::io {

class AtomicOutput {
 public:
  explicit AtomicOutput(std::string final_path);
  ~AtomicOutput();  // removes the temporary file unless committed
  AtomicOutput(const AtomicOutput&) = delete;
  AtomicOutput& operator=(const AtomicOutput&) = delete;

  const std::string& temp_path() const { return temp_; }
  const std::string& final_path() const { return final_; }
  void commit();  // renames the temporary file to the final name

 private:
  std::string final_, temp_;
  bool committed_ = false;
};

// Writes text to path atomically; throws DataError naming the path when it cannot.
void write_text_atomic(const std::string& path, const std::string& text);

// Throws DataError unless dir exists (creating it) and a file can be created in it.
void ensure_writable_dir(const std::string& dir);

}  // namespace vbagg::io
