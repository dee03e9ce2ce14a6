// The interval controllers on scripted sequences of round statistics: bounds, the direction of
// each rule's response, warm-up, the round budget, and state round trips (what checkpoints use).
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/sched/autoloco_interval.hpp"
#include "autoloco/sched/interval_controller.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

// A config with inner warm-up `warmup` and the given overrides.
Config config_with(std::vector<std::string> overrides, int64_t warmup = 0) {
  overrides.push_back("inner.warmup_steps=" + std::to_string(warmup));
  return parse_config("", overrides);
}

// The statistics of a round of H steps ending at `step` whose per-step signal-to-noise is q.
RoundStats round_with_q(int64_t round, int64_t step, int64_t H, double q) {
  RoundStats s;
  s.round = round;
  s.step = step;
  s.H = H;
  s.dcs = 4;
  s.rho = q * H / (1.0 + q * H);  // inverts q = ρ / ((1 − ρ) H)
  s.loss = 2.0;
  s.lr_sum = 1e-3 * H;
  return s;
}

RoundStats round_with_lr_loss(int64_t round, int64_t step, int64_t H, double lr, double loss) {
  RoundStats s = round_with_q(round, step, H, 0.03);
  s.lr_sum = lr * H;
  s.loss = loss;
  return s;
}

// Feeds `q_of(round)` for `rounds` rounds, each as long as the controller asked; returns the H's.
template <class F>
std::vector<int64_t> drive(IntervalController& c, int rounds, F q_of, int64_t start_step = 0) {
  std::vector<int64_t> hs;
  int64_t step = start_step;
  int64_t H = c.first_interval();
  for (int k = 1; k <= rounds; ++k) {
    step += H;
    hs.push_back(H);
    H = c.next_interval(round_with_q(k, step, H, q_of(k, H)));
  }
  hs.push_back(H);
  return hs;
}

}  // namespace

TEST_CASE("stats: q inverts rho and is NaN without agreement", "[sched]") {
  const RoundStats s = round_with_q(1, 20, 20, 0.045);
  CHECK(s.q() == Approx(0.045));
  RoundStats none;
  none.H = 20;
  CHECK(std::isnan(none.q()));
  CHECK(s.mean_lr() == Approx(1e-3));
}

TEST_CASE("schedule: H by the step at which the round starts", "[sched]") {
  auto c = make_interval_controller(config_with({"interval.controller=schedule", "interval.H=25",
                                                 "interval.schedule=[\"250:10\", \"800:40\"]"}));
  CHECK(c->name() == "schedule");
  CHECK(c->first_interval() == 25);
  CHECK(c->next_interval(round_with_q(1, 225, 25, 0.03)) == 25);
  CHECK(c->next_interval(round_with_q(2, 250, 25, 0.03)) == 10);
  CHECK(c->next_interval(round_with_q(3, 800, 10, 0.03)) == 40);
  CHECK(c->state().empty());
}

TEST_CASE("adacomm: shorter as the loss falls, longer as the lr decays, within bounds", "[sched]") {
  auto c = make_interval_controller(config_with({"interval.controller=adacomm"}, 50));
  CHECK(c->first_interval() == 20);
  // Warm-up: H_0 whatever the statistics.
  CHECK(c->next_interval(round_with_lr_loss(1, 40, 20, 1e-4, 9.0)) == 20);
  // The first round after warm-up is the reference: H_0.
  CHECK(c->next_interval(round_with_lr_loss(2, 60, 20, 3e-3, 4.0)) == 20);
  // Loss quartered at the same lr: H halves (sqrt).
  CHECK(c->next_interval(round_with_lr_loss(3, 80, 20, 3e-3, 1.0)) == 10);
  // Loss unchanged, lr quartered: H doubles.
  CHECK(c->next_interval(round_with_lr_loss(4, 100, 20, 0.75e-3, 4.0)) == 40);
  // Far outside: clamped to [10, 80].
  CHECK(c->next_interval(round_with_lr_loss(5, 120, 20, 3e-3, 0.01)) == 10);
  CHECK(c->next_interval(round_with_lr_loss(6, 140, 20, 1e-6, 4.0)) == 80);
  // The reference point survives a state round trip.
  auto d = make_interval_controller(config_with({"interval.controller=adacomm"}, 50));
  d->load_state(c->state());
  CHECK(d->next_interval(round_with_lr_loss(7, 160, 20, 0.75e-3, 4.0)) == 40);
  CHECK_THROWS_AS(d->load_state({1.0}), CheckpointError);
}

TEST_CASE("qsr: H grows as the inverse square of the lr, from H_0 to H_max", "[sched]") {
  auto c = make_interval_controller(
      config_with({"interval.controller=qsr", "interval.qsr_alpha=0.01"}, 50));
  CHECK(c->next_interval(round_with_lr_loss(1, 20, 20, 1e-5, 3.0)) == 20);   // warm-up
  CHECK(c->next_interval(round_with_lr_loss(2, 100, 20, 3e-3, 3.0)) == 20);  // (0.01/3e-3)² = 11
  CHECK(c->next_interval(round_with_lr_loss(3, 200, 20, 2e-3, 3.0)) == 25);
  CHECK(c->next_interval(round_with_lr_loss(4, 300, 25, 1.25e-3, 3.0)) == 64);
  CHECK(c->next_interval(round_with_lr_loss(5, 400, 64, 1e-4, 3.0)) == 80);
  CHECK(c->next_interval(round_with_lr_loss(6, 500, 80, 0.0, 3.0)) == 80);
  int64_t last = 0;
  for (double lr = 3e-3; lr > 1e-4; lr *= 0.9) {
    const int64_t H = c->next_interval(round_with_lr_loss(7, 600, 20, lr, 3.0));
    CHECK(H >= last);  // a decaying lr never shortens the interval
    CHECK(H <= 80);
    last = H;
  }
}

TEST_CASE("autoloco: grows while q is above q*, shrinks below band q*, holds after a change",
          "[sched]") {
  auto c = make_interval_controller(
      config_with({"interval.controller=autoloco", "interval.q_target=0.03", "interval.smoothing=1",
                   "interval.hold_rounds=2"}));
  CHECK(c->first_interval() == 20);
  // q above q*: ×1.25, then two rounds of hold, then ×1.25 again.
  const auto up = drive(*c, 5, [](int, int64_t) { return 0.05; });
  CHECK(up == std::vector<int64_t>{20, 25, 25, 25, 31, 31});
  // q below 0.8 q*: ×0.8.
  auto d = make_interval_controller(config_with(
      {"interval.controller=autoloco", "interval.q_target=0.03", "interval.smoothing=1"}));
  CHECK(d->next_interval(round_with_q(1, 20, 40, 0.01)) == 32);
  // Inside the dead band [0.8 q*, q*]: no change.
  auto e = make_interval_controller(config_with(
      {"interval.controller=autoloco", "interval.q_target=0.03", "interval.smoothing=1"}));
  CHECK(e->next_interval(round_with_q(1, 20, 40, 0.027)) == 40);
}

TEST_CASE("autoloco: bounded, no decisions in warm-up, and negative feedback settles", "[sched]") {
  auto c = make_interval_controller(config_with(
      {"interval.controller=autoloco", "interval.q_target=0.03", "interval.hold_rounds=0"}, 100));
  // Warm-up rounds (ending at or before step 100) keep H_0 however strong the signal.
  CHECK(c->next_interval(round_with_q(1, 20, 20, 1.0)) == 20);
  CHECK(c->next_interval(round_with_q(5, 100, 20, 1.0)) == 20);
  // Extreme signals for many rounds: never outside [10, 80].
  const auto hi = drive(
      *c, 30, [](int, int64_t) { return 10.0; }, 100);
  for (int64_t H : hi)
    CHECK((H >= 10 && H <= 80));
  CHECK(hi.back() == 80);
  const auto lo = drive(
      *c, 30, [](int, int64_t) { return 1e-4; }, 3000);
  CHECK(lo.back() == 10);
  // A q that falls with H like the real one (q = 0.6 / H) settles where q ≈ q*, H ≈ 20–25.
  auto f = make_interval_controller(
      config_with({"interval.controller=autoloco", "interval.q_target=0.03", "interval.H=60"}));
  const auto settle = drive(*f, 40, [](int, int64_t H) { return 0.6 / static_cast<double>(H); });
  CHECK(settle.back() >= 20);
  CHECK(settle.back() <= 25);
}

TEST_CASE("autoloco: q_target 0 sets q* from the first rounds after warm-up", "[sched]") {
  AutoLoCoInterval c(config_with({"interval.controller=autoloco", "interval.q_target=0",
                                  "interval.q_auto_rounds=3", "interval.q_auto_ratio=0.5"})
                         .interval,
                     0);
  CHECK(c.next_interval(round_with_q(1, 20, 20, 0.02)) == 20);
  CHECK(c.next_interval(round_with_q(2, 40, 20, 0.04)) == 20);
  CHECK(c.q_target() == 0.0);
  CHECK(c.next_interval(round_with_q(3, 60, 20, 0.06)) == 20);
  CHECK(c.q_target() == Approx(0.02));  // 0.5 × mean(0.02, 0.04, 0.06)
  CHECK(c.next_interval(round_with_q(4, 80, 20, 0.06)) > 20);
}

TEST_CASE("autoloco: a mean q at or below 0 sets no q* and the next rounds try again", "[sched]") {
  // Before, q* = 0.5 × mean(q) ≤ 0 stood as the target: the controller waited for ever,
  // silently a fixed interval.
  AutoLoCoInterval c(config_with({"interval.controller=autoloco", "interval.q_target=0",
                                  "interval.q_auto_rounds=3", "interval.q_auto_ratio=0.5"})
                         .interval,
                     0);
  for (int k = 1; k <= 3; ++k)
    CHECK(c.next_interval(round_with_q(k, 20 * k, 20, -0.01)) == 20);
  CHECK(c.q_target() == 0.0);
  CHECK(c.unset_windows() == 1);
  // The next window, of agreeing rounds alone, sets q*; then the rule decides.
  CHECK(c.next_interval(round_with_q(4, 80, 20, 0.02)) == 20);
  CHECK(c.next_interval(round_with_q(5, 100, 20, 0.04)) == 20);
  CHECK(c.next_interval(round_with_q(6, 120, 20, 0.06)) == 20);
  CHECK(c.q_target() == Approx(0.02));  // 0.5 × mean(0.02, 0.04, 0.06), no negatives in it
  CHECK(c.unset_windows() == 1);
  CHECK(c.next_interval(round_with_q(7, 140, 20, 0.06)) > 20);
}

TEST_CASE("autoloco: a controller restored from state() decides like the original", "[sched]") {
  const Config cfg = config_with({"interval.controller=autoloco", "interval.q_target=0"}, 40);
  auto a = make_interval_controller(cfg);
  auto q_of = [](int k, int64_t H) { return (0.9 + 0.2 * std::sin(k)) / static_cast<double>(H); };
  int64_t step = 0;
  int64_t H = a->first_interval();
  for (int k = 1; k <= 12; ++k) {
    step += H;
    H = a->next_interval(round_with_q(k, step, H, q_of(k, H)));
  }
  auto b = make_interval_controller(cfg);
  b->load_state(a->state());
  CHECK(b->state() == a->state());
  int64_t Ha = H;
  int64_t Hb = H;
  for (int k = 13; k <= 40; ++k) {
    step += Ha;
    Ha = a->next_interval(round_with_q(k, step, Ha, q_of(k, Ha)));
    Hb = b->next_interval(round_with_q(k, step, Hb, q_of(k, Hb)));
    REQUIRE(Ha == Hb);
  }
  CHECK_THROWS_AS(b->load_state({}), CheckpointError);
}

TEST_CASE("round budget: the run ends within max_rounds whatever the controller asks", "[sched]") {
  for (const std::string controller : {"fixed", "autoloco", "qsr", "adacomm"}) {
    CAPTURE(controller);
    auto c = make_interval_controller(
        config_with({"interval.controller=" + controller, "interval.H=10", "interval.q_target=1",
                     "interval.max_rounds=37", "run.steps=1000"}));
    int64_t step = 0;
    int64_t rounds = 0;
    int64_t H = c->first_interval();
    while (step < 1000) {
      const int64_t len = std::min(H, 1000 - step);  // the trainer ends the last round early
      step += len;
      ++rounds;
      H = c->next_interval(round_with_lr_loss(rounds, step, len, 1e-3, 2.0));
    }
    CHECK(rounds <= 37);
    // fixed H 10 asks for 100 rounds: the budget lengthens them only as much as needed.
    if (controller == "fixed") CHECK(rounds >= 36);
  }
  // A budget the controller meets anyway changes nothing.
  auto c = make_interval_controller(config_with({"interval.H=20", "interval.max_rounds=100"}));
  CHECK(c->first_interval() == 20);
  CHECK(c->next_interval(round_with_q(1, 20, 20, 0.03)) == 20);
}

TEST_CASE("interval config: bad values name the key", "[sched][config]") {
  CHECK_THROWS_WITH(parse_config("", {"interval.controller=magic"}),
                    Catch::Contains("interval.controller"));
  CHECK_THROWS_WITH(parse_config("", {"interval.controller=autoloco", "interval.H=5"}),
                    Catch::Contains("interval.H"));
  CHECK_THROWS_WITH(parse_config("", {"interval.H_max=5"}), Catch::Contains("interval.H_max"));
  CHECK_THROWS_WITH(parse_config("", {"interval.controller=schedule"}),
                    Catch::Contains("interval.schedule"));
  CHECK_THROWS_WITH(parse_config("", {"interval.schedule=[\"10:2.5\"]"}),
                    Catch::Contains("whole H"));
  CHECK_THROWS_WITH(parse_config("", {"interval.grow=0.9"}), Catch::Contains("interval.grow"));
  CHECK_THROWS_WITH(parse_config("", {"interval.shrink=1.2"}), Catch::Contains("interval.shrink"));
  CHECK_THROWS_WITH(parse_config("", {"outer.correction=sometimes"}),
                    Catch::Contains("outer.correction"));
  CHECK_THROWS_WITH(parse_config("", {"outer.method=local_sgd", "outer.correction=momentum"}),
                    Catch::Contains("outer.correction"));
}
