#include "tessera/io/atomic_file_writer.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "tessera/core/error.h"

namespace tessera::io {

namespace {

// Two writers in one process (threads) must not share a temporary name.
std::atomic<uint64_t> next_writer_id{0};

std::string directory_of(const std::string& path) {
  std::string parent = std::filesystem::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

std::string host_name() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "host";
  // The name goes into a file name: keep it to characters safe there.
  std::string out = name;
  for (char& c : out) {
    if (c == '/' || c == '-') c = '_';
  }
  return out;
}

// Removes "<target>.tmp-<host>-<pid>-<n>" files that a writer on this host
// left when it was killed: their process no longer exists. Files of other
// hosts, and of live processes, are left alone.
void remove_dead_writers_files(const std::string& path, const std::string& host) {
  const std::string prefix = std::filesystem::path(path).filename().string() + ".tmp-" + host + "-";
  std::error_code error;
  for (const auto& item : std::filesystem::directory_iterator(directory_of(path), error)) {
    const std::string name = item.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0) continue;
    char* end = nullptr;
    const long pid = std::strtol(name.c_str() + prefix.size(), &end, 10);
    if (pid <= 0 || *end != '-') continue;
    if (::kill(static_cast<pid_t>(pid), 0) != 0 && errno == ESRCH) {
      std::filesystem::remove(item.path(), error);
    }
  }
}

// Past `ulimit -f` the kernel sends SIGXFSZ, which kills by default; ignored,
// the write fails with EFBIG and the writer reports it. A handler the
// program installed is kept.
void ignore_file_size_signal() {
  static const bool done = [] {
    struct sigaction current {};
    if (::sigaction(SIGXFSZ, nullptr, &current) == 0 && current.sa_handler == SIG_DFL) {
      ::signal(SIGXFSZ, SIG_IGN);
    }
    return true;
  }();
  (void)done;
}

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, std::string op_name)
    : path_(std::move(path)), op_name_(std::move(op_name)) {
  TESSERA_CHECK(!path_.empty(), "[", op_name_, "] empty file path; give the file to write");
  ignore_file_size_signal();
  static const std::string host = host_name();
  remove_dead_writers_files(path_, host);
  temp_path_ = path_ + ".tmp-" + host + "-" + std::to_string(::getpid()) + "-" +
               std::to_string(next_writer_id.fetch_add(1));
  file_ = std::fopen(temp_path_.c_str(), "wb");
  if (file_ == nullptr) {
    const int error = errno;
    finished_ = true;
    TESSERA_FAIL("[", op_name_, "] cannot write '", path_, "': creating '", temp_path_,
                 "' failed: ", std::strerror(error));
  }
}

AtomicFileWriter::~AtomicFileWriter() {
  if (finished_) return;
  if (file_ != nullptr) std::fclose(file_);
  std::remove(temp_path_.c_str());
}

void AtomicFileWriter::fail(const char* what, int error) {
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  std::remove(temp_path_.c_str());
  finished_ = true;
  TESSERA_FAIL("[", op_name_, "] writing '", path_, "' failed (", what, "): ", std::strerror(error),
               "; the previous file, if any, is unchanged");
}

void AtomicFileWriter::write(const void* data, size_t size) {
  TESSERA_CHECK(!finished_, "[", op_name_, "] '", path_, "' is already finished");
  if (size == 0) return;
  if (std::fwrite(data, 1, size, file_) != size) fail("write", errno);
}

void AtomicFileWriter::commit() {
  TESSERA_CHECK(!finished_, "[", op_name_, "] '", path_, "' is already finished");
  if (std::fflush(file_) != 0) fail("flush", errno);
  if (::fsync(::fileno(file_)) != 0) fail("fsync", errno);
  const int close_result = std::fclose(file_);
  file_ = nullptr;
  if (close_result != 0) fail("close", errno);
  if (std::rename(temp_path_.c_str(), path_.c_str()) != 0) fail("rename", errno);
  finished_ = true;
  // The rename is durable only once the directory entry is on disk. Some
  // file systems cannot fsync a directory (EINVAL); the file is complete then.
  const std::string directory = directory_of(path_);
  const int dir_fd = ::open(directory.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir_fd < 0) {
    const int error = errno;
    TESSERA_FAIL("[", op_name_, "] wrote '", path_, "' but cannot open its directory '", directory,
                 "' to sync it: ", std::strerror(error));
  }
  const int sync_result = ::fsync(dir_fd);
  const int error = errno;
  ::close(dir_fd);
  TESSERA_CHECK(sync_result == 0 || error == EINVAL, "[", op_name_, "] wrote '", path_,
                "' but syncing its directory '", directory, "' failed: ", std::strerror(error));
}

}  // namespace tessera::io
