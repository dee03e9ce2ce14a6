// Streaming DiLoCo's fragments: which parameters each fragment holds (whole blocks strided,
// the rest filling the lightest, every element exactly once), gather and scatter, and when each
// fragment syncs.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "../support/small_model.hpp"
#include "autoloco/model/gpt.hpp"
#include "autoloco/optim/flat_params.hpp"
#include "autoloco/optim/fragment_plan.hpp"
#include "autoloco/sched/fragment_schedule.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

ModelConfig model_with_layers(int64_t layers) {
  ModelConfig c = test::small_model_config();
  c.n_layer = layers;
  return c;
}

// Every element of the flat buffer belongs to exactly one fragment.
void check_partition(const FragmentPlan& plan, int64_t numel) {
  std::vector<int> owners(static_cast<size_t>(numel), 0);
  int64_t total = 0;
  for (size_t p = 0; p < plan.size(); ++p) {
    int64_t sum = 0;
    int64_t previous_end = -1;
    for (const FlatRange& r : plan[p].ranges) {
      CHECK(r.offset > previous_end);  // ascending, merged
      previous_end = r.offset + r.numel;
      for (int64_t i = r.offset; i < r.offset + r.numel; ++i)
        ++owners[static_cast<size_t>(i)];
      sum += r.numel;
    }
    CHECK(sum == plan[p].numel);
    total += sum;
  }
  CHECK(total == numel);
  CHECK(std::all_of(owners.begin(), owners.end(), [](int n) { return n == 1; }));
}

}  // namespace

TEST_CASE("fragments: blocks strided over the fragments, the rest filling the lightest",
          "[fragments]") {
  torch::manual_seed(0);
  GPT model(model_with_layers(4));
  FlatParams params(*model);
  const FragmentPlan plan(params.slices(), 2);
  REQUIRE(plan.size() == 2);
  CHECK(plan[0].blocks == std::vector<int64_t>{0, 2});
  CHECK(plan[1].blocks == std::vector<int64_t>{1, 3});
  check_partition(plan, params.numel());
  // Equal blocks and the embeddings split by rows: within one row (d_model) of half each.
  const auto half = static_cast<double>(params.numel()) / 2.0;
  INFO(plan.describe()[0] << "\n" << plan.describe()[1]);
  CHECK(std::abs(static_cast<double>(plan[0].numel) - half) <= 64.0);
  CHECK(plan.describe()[0].find("blocks 0,2") != std::string::npos);
}

TEST_CASE("fragments: uneven blocks are balanced by the embeddings", "[fragments]") {
  GPT model(model_with_layers(3));
  FlatParams params(*model);
  const FragmentPlan plan(params.slices(), 2);
  check_partition(plan, params.numel());
  CHECK(plan[0].blocks == std::vector<int64_t>{0, 2});
  // Fragment 1 has one block and takes all of the embeddings: the two differ by less than a block.
  int64_t block = 0;
  for (const ParamSlice& s : params.slices()) {
    if (s.name.rfind("blocks.0.", 0) == 0) block += s.numel;
  }
  CHECK(plan[1].numel - plan[0].numel > -block);
  CHECK(plan[0].extra.empty());
}

TEST_CASE("fragments: more fragments than blocks still cover every parameter once", "[fragments]") {
  GPT model(model_with_layers(2));
  FlatParams params(*model);
  const FragmentPlan plan(params.slices(), 3);
  check_partition(plan, params.numel());
  CHECK(plan[2].blocks.empty());
  CHECK(plan[2].numel > 0);
}

TEST_CASE("fragments: one fragment is the whole buffer, and gather/scatter/mix round-trip",
          "[fragments]") {
  GPT model(model_with_layers(4));
  FlatParams params(*model);
  const FragmentPlan whole(params.numel());
  CHECK(whole.whole());
  // A view of the buffer itself: no copy for plain DiLoCo.
  CHECK(whole.gather(params.values(), 0).data_ptr() == params.values().data_ptr());

  const FragmentPlan plan(params.slices(), 3);
  const torch::Tensor flat = torch::arange(params.numel(), torch::kFloat);
  torch::Tensor rebuilt = torch::zeros_like(flat);
  for (size_t p = 0; p < plan.size(); ++p) {
    const torch::Tensor part = plan.gather(flat, p);
    CHECK(part.numel() == plan[p].numel);
    plan.scatter(part, p, rebuilt);
  }
  CHECK(torch::equal(rebuilt, flat));
  torch::Tensor mixed = flat.clone();
  plan.mix(torch::zeros({plan[1].numel}), 1, 0.5, mixed);
  CHECK(torch::equal(plan.gather(mixed, 1), plan.gather(flat, 1) * 0.5));
  CHECK(torch::equal(plan.gather(mixed, 0), plan.gather(flat, 0)));
}

TEST_CASE("fragment schedule: staggered offsets, fragment 0 at the cycle's end", "[fragments]") {
  CHECK(fragment_offset(0, 4, 20) == 20);
  CHECK(fragment_offset(1, 4, 20) == 5);
  CHECK(fragment_offset(3, 4, 20) == 15);
  CHECK(fragment_offset(1, 3, 10) == 3);
  CHECK(fragment_offset(2, 3, 10) == 6);

  FragmentSchedule schedule(4);
  std::vector<std::pair<int64_t, int64_t>> syncs;  // (step, fragment)
  int64_t H = 8;
  for (int64_t step = 1; step <= 20; ++step) {
    if (step == 9) H = 12;  // a new H from the next cycle on
    for (const int64_t f : schedule.due(step, H, step == 20)) {
      syncs.emplace_back(step, f);
      schedule.synced(f, step);
    }
  }
  const std::vector<std::pair<int64_t, int64_t>> expected = {
      {2, 1},  {4, 2},  {6, 3},  {8, 0},  // H 8: 8/4 apart
      {11, 1}, {14, 2}, {17, 3},          // H 12 from step 8: 3 apart
      {20, 1}, {20, 2}, {20, 3}, {20, 0}  // the run's end: every fragment, fragment 0 last
  };
  CHECK(syncs == expected);
  CHECK(schedule.cycle_start() == 20);
}

TEST_CASE("fragment schedule: one fragment is DiLoCo's round", "[fragments]") {
  FragmentSchedule schedule(1);
  std::vector<int64_t> steps;
  for (int64_t step = 1; step <= 10; ++step) {
    for (const int64_t f : schedule.due(step, 4, step == 10)) {
      CHECK(f == 0);
      steps.push_back(step);
      schedule.synced(f, step);
    }
  }
  CHECK(steps == std::vector<int64_t>{4, 8, 10});
}

TEST_CASE("fragment schedule: restoring another number of fragments is refused", "[fragments]") {
  FragmentSchedule schedule(2);
  CHECK_THROWS_AS(schedule.restore(0, {0, 0, 0}), CheckpointError);
  schedule.restore(8, {6, 8});
  CHECK(schedule.due(11, 8, false).empty());
  CHECK(schedule.due(12, 8, false) == std::vector<int64_t>{1});
}

// topology.shard splits each fragment's vector over a dc's members: a member's shard of it
// maps to runs of the flat buffer, and gather/scatter/mix of that shard touch only those.
TEST_CASE("fragments: a shard of a fragment's vector maps to its flat ranges",
          "[fragments][shard]") {
  torch::nn::Sequential net(torch::nn::Linear(4, 4), torch::nn::Linear(4, 2));
  FlatParams flat(*net);
  const FragmentPlan whole(flat.numel());
  CHECK(whole.ranges(0, 3, 5).size() == 1);
  CHECK(whole.ranges(0, 3, 5)[0].offset == 3);
  CHECK(whole.ranges(0, 3, 5)[0].numel == 5);
  CHECK(whole.ranges(0, 3, 0).empty());

  torch::Tensor values = torch::arange(flat.numel(), torch::kFloat);
  const torch::Tensor part = whole.gather(values, 0, 2, 4);
  CHECK(torch::equal(part, torch::arange(2, 6, torch::kFloat)));
  torch::Tensor target = torch::zeros_like(values);
  whole.scatter(part, 0, 2, target);
  CHECK(target.sum().item<float>() == 2.0F + 3.0F + 4.0F + 5.0F);
  whole.mix(torch::full({4}, 10.0F), 0, 2, 0.5, target);
  CHECK(target[2].item<float>() == 6.0F);  // 0.5 x 2 + 0.5 x 10
  CHECK(target[6].item<float>() == 0.0F);
}
