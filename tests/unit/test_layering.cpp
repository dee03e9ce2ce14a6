// DESIGN.md's direction of dependencies, util <- config <- {comm, data, model, optim} <- {sched,
// ckpt, metrics, eval} <- train, checked on the includes of every file under lib/autoloco: a folder
// includes only its own and lower layers (siblings of a layer not each other), so that, say,
// optim does not reach into model.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <string>

namespace fs = std::filesystem;

TEST_CASE("lib/autoloco: every include goes down the layers of DESIGN.md", "[design]") {
  const std::map<std::string, int> layer = {
      {"util", 0},  {"config", 1}, {"comm", 2},    {"data", 2}, {"model", 2}, {"optim", 2},
      {"sched", 3}, {"ckpt", 3},   {"metrics", 3}, {"eval", 3}, {"train", 4}};
  const std::regex include(R"re(^\s*#\s*include\s*"autoloco/(\w+)/)re");
  const fs::path root = fs::path(AUTOLOCO_SOURCE_DIR) / "lib" / "autoloco";
  int files = 0;
  for (const auto& entry : fs::recursive_directory_iterator(root)) {
    if (!entry.is_regular_file()) continue;
    const std::string folder = entry.path().parent_path().filename().string();
    REQUIRE(layer.count(folder) == 1);
    ++files;
    std::ifstream in(entry.path());
    std::string line;
    for (int number = 1; std::getline(in, line); ++number) {
      std::smatch m;
      if (!std::regex_search(line, m, include) || m[1] == folder) continue;
      INFO(entry.path().string() << ":" << number << ": " << line);
      REQUIRE(layer.count(m[1]) == 1);
      CHECK(layer.at(m[1]) < layer.at(folder));
    }
  }
  CHECK(files > 100);
}
