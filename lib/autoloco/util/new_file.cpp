// NewFile: create a file under a temporary name, flush it, then link it into place without ever
// replacing another file (see new_file.hpp).
#include "autoloco/util/new_file.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <stdio.h>  // renameat2, RENAME_NOREPLACE (glibc >= 2.28)
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "autoloco/util/durable_file.hpp"
#include "autoloco/util/error.hpp"

namespace autoloco {
namespace fs = std::filesystem;
namespace {

std::string errno_text(int error) {
  return std::strerror(error);
}

std::string exists_message(const std::string& path) {
  return fmt::format(
      "'{}' already exists: autoloco never writes over a file; remove it or write to another "
      "directory",
      path);
}

// A temporary name no other writer uses: this process's id and a counter of its own.
std::string temporary_name(const std::string& path) {
  static std::atomic<uint64_t> counter{0};
  const fs::path p(path);
  return (p.parent_path() / fmt::format(".{}.tmp-{}-{}", p.filename().string(),
                                        static_cast<long>(::getpid()), counter++))
      .string();
}

std::string parent_of(const std::string& path) {
  const std::string parent = fs::path(path).parent_path().string();
  return parent.empty() ? "." : parent;
}

}  // namespace

void rename_no_replace(const std::string& from, const std::string& to) {
  // renameat2(RENAME_NOREPLACE) checks and renames in one step. File systems without it (some
  // network and FUSE ones answer EINVAL) get link(2), which also refuses an existing name, and
  // then the temporary name is removed.
  int rc = ::renameat2(AT_FDCWD, from.c_str(), AT_FDCWD, to.c_str(), RENAME_NOREPLACE);
  if (rc != 0 && (errno == EINVAL || errno == ENOSYS || errno == ENOTSUP)) {
    rc = ::link(from.c_str(), to.c_str());
    if (rc == 0) ::unlink(from.c_str());
  }
  if (rc != 0) {
    if (errno == EEXIST) throw Error(exists_message(to));
    throw Error(fmt::format("cannot give '{}' the name '{}': {}", from, to, errno_text(errno)));
  }
  fsync_directory(parent_of(to));
}

NewFile::NewFile(std::string path) : path_(std::move(path)), tmp_(temporary_name(path_)) {
  // Checked first so that the usual mistake is named before any byte is written; commit()
  // checks again, atomically, for a file that appears meanwhile.
  if (::access(path_.c_str(), F_OK) == 0) throw Error(exists_message(path_));
  fd_ = ::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd_ < 0) {
    throw Error(
        fmt::format("cannot create '{}' (for '{}'): {}; check that the directory exists "
                    "and is writable",
                    tmp_, path_, errno_text(errno)));
  }
}

NewFile::~NewFile() {
  if (fd_ >= 0) ::close(fd_);
  if (!committed_) ::unlink(tmp_.c_str());
}

void NewFile::write(const void* data, size_t size) {
  const auto* bytes = static_cast<const char*>(data);
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::write(fd_, bytes + done, size - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      throw Error(fmt::format("cannot write '{}': {}; check free disk space", path_,
                              errno_text(n < 0 ? errno : ENOSPC)));
    }
    done += static_cast<size_t>(n);
  }
}

void NewFile::commit() {
  // The data reaches the disk before the name makes it visible: after a power cut the name
  // never points to a file with holes.
  if (::fsync(fd_) != 0) {
    throw Error(fmt::format("cannot flush '{}' to the disk: {}", path_, errno_text(errno)));
  }
  const int rc = ::close(fd_);
  fd_ = -1;
  if (rc != 0) throw Error(fmt::format("cannot write '{}': {}", path_, errno_text(errno)));
  rename_no_replace(tmp_, path_);
  committed_ = true;
}

void write_new_file(const std::string& path, const std::string& text) {
  NewFile file(path);
  file.write(text.data(), text.size());
  file.commit();
}

}  // namespace autoloco
