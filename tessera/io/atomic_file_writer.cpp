#include "tessera/io/atomic_file_writer.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
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

}  // namespace

AtomicFileWriter::AtomicFileWriter(std::string path, std::string op_name)
    : path_(std::move(path)), op_name_(std::move(op_name)) {
  TESSERA_CHECK(!path_.empty(), "[", op_name_, "] empty file path; give the file to write");
  temp_path_ = path_ + ".tmp-" + std::to_string(::getpid()) + "-" +
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
