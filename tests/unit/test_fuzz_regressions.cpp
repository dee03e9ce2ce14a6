// Regression tests of the fuzzers' findings (tests/fuzz, scripts/fuzz.sh): every input under
// tests/fuzz/regressions/<target>/ once crashed, escaped with an untyped error or tripped a
// fuzzer limit; each now goes through the normal API and must be refused with its typed error.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../fuzz/config_input.hpp"
#include "../support/temp_dir.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/data/prepared_data.hpp"
#include "autoloco/util/error.hpp"

namespace fs = std::filesystem;
using autoloco::CheckpointError;
using autoloco::ConfigError;
using autoloco::DataError;

namespace {

// The inputs of one target, sorted by name (a deterministic order).
std::vector<fs::path> regressions(const std::string& target) {
  const fs::path dir = fs::path(AUTOLOCO_SOURCE_DIR) / "tests/fuzz/regressions" / target;
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.is_regular_file()) files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

std::string read_file(const fs::path& path) {
  // Through a stringstream: GCC 12 warns (null-dereference) on istreambuf_iterator here.
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

TEST_CASE("fuzz regressions: configs the config fuzzer found are refused", "[unit][config][fuzz]") {
  const std::vector<fs::path> files = regressions("config");
  REQUIRE_FALSE(files.empty());
  for (const fs::path& file : files) {
    DYNAMIC_SECTION(file.filename().string()) {
      const auto input = autoloco::fuzz::split_config_input(read_file(file));
      CHECK_THROWS_AS(autoloco::parse_config(input.yaml, input.overrides, file.string()),
                      ConfigError);
    }
  }
}

// What verify_checkpoint does with a file: list its datasets and sum each one. The inputs are in
// HDF5's earliest format, on which libhdf5 1.10 crashed or asked for exabytes.
TEST_CASE("fuzz regressions: HDF5 files the checkpoint fuzzer found are refused",
          "[unit][ckpt][fuzz]") {
  const std::vector<fs::path> files = regressions("checkpoint");
  REQUIRE_FALSE(files.empty());
  for (const fs::path& file : files) {
    DYNAMIC_SECTION(file.filename().string()) {
      CHECK_THROWS_AS(autoloco::H5Reader(file.string()).sums(), CheckpointError);
      CHECK_THROWS_WITH(autoloco::H5Reader(file.string()).sums(), Catch::Contains(file.string()));
    }
  }
}

// As the prepared fuzzer reads one: the input as prepare.json beside a shard of data.val.
TEST_CASE("fuzz regressions: prepare.json files the prepared fuzzer found are refused",
          "[unit][data][fuzz]") {
  const std::vector<fs::path> files = regressions("prepared");
  REQUIRE_FALSE(files.empty());
  for (const fs::path& file : files) {
    DYNAMIC_SECTION(file.filename().string()) {
      const autoloco::test::TempDir dir("fuzz-prepared");
      fs::copy_file(file, dir.path / "prepare.json");
      const std::vector<std::string> shards = {dir.file("val_000.bin")};
      CHECK_THROWS_AS(autoloco::read_prepared_data(shards, "data.val"), DataError);
    }
  }
}
