#include "autoloco/ckpt/write_rate.hpp"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <vector>

#include "autoloco/util/error.hpp"
#include "autoloco/util/timer.hpp"

namespace autoloco {

double measure_write_rate(const std::string& dir, int64_t bytes) {
  const std::string path = dir + "/.write-rate-probe";
  // Not zeros: a file system that compresses or dedups would flatter them.
  std::vector<char> block(1 << 20);
  for (size_t i = 0; i < block.size(); ++i)
    block[i] = static_cast<char>((i * 2654435761u) >> 13);
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw Error(fmt::format("cannot create '{}': {}", path, std::strerror(errno)));
  Timer timer;
  int64_t done = 0;
  bool ok = true;
  while (ok && done < bytes) {
    const auto n = static_cast<size_t>(std::min<int64_t>(bytes - done, block.size()));
    const ssize_t w = ::write(fd, block.data(), n);
    if (w < 0 && errno == EINTR) continue;
    ok = w > 0;
    done += ok ? w : 0;
  }
  ok = ok && ::fsync(fd) == 0;
  const double seconds = timer.seconds();
  const int saved = errno;
  ::close(fd);
  ::unlink(path.c_str());
  if (!ok) {
    throw Error(
        fmt::format("cannot write '{}': {}; check free disk space", path, std::strerror(saved)));
  }
  return static_cast<double>(bytes) / std::max(seconds, 1e-6);
}

}  // namespace autoloco
