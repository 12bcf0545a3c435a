#include "tessera/distributed/file_store.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <thread>

#include "tessera/core/error.h"

namespace tessera::distributed {
namespace {

std::string errno_text(int error) {
  return std::strerror(error);
}

// Writes all bytes, retrying short writes and EINTR.
bool write_all(int fd, const char* data, size_t size) {
  while (size > 0) {
    ssize_t written = ::write(fd, data, size);
    if (written < 0 && errno == EINTR) continue;
    if (written <= 0) return false;
    data += written;
    size -= static_cast<size_t>(written);
  }
  return true;
}

// Releases the flock and closes the lock file on every exit path.
class LockGuard {
 public:
  explicit LockGuard(int fd) : fd_(fd) {}
  ~LockGuard() {
    ::flock(fd_, LOCK_UN);
    ::close(fd_);
  }
  LockGuard(const LockGuard&) = delete;
  LockGuard& operator=(const LockGuard&) = delete;

 private:
  int fd_;
};

}  // namespace

FileStore::FileStore(std::string directory, std::chrono::milliseconds timeout)
    : directory_(std::move(directory)), timeout_(timeout) {
  TESSERA_CHECK(!directory_.empty(), "[FileStore] the directory is empty; pass a folder path");
  TESSERA_CHECK(timeout_.count() > 0, "[FileStore] timeout must be positive, got ",
                timeout_.count(), " ms");
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  TESSERA_CHECK(!error && std::filesystem::is_directory(directory_),
                "[FileStore] cannot create directory '", directory_, "': ", error.message());
}

std::string FileStore::path_of(const std::string& key) const {
  static const char* kHex = "0123456789abcdef";
  std::string name = "k_";
  for (unsigned char c : key) {
    if (std::isalnum(c) || c == '_' || c == '-') {
      name += static_cast<char>(c);
    } else {
      name += '%';
      name += kHex[c >> 4];
      name += kHex[c & 15];
    }
  }
  return directory_ + "/" + name;
}

std::string FileStore::write_temporary(const std::string& key,
                                       const std::vector<char>& value) const {
  // mkstemp: a unique, exclusively created name even when ranks on several
  // machines (or containers with the same pids) share the folder.
  std::string temp = directory_ + "/tmp-XXXXXX";
  int fd = ::mkostemp(temp.data(), O_CLOEXEC);
  TESSERA_CHECK(fd >= 0, "[FileStore] cannot create a temporary file in '", directory_,
                "' for key '", key, "': ", errno_text(errno));
  ::fchmod(fd, 0644);
  bool ok = write_all(fd, value.data(), value.size());
  int error = ok ? 0 : errno;
  ok = (::close(fd) == 0) && ok;
  // No fsync: a rendezvous store only has to outlive the job, not a crash.
  if (ok) return temp;
  ::unlink(temp.c_str());
  TESSERA_FAIL("[FileStore] cannot write key '", key, "' to '", temp, "': ", errno_text(error));
}

void FileStore::set(const std::string& key, const std::vector<char>& value) {
  const std::string path = path_of(key);
  const std::string temp = write_temporary(key, value);
  if (::rename(temp.c_str(), path.c_str()) == 0) return;
  const int error = errno;
  ::unlink(temp.c_str());
  TESSERA_FAIL("[FileStore] cannot write key '", key, "' to '", path, "': ", errno_text(error));
}

bool FileStore::create(const std::string& key, const std::vector<char>& value) {
  const std::string path = path_of(key);
  const std::string temp = write_temporary(key, value);
  const int result = ::link(temp.c_str(), path.c_str());
  const int error = errno;
  ::unlink(temp.c_str());
  if (result == 0) return true;
  TESSERA_CHECK(error == EEXIST, "[FileStore] cannot create key '", key, "' at '", path,
                "': ", errno_text(error));
  return false;
}

bool FileStore::try_read(const std::string& key, std::vector<char>& value) const {
  const std::string path = path_of(key);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    TESSERA_CHECK(errno == ENOENT, "[FileStore] cannot open '", path, "' for key '", key,
                  "': ", errno_text(errno));
    return false;
  }
  value.clear();
  char buffer[4096];
  while (true) {
    ssize_t got = ::read(fd, buffer, sizeof(buffer));
    if (got < 0 && errno == EINTR) continue;
    if (got < 0) {
      int error = errno;
      ::close(fd);
      TESSERA_FAIL("[FileStore] cannot read '", path, "': ", errno_text(error));
    }
    if (got == 0) break;
    value.insert(value.end(), buffer, buffer + got);
  }
  ::close(fd);
  return true;
}

std::vector<char> FileStore::get(const std::string& key) {
  wait({key}, timeout_);
  std::vector<char> value;
  TESSERA_CHECK(try_read(key, value), "[FileStore] key '", key, "' vanished from '", directory_,
                "' after it appeared");
  return value;
}

bool FileStore::check(const std::string& key) {
  return ::access(path_of(key).c_str(), F_OK) == 0;
}

void FileStore::wait(const std::vector<std::string>& keys, std::chrono::milliseconds timeout) {
  poll_until_present(keys, timeout, "FileStore", "in '" + directory_ + "'");
}

int64_t FileStore::add(const std::string& key, int64_t delta) {
  const std::string lock_path = directory_ + "/lock";
  int fd = ::open(lock_path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
  TESSERA_CHECK(fd >= 0, "[FileStore] cannot open lock file '", lock_path,
                "': ", errno_text(errno));
  while (::flock(fd, LOCK_EX) != 0) {
    if (errno == EINTR) continue;
    int error = errno;
    ::close(fd);
    TESSERA_FAIL("[FileStore] cannot lock '", lock_path, "': ", errno_text(error));
  }
  LockGuard guard(fd);
  std::vector<char> bytes;
  int64_t value = 0;
  if (try_read(key, bytes)) {
    const std::string text(bytes.begin(), bytes.end());
    size_t used = 0;
    try {
      value = std::stoll(text, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    TESSERA_CHECK(used == text.size() && !text.empty(), "[FileStore] add: key '", key, "' holds '",
                  text.substr(0, 40), "', not a decimal counter");
  }
  TESSERA_CHECK(!__builtin_add_overflow(value, delta, &value), "[FileStore] add: key '", key,
                "' would overflow int64 (", value, " + ", delta, ")");
  const std::string text = std::to_string(value);
  set(key, std::vector<char>(text.begin(), text.end()));
  return value;
}

}  // namespace tessera::distributed
