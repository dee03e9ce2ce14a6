// Metrics output: JSON lines, progress formatting and the run directory's safety rules.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "autoloco/metrics/progress.hpp"
#include "autoloco/metrics/run_directory.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/json.hpp"

using namespace autoloco;

TEST_CASE("json: objects keep order and escape strings and non-finite numbers", "[metrics]") {
  JsonObject inner;
  inner.add("k", int64_t{3});
  JsonObject o;
  o.add("step", int64_t{12})
      .add("loss", 2.5)
      .add("name", "a\"b\\c\n")
      .add("ok", true)
      .add("nan", std::nan(""))
      .add("h", std::vector<int64_t>{20, 25})
      .add("inner", inner);
  CHECK(o.str() ==
        "{\"step\":12,\"loss\":2.5,\"name\":\"a\\\"b\\\\c\\n\",\"ok\":true,\"nan\":null,"
        "\"h\":[20,25],\"inner\":{\"k\":3}}");
  o.add("step", int64_t{13});  // a repeated key replaces the value in place
  CHECK(o.str().rfind("{\"step\":13,", 0) == 0);
}

TEST_CASE("progress: durations and SI numbers read well", "[metrics]") {
  CHECK(format_duration(5) == "5s");
  CHECK(format_duration(185) == "3m05s");
  CHECK(format_duration(3720) == "1h02m");
  CHECK(format_duration(std::nan("")) == "?");
  CHECK(format_si(999) == "999");
  CHECK(format_si(12345) == "12.3k");
  CHECK(format_si(4.56e6) == "4.56M");
  const std::string line = format_progress({50, 100, 2.3456, 3e-3, 12345, 10.0});
  CHECK(line == "step  50/100 | loss 2.3456 | lr 3.00e-03 | 12.3k tok/s | ETA 10s");
}

TEST_CASE("run directory: files are written and an existing run is never overwritten",
          "[metrics]") {
  const autoloco::test::TempDir tmp("rundir");
  const std::string out = tmp.str();
  {
    RunDirectory dir = RunDirectory::create(out, "r1");
    dir.write_config("run:\n  name: r1\n");
    dir.append_metrics(JsonObject().add("step", int64_t{1}));
    dir.append_metrics(JsonObject().add("step", int64_t{2}));
    dir.write_summary(JsonObject().add("steps", int64_t{2}));
  }
  std::ifstream metrics(out + "/r1/metrics.jsonl");
  std::stringstream text;
  text << metrics.rdbuf();
  CHECK(text.str() == "{\"step\":1}\n{\"step\":2}\n");
  CHECK(std::filesystem::exists(out + "/r1/summary.json"));
  CHECK_FALSE(std::filesystem::exists(out + "/r1/summary.json.tmp"));
  REQUIRE_THROWS_AS(RunDirectory::create(out, "r1"), ConfigError);
  REQUIRE_THROWS_WITH(RunDirectory::create(out, "r1"), Catch::Contains("r1"));
  std::ifstream again(out + "/r1/metrics.jsonl");
  std::stringstream after;
  after << again.rdbuf();
  CHECK(after.str() == text.str());
}
