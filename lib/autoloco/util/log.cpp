#include "autoloco/util/log.hpp"

#include <cstdio>

namespace autoloco::log {
namespace {
int g_rank = -1;
}

void set_rank(int r) {
  g_rank = r;
}
int rank() {
  return g_rank;
}

void write_info(const std::string& line) {
  if (g_rank > 0) return;
  std::fprintf(stdout, "%s\n", line.c_str());
  std::fflush(stdout);
}

void write_warn(const std::string& line) {
  std::fprintf(stderr, "[rank %d] warning: %s\n", g_rank, line.c_str());
  std::fflush(stderr);
}

void write_error(const std::string& line) {
  std::fprintf(stderr, "[rank %d] error: %s\n", g_rank, line.c_str());
  std::fflush(stderr);
}

}  // namespace autoloco::log
