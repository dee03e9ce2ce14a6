#include "autoloco/util/memory_usage.hpp"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>

namespace autoloco {

int64_t resident_bytes() {
  std::ifstream statm("/proc/self/statm");
  int64_t size = 0;
  int64_t resident = 0;
  if (!(statm >> size >> resident)) return 0;
  return resident * static_cast<int64_t>(sysconf(_SC_PAGESIZE));
}

int64_t peak_resident_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux counts kilobytes
}

}  // namespace autoloco
