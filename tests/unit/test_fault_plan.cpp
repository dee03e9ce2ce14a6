// AUTOLOCO_FAULT's plans (util/fault_injection.hpp): what each kind needs, and the errors that
// name the variable and the entry.
#include <catch2/catch.hpp>

#include "autoloco/util/error.hpp"
#include "autoloco/util/fault_injection.hpp"

using autoloco::FaultPlan;

TEST_CASE("fault plan: every kind parses with its fields, comma-separated", "[unit][faults]") {
  const FaultPlan plan = FaultPlan::parse(
      "stop:rank=1:step=6,kill:rank=2:step=7,late:dc=1:seconds=2:round=3,stop-sync:dc=0:round=4,"
      "ckpt-fail:step=10,ckpt-slow:step=12:seconds=5");
  CHECK_FALSE(plan.empty());
  CHECK(plan.late_seconds(1, 3) == 2.0);
  CHECK(plan.late_seconds(1, 4) == 0.0);
  CHECK(plan.fails_checkpoint(10, 0));
  CHECK_FALSE(plan.fails_checkpoint(10, 1));
  CHECK(plan.slow_checkpoint_s(12, 0) == 5.0);
  // Not this dc's or this round's: nothing happens (the process would stop otherwise).
  plan.at_sync(1, 4);
  plan.at_sync(0, 3);
  plan.at_step(6, 0);
}

TEST_CASE("fault plan: a kind without the fields it needs is named with the variable",
          "[unit][faults]") {
  using Catch::Matchers::Contains;
  CHECK_THROWS_WITH(FaultPlan::parse("stop-sync:dc=1"),
                    Contains("AUTOLOCO_FAULT") && Contains("stop-sync needs dc= and round="));
  CHECK_THROWS_WITH(FaultPlan::parse("kill:step=3"), Contains("need rank= and step="));
  CHECK_THROWS_WITH(FaultPlan::parse("freeze:dc=1"), Contains("unknown kind 'freeze'"));
  CHECK_THROWS_WITH(FaultPlan::parse("late:dc=x:seconds=1"), Contains("dc=x is not a number"));
  CHECK_THROWS_AS(FaultPlan::parse("late:dc=1"), autoloco::ConfigError);
}
