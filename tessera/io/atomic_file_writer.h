#pragma once

#include <cstddef>
#include <cstdio>
#include <string>

namespace tessera::io {

// Writes a file so that readers see either the old file or the complete new
// one, never a torn mix: bytes go to "<path>.tmp-<host>-<pid>-<n>" in the
// same directory, commit() syncs and renames it over `path` and syncs the
// directory. Destroying the writer before commit() removes the temporary file;
// one a killed process left is removed by the next writer of the same path on
// that host. Past `ulimit -f` a write fails with an error (SIGXFSZ is ignored
// unless the program handles it).
class AtomicFileWriter {
 public:
  // Creates the temporary file; errors start with "[op_name]" and name the
  // path and the errno text.
  AtomicFileWriter(std::string path, std::string op_name);
  ~AtomicFileWriter();
  AtomicFileWriter(const AtomicFileWriter&) = delete;
  AtomicFileWriter& operator=(const AtomicFileWriter&) = delete;

  // Appends `size` bytes; throws (and removes the temporary file) on failure.
  void write(const void* data, size_t size);
  // Flushes, fsyncs, renames over the target and fsyncs the directory.
  void commit();
  // The temporary file's path (for tests and messages).
  const std::string& temp_path() const { return temp_path_; }

 private:
  // Closes and removes the temporary file, then throws naming `what` and `error`.
  [[noreturn]] void fail(const char* what, int error);

  std::string path_;
  std::string op_name_;
  std::string temp_path_;
  std::FILE* file_ = nullptr;
  bool finished_ = false;  // committed, or failed and cleaned up
};

}  // namespace tessera::io
