// Test support: a fresh directory under the system temp dir, unique per process and instance,
// removed with everything in it when the test ends.
#pragma once

#include <unistd.h>

#include <filesystem>
#include <random>
#include <string>
#include <system_error>

namespace autoloco::test {

struct TempDir {
  std::filesystem::path path;

  explicit TempDir(const std::string& tag = "test") {
    std::random_device device;
    path = std::filesystem::temp_directory_path() /
           ("autoloco-" + tag + "-" + std::to_string(::getpid()) + "-" + std::to_string(device()));
    std::filesystem::create_directories(path);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  std::string str() const { return path.string(); }
  std::string file(const std::string& name) const { return (path / name).string(); }
};

}  // namespace autoloco::test
