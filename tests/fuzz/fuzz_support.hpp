// Shared by the libFuzzer targets of tests/fuzz: a scratch file that holds the input for the
// readers that open a path, and the rule of what counts as a finding.
//
// A parser that rejects bad input by throwing one of autoloco's typed errors (util/error.hpp) is
// correct. Anything else is a finding and stops the fuzzer: another exception (std::bad_alloc,
// std::out_of_range, YAML::Exception ... escape as an uncaught exception and abort), a crash, a
// sanitizer report, a hang (-timeout) or an allocation over -rss_limit_mb / -malloc_limit_mb.
#pragma once

#include <fcntl.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autoloco/util/error.hpp"

namespace autoloco::fuzz {

// The input as a file, for the readers that open a path; removed when it goes out of scope.
// It lies in /dev/shm (memory) where there is one, else in $TMPDIR or /tmp. Not a memfd: HDF5
// resolves the path of a file it opens, and /proc/self/fd/N resolves to no file.
class ScratchFile {
 public:
  ScratchFile(const uint8_t* data, size_t size) {
    const char* tmpdir = std::getenv("TMPDIR");
    const std::string dir = ::access("/dev/shm", W_OK) == 0 ? "/dev/shm"
                            : tmpdir != nullptr             ? tmpdir
                                                            : "/tmp";
    path_ = dir + "/autoloco-fuzz-" + std::to_string(::getpid());
    const int fd = ::open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) {
      std::perror(path_.c_str());
      std::abort();
    }
    size_t done = 0;
    while (done < size) {
      const ssize_t n = ::write(fd, data + done, size - done);
      if (n <= 0) std::abort();
      done += static_cast<size_t>(n);
    }
    ::close(fd);
  }
  ~ScratchFile() { ::unlink(path_.c_str()); }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

// Runs `body`; autoloco's typed errors are the expected way to refuse an input, anything else
// propagates (and libFuzzer reports the uncaught exception as a crash).
template <class F>
void expect_typed_errors(F&& body) {
  try {
    body();
  } catch (const autoloco::Error&) {
  }
}

// Aborts with `what` when a property that must hold for every accepted input does not.
inline void require(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz finding: %s\n", what);
    std::abort();
  }
}

}  // namespace autoloco::fuzz
