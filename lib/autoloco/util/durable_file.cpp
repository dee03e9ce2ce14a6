#include "autoloco/util/durable_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "autoloco/util/error.hpp"

namespace autoloco {
namespace fs = std::filesystem;

void fsync_file(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) throw Error(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  if (::fsync(fd) != 0) {
    const int saved = errno;
    ::close(fd);
    throw Error(fmt::format("cannot flush '{}' to the disk: {}", path, std::strerror(saved)));
  }
  ::close(fd);
}

void fsync_directory(const std::string& dir) {
  const int fd = ::open(dir.empty() ? "." : dir.c_str(), O_RDONLY | O_DIRECTORY);
  if (fd < 0) throw Error(fmt::format("cannot open directory '{}': {}", dir, std::strerror(errno)));
  const int rc = ::fsync(fd);
  ::close(fd);
  // Some file systems (and tmpfs) do not support fsync on directories; that is not a failure.
  if (rc != 0 && errno != EINVAL && errno != ENOTSUP) {
    throw Error(fmt::format("cannot flush directory '{}': {}", dir, std::strerror(errno)));
  }
}

void write_file_durable(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) {
    throw Error(fmt::format("cannot create '{}': {}", tmp, std::strerror(errno)));
  }
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      ::close(fd);
      throw Error(
          fmt::format("cannot write '{}': {}; check disk space", tmp, std::strerror(errno)));
    }
    done += static_cast<size_t>(n);
  }
  if (::fsync(fd) != 0) {
    ::close(fd);
    throw Error(fmt::format("cannot flush '{}': {}", tmp, std::strerror(errno)));
  }
  ::close(fd);
  rename_durable(tmp, path);
}

void rename_durable(const std::string& from, const std::string& to) {
  if (std::rename(from.c_str(), to.c_str()) != 0) {
    throw Error(fmt::format("cannot rename '{}' to '{}': {}", from, to, std::strerror(errno)));
  }
  const std::string to_parent = fs::path(to).parent_path().string();
  const std::string from_parent = fs::path(from).parent_path().string();
  fsync_directory(to_parent);
  if (from_parent != to_parent) fsync_directory(from_parent);
}

}  // namespace autoloco
