// eval.tasks: reading the list, its round trip through the run's config.yaml, and the errors
// that name the task's key.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using Catch::Matchers::Contains;

namespace {

std::string error_of(const std::string& yaml) {
  try {
    parse_config(yaml);
  } catch (const ConfigError& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

TEST_CASE("config: eval.tasks reads name, path, format and limit, and prints back", "[config]") {
  const Config c = parse_config(
      "eval:\n  tasks:\n    - {name: hellaswag, path: tasks/hs.jsonl, format: hellaswag}\n"
      "    - {name: arc-e, path: tasks/arc.jsonl, format: arc, limit: 500}\n");
  REQUIRE(c.eval.tasks.size() == 2);
  CHECK(c.eval.tasks[0].name == "hellaswag");
  CHECK(c.eval.tasks[0].limit == 0);
  CHECK(c.eval.tasks[1].format == "arc");
  CHECK(c.eval.tasks[1].limit == 500);
  const Config back = parse_config(to_yaml(c));
  REQUIRE(back.eval.tasks.size() == 2);
  CHECK(back.eval.tasks[1].path == "tasks/arc.jsonl");
  CHECK(back.eval.tasks[1].limit == 500);
  CHECK(parse_config("{}").eval.tasks.empty());
  const Config set = parse_config("", {"eval.tasks=[{name: mc, path: m.jsonl, format: mc}]"});
  CHECK(set.eval.tasks.at(0).name == "mc");
}

TEST_CASE("config: eval.tasks errors name the task's key and say what to do", "[config]") {
  CHECK_THAT(error_of("eval:\n  tasks:\n    - {name: a, format: mc}\n"),
             Contains("eval.tasks[0].path is missing"));
  CHECK_THAT(error_of("eval:\n  tasks:\n    - {name: a, path: p, format: mmlu}\n"),
             Contains("eval.tasks[0].format") && Contains("hellaswag"));
  CHECK_THAT(error_of("eval:\n  tasks:\n    - {name: a, path: p, format: mc, limt: 3}\n"),
             Contains("eval.tasks[0]") && Contains("'limt'") && Contains("limit"));
  CHECK_THAT(error_of("eval:\n  tasks:\n    - {name: a, path: p, format: mc}\n"
                      "    - {name: a, path: q, format: arc}\n"),
             Contains("eval.tasks[1].name") && Contains("'a' names two tasks"));
  CHECK_THAT(error_of("eval:\n  tasks:\n    - {name: 'my task', path: p, format: mc}\n"),
             Contains("eval.tasks[0].name"));
  CHECK_THAT(error_of("eval:\n  tasks:\n    - {name: a, path: p, format: mc, limit: -1}\n"),
             Contains("eval.tasks[0].limit"));
  CHECK_THAT(error_of("eval:\n  tasks: hellaswag.jsonl\n"), Contains("expected a list of tasks"));
}
