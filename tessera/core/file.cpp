#include "tessera/core/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "tessera/core/error.h"

namespace tessera {

RegularFile::RegularFile(const std::string& path, const char* op) : path_(path), op_(op) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd_ < 0) {
    const int error = errno;
    TESSERA_FAIL("[", op, "] cannot open '", path, "': ", std::strerror(error));
  }
  struct stat info {};
  if (::fstat(fd_, &info) != 0 || !S_ISREG(info.st_mode)) {
    ::close(fd_);
    fd_ = -1;
    TESSERA_FAIL("[", op, "] '", path, "' is not a regular file",
                 S_ISDIR(info.st_mode)    ? " (it is a directory)"
                 : S_ISFIFO(info.st_mode) ? " (it is a named pipe)"
                                          : "");
  }
  size_ = static_cast<uint64_t>(info.st_size);
}

RegularFile::~RegularFile() {
  if (fd_ >= 0) ::close(fd_);
}

void RegularFile::read_at(void* destination, size_t count, uint64_t offset) const {
  auto* out = static_cast<char*>(destination);
  size_t done = 0;
  while (done < count) {
    const ssize_t got = ::pread(fd_, out + done, count - done, static_cast<off_t>(offset + done));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      const int error = errno;
      TESSERA_FAIL("[", op_, "] reading '", path_, "' failed: ", std::strerror(error));
    }
    TESSERA_CHECK(got > 0, "[", op_, "] '", path_, "' ended at byte ", offset + done, " while ",
                  size_, " bytes were expected; it was truncated while being read");
    done += static_cast<size_t>(got);
  }
}

std::string read_regular_file(const std::string& path, const char* op, uint64_t max_bytes) {
  RegularFile file(path, op);
  TESSERA_CHECK(file.size() <= max_bytes, "[", op, "] '", path, "' has ", file.size(),
                " bytes, more than the ", max_bytes, " this file may have");
  std::string text(static_cast<size_t>(file.size()), '\0');
  file.read_at(text.data(), text.size(), 0);
  return text;
}

}  // namespace tessera
