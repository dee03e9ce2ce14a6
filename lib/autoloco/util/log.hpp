// Logging with a rank prefix. info() prints on rank 0 only (the job's voice); warn() and
// error() print on every rank because a problem may be local to one.
#pragma once

#include <fmt/format.h>

#include <string>

namespace autoloco::log {

// Set once after MPI_Init; before that, messages carry rank -1.
void set_rank(int rank);
int rank();

void write_info(const std::string& line);
void write_warn(const std::string& line);
void write_error(const std::string& line);

template <typename... Args>
void info(fmt::format_string<Args...> f, Args&&... args) {
  write_info(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void warn(fmt::format_string<Args...> f, Args&&... args) {
  write_warn(fmt::format(f, std::forward<Args>(args)...));
}
template <typename... Args>
void error(fmt::format_string<Args...> f, Args&&... args) {
  write_error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace autoloco::log
