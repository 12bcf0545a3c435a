#pragma once

// Reading files that may be hostile or changing underneath: a named pipe or
// device is refused instead of waited on, and a file that shrinks while it is
// read is an error instead of a crash (nothing is memory-mapped). Every error
// starts with "[op]" and names the path.

#include <cstddef>
#include <cstdint>
#include <string>

namespace tessera {

// An open regular file, closed on destruction.
class RegularFile {
 public:
  // Opens `path` for reading; throws unless it is a regular file.
  RegularFile(const std::string& path, const char* op);
  ~RegularFile();
  RegularFile(const RegularFile&) = delete;
  RegularFile& operator=(const RegularFile&) = delete;

  // The size when opened.
  uint64_t size() const { return size_; }
  // Reads exactly `count` bytes at `offset`; throws if the file ends first
  // (it was truncated while being read).
  void read_at(void* destination, size_t count, uint64_t offset) const;

 private:
  std::string path_;
  const char* op_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

// The whole of a regular file, refused past `max_bytes`.
std::string read_regular_file(const std::string& path, const char* op, uint64_t max_bytes);

}  // namespace tessera
