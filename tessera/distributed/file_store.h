#pragma once

#include <chrono>
#include <string>

#include "tessera/distributed/store.h"

namespace tessera::distributed {

// A Store in a directory every rank can see (one machine, or a shared file
// system): one file per key, written to a temporary name and renamed so a
// reader never sees half a value. Readers poll with short sleeps. add()
// serialises through an flock()ed lock file.
class FileStore : public Store {
 public:
  // Uses (and creates if needed) `directory`; get()/wait() give up after `timeout`.
  explicit FileStore(std::string directory,
                     std::chrono::milliseconds timeout = std::chrono::seconds(60));

  // Writes the value atomically (temporary file + rename).
  void set(const std::string& key, const std::vector<char>& value) override;
  // Writes a temporary file and hard-links it to the key's name: link()
  // fails when the name exists, so the claim and the value are one step.
  bool create(const std::string& key, const std::vector<char>& value) override;
  // Reads the value, polling until it exists or the timeout passes.
  std::vector<char> get(const std::string& key) override;
  // Polls until every key exists; the error names the missing keys and the time waited.
  void wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) override;
  using Store::wait;
  // Read-modify-write of a decimal counter under an exclusive lock.
  int64_t add(const std::string& key, int64_t delta) override;
  // Whether the key's file exists.
  bool check(const std::string& key) override;
  // The timeout given at construction.
  std::chrono::milliseconds timeout() const override { return timeout_; }
  // The directory holding the key files.
  const std::string& directory() const { return directory_; }

 private:
  // Key -> file path; bytes outside [A-Za-z0-9_.-] are escaped so any key is a valid name.
  std::string path_of(const std::string& key) const;
  // Writes `value` to a fresh temporary file in the directory; returns its path.
  std::string write_temporary(const std::string& key, const std::vector<char>& value) const;
  // Reads a key's file; false when it does not exist yet.
  bool try_read(const std::string& key, std::vector<char>& value) const;

  std::string directory_;
  std::chrono::milliseconds timeout_;
};

}  // namespace tessera::distributed
