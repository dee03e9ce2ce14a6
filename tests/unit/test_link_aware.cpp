// interval.target_utilisation: the arithmetic of the link-aware floor (ALGORITHMS.md §4) and
// its decisions around a controller as the link changes.
#include <catch2/catch.hpp>

#include <memory>

#include "autoloco/config/config.hpp"
#include "autoloco/sched/interval_controller.hpp"
#include "autoloco/sched/link_aware_interval.hpp"

using namespace autoloco;

namespace {

RoundStats round_of(int64_t H, double step_s, double link_s) {
  RoundStats s;
  s.round = 1;
  s.step = H;
  s.H = H;
  s.round_s = step_s * static_cast<double>(H);
  s.link_s = link_s;
  return s;
}

double value_of(const std::vector<std::pair<std::string, double>>& d, const std::string& key) {
  for (const auto& [k, v] : d) {
    if (k == key) return v;
  }
  return -1.0;
}

}  // namespace

TEST_CASE("link-aware: exposed time counts the overlap per sync", "[link_aware]") {
  // tau t = 2 x 0.5 s covers one second of each sync.
  CHECK(exposed_link_seconds({3.0}, 2, 0.5) == Approx(2.0));
  CHECK(exposed_link_seconds({3.0, 0.5, 1.5}, 2, 0.5) == Approx(2.0 + 0.0 + 0.5));
  CHECK(exposed_link_seconds({3.0}, 0, 0.5) == Approx(3.0));
}

TEST_CASE("link-aware: the floor is the smallest H that reaches the target", "[link_aware]") {
  // u* = 0.9, t = 0.1 s, E = 6 s: H t / (H t + E) >= 0.9 <=> H >= 0.9 * 6 / (0.1 * 0.1) = 540.
  CHECK(utilisation_floor(0.9, 0.1, 6.0) == 540);
  const double u = 540 * 0.1 / (540 * 0.1 + 6.0);
  CHECK(u >= 0.9);
  CHECK(539 * 0.1 / (539 * 0.1 + 6.0) < 0.9);
  CHECK(utilisation_floor(0.5, 1.0, 2.5) == 3);  // 2.5 rounds up
  CHECK(utilisation_floor(0.9, 0.1, 0.0) == 0);  // nothing exposed: no floor
  CHECK(utilisation_floor(0.9, 0.0, 6.0) == 0);  // no compute measured yet
}

TEST_CASE("link-aware: a floor under the controller that follows the link", "[link_aware]") {
  const Config config =
      parse_config("", {"interval.H=20", "interval.target_utilisation=0.8", "run.steps=100000"});
  std::unique_ptr<IntervalController> c = make_interval_controller(config);
  CHECK(c->describe().find("link-aware") != std::string::npos);
  CHECK(c->first_interval() == 20);
  // A fast link: 20 steps of 0.1 s against 0.2 s of link is 91% already: H stays 20.
  CHECK(c->next_interval(round_of(20, 0.1, 0.2)) == 20);
  CHECK(value_of(c->decision(), "link_floor_H") == 8.0);  // 0.8 * 0.2 / (0.2 * 0.1)
  CHECK(value_of(c->decision(), "controller_H") == 20.0);
  // The link slows down ten-fold (e.g. wan.bandwidth_gbps changed on resume): H = 80.
  CHECK(c->next_interval(round_of(20, 0.1, 2.0)) == 80);
  CHECK(value_of(c->decision(), "exposed_link_s") == Approx(2.0));
  // And recovers: back to the controller's 20.
  CHECK(c->next_interval(round_of(80, 0.1, 0.2)) == 20);
}

TEST_CASE("link-aware: overlap and fragments count only the exposed part", "[link_aware]") {
  const Config config =
      parse_config("", {"interval.H=20", "interval.target_utilisation=0.8", "run.steps=100000",
                        "outer.overlap_steps=2", "outer.fragments=4"});
  std::unique_ptr<IntervalController> c = make_interval_controller(config);
  RoundStats s = round_of(20, 0.1, 0.5);
  // Four fragment syncs of 0.5 s, each overlapped by 2 x 0.1 s: E = 4 x 0.3 = 1.2 s,
  // H >= 0.8 x 1.2 / (0.2 x 0.1) = 48.
  s.sync_link_s = {0.5, 0.5, 0.5, 0.5};
  CHECK(c->next_interval(s) == 48);
}

TEST_CASE("link-aware: the floor never passes the run's length", "[link_aware]") {
  const Config config =
      parse_config("", {"interval.H=20", "interval.target_utilisation=0.99", "run.steps=500"});
  std::unique_ptr<IntervalController> c = make_interval_controller(config);
  CHECK(c->next_interval(round_of(20, 0.01, 100.0)) == 500);
}
