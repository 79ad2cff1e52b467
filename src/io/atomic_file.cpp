#include "atomic_file.hpp"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <random>

#include "core/types.hpp"

namespace vbagg::io {

namespace fs = std::filesystem;

AtomicOutput::AtomicOutput(std::string final_path) : final_(std::move(final_path)) {
  const fs::path p(final_);
  static thread_local std::mt19937_64 rng(std::random_device{}());
  temp_ = (p.parent_path() / ("." + p.filename().string() + ".part-" + std::to_string(::getpid()) + "-" +
                              std::to_string(rng() % 1000000)))
              .string();
}

AtomicOutput::~AtomicOutput() {
  if (!committed_) {
    std::error_code ec;
    fs::remove(temp_, ec);
  }
}

void AtomicOutput::commit() {
  if (std::rename(temp_.c_str(), final_.c_str()) != 0)
    throw DataError("cannot move '" + temp_ + "' to '" + final_ + "': " + std::strerror(errno));
  committed_ = true;
}

void write_text_atomic(const std::string& path, const std::string& text) {
  AtomicOutput out(path);
  const int fd = ::open(out.temp_path().c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) throw DataError("cannot write '" + path + "': " + std::strerror(errno));
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0) {
      const int err = errno;
      ::close(fd);
      throw DataError("cannot write '" + path + "': " + std::strerror(err));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0 || ::close(fd) != 0) throw DataError("cannot write '" + path + "': " + std::strerror(errno));
  out.commit();
}

namespace {

// True while the process runs; a zombie (killed, not yet reaped) counts as gone.
bool process_alive(long pid) {
  if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) return false;
  std::FILE* f = std::fopen(("/proc/" + std::to_string(pid) + "/stat").c_str(), "r");
  if (!f) return true;  // no /proc: trust kill()
  char state = '?';
  const int n = std::fscanf(f, "%*d (%*[^)]) %c", &state);
  std::fclose(f);
  return !(n == 1 && (state == 'Z' || state == 'X'));
}

}  // namespace

void ensure_writable_dir(const std::string& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec || !fs::is_directory(dir)) throw DataError("cannot create output folder '" + dir + "': " + ec.message());
  if (::access(dir.c_str(), W_OK) != 0)
    throw DataError("output folder '" + dir + "' is not writable: " + std::strerror(errno));
  // Temporary files of runs that were killed (their process is gone) are removed.
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    const auto at = name.find(".part-");
    if (name.empty() || name[0] != '.' || at == std::string::npos) continue;
    const long pid = std::strtol(name.c_str() + at + 6, nullptr, 10);
    if (pid > 0 && !process_alive(pid)) fs::remove(entry.path(), ec);
  }
}

}  // namespace vbagg::io
