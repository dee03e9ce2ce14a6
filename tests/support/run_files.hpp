// Reading what a run left behind, for the e2e and text suites: whole files, numbers out of the flat
// JSON that autoloco writes, and the exit code of a command. Include after catch.hpp.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

namespace autoloco::test {

// Runs `command` with the shell; its exit code, or -1 when it did not exit normally.
inline int run_command(const std::string& command) {
  const int status = std::system(command.c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

inline bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

inline std::string read_text(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Writes `text` to `path` as it is, creating the directories above it.
inline void write_text(const std::string& path, const std::string& text) {
  const std::filesystem::path file(path);
  if (file.has_parent_path()) std::filesystem::create_directories(file.parent_path());
  std::ofstream(path, std::ios::binary) << text;
}

inline std::vector<std::string> read_lines(const std::string& path) {
  std::ifstream in(path);
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);)
    lines.push_back(line);
  return lines;
}

inline int count_lines(const std::string& path) {
  std::ifstream in(path);
  int lines = 0;
  for (std::string line; std::getline(in, line);)
    ++lines;
  return lines;
}

// The first number stored under "key"; the test fails when there is none.
inline double json_number(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\":(-?[0-9.eE+-]+)");
  REQUIRE(std::regex_search(json, m, re));
  return std::stod(m[1].str());
}

}  // namespace autoloco::test
