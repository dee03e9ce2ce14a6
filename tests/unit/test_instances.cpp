// Multi-instance training (AdLoCo's MIT): which two instances merge, the batch-weighted merge of
// values and AdamW moments, and the batch-weighted replica of a dc's instances.
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/optim/adamw.hpp"
#include "autoloco/train/model_instance.hpp"

using namespace autoloco;

namespace {

ModelInstance instance(const Config& c, int id, int64_t batch, float value, float m, float v,
                       int64_t steps) {
  ModelInstance inst;
  inst.id = id;
  inst.model = autoloco::make_decoder(c.model);
  inst.params = std::make_unique<FlatParams>(*inst.model);
  {
    torch::NoGradGuard no_grad;
    inst.params->values().fill_(value);
  }
  inst.optimizer = make_inner_optimizer(c.inner, *inst.params);
  const int64_t n = inst.params->numel();
  dynamic_cast<FlatAdamW&>(*inst.optimizer)
      .set_state(steps, torch::full({n}, m), torch::full({n}, v));
  inst.batch = make_batch_controller(c, 2);
  inst.batch->load_state({static_cast<double>(batch)});
  return inst;
}

Config tiny() {
  return parse_config("",
                      {"model.n_layer=1", "model.n_head=2", "model.d_model=8", "model.seq_len=8",
                       "batch.controller=adloco", "data.batch_size=4", "batch.instances=3"});
}

}  // namespace

TEST_CASE("merge_pair picks the two smallest batch demands and counts a missing one as its batch",
          "[instances]") {
  using P = std::pair<size_t, size_t>;
  CHECK(merge_pair({9.0, 3.0, 5.0}, {4, 4, 4}) == P{1, 2});
  CHECK(merge_pair({2.0, 3.0, 5.0}, {4, 4, 4}) == P{0, 1});
  CHECK(merge_pair({NAN, 6.0, 5.0}, {4, 4, 4}) == P{0, 2});   // NaN counts as 4
  CHECK(merge_pair({NAN, 6.0, 5.0}, {16, 4, 4}) == P{1, 2});  // NaN counts as 16
  CHECK(merge_pair({1.0, 1.0, 1.0}, {4, 4, 4}) == P{0, 1});   // ties: lower numbers first
}

TEST_CASE("merge_instances weighs values and AdamW moments by the batches and adds the batches",
          "[instances]") {
  const Config c = tiny();
  ModelInstance a = instance(c, 0, 4, 1.0F, 0.5F, 2.0F, 10);
  const ModelInstance b = instance(c, 2, 12, 5.0F, -1.5F, 6.0F, 12);
  a.demand = 3.0;
  merge_instances(a, b);
  // Weights 4/16 and 12/16.
  CHECK(a.params->values().min().item<float>() == Approx(0.25 * 1.0 + 0.75 * 5.0));
  CHECK(a.params->values().max().item<float>() == Approx(0.25 * 1.0 + 0.75 * 5.0));
  const auto& adamw = dynamic_cast<const FlatAdamW&>(*a.optimizer);
  CHECK(adamw.exp_avg().max().item<float>() == Approx(0.25 * 0.5 + 0.75 * -1.5));
  CHECK(adamw.exp_avg_sq().min().item<float>() == Approx(0.25 * 2.0 + 0.75 * 6.0));
  CHECK(adamw.step_count() == 12);
  CHECK(a.batch->plan().batch == 16);
  CHECK(a.id == 0);
  CHECK(std::isnan(a.demand));  // b had no answer
}

TEST_CASE("the dc's replica is its instances' batch-weighted mean", "[instances]") {
  const Config c = tiny();
  std::vector<ModelInstance> all;
  all.push_back(instance(c, 0, 4, 2.0F, 0.0F, 0.0F, 1));
  all.push_back(instance(c, 1, 8, -1.0F, 0.0F, 0.0F, 1));
  all.push_back(instance(c, 2, 4, 6.0F, 0.0F, 0.0F, 1));
  average_into_first(all);
  const double expected = (4 * 2.0 + 8 * -1.0 + 4 * 6.0) / 16.0;
  CHECK(all[0].params->values().min().item<float>() == Approx(expected));
  CHECK(all[0].params->values().max().item<float>() == Approx(expected));
  CHECK(all[1].params->values().max().item<float>() == -1.0F);  // the others are untouched
}

TEST_CASE("instances stream apart from every rank and instance", "[instances]") {
  // 2 members per dc: instance 0 reads as member 0/1 would, instance 1 as 2/3, ...
  CHECK(instance_stream_member(0, 1, 2) == 1);
  CHECK(instance_stream_member(1, 0, 2) == 2);
  CHECK(instance_stream_member(2, 1, 2) == 5);
}

TEST_CASE("config: several instances need the adaptive batch", "[instances][config]") {
  CHECK_THROWS_WITH(parse_config("", {"batch.instances=2"}), Catch::Contains("batch.instances"));
  CHECK_THROWS_WITH(parse_config("", {"batch.controller=adloco", "batch.merge_every=0"}),
                    Catch::Contains("batch.merge_every"));
  CHECK_NOTHROW(parse_config("", {"batch.controller=adloco", "batch.instances=4"}));
}
