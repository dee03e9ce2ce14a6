// The memory and link planner (train/memory_plan.hpp, plan_report.hpp): its classes worked out
// by hand for a small model, the sharded ones falling as ceil(P / R), the presets' totals from
// docs/sharding.md's formula, one sync's bytes and seconds on a known link, and the units of
// --device-memory.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "autoloco/comm/wire_format.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/model/model_specs.hpp"
#include "autoloco/train/memory_plan.hpp"
#include "autoloco/train/plan_report.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;

namespace {

// A GPT-2 of 2 blocks, d 16, 2 heads, 8 tokens, 32 ids: per block 12 d^2 + 13 d = 3280
// (attention 4 d^2 + 4 d, MLP 8 d^2 + 5 d, two LayerNorms 4 d), embeddings (32 + 8) d = 640,
// final LayerNorm 2 d = 32: P = 7232.
constexpr int64_t kSmallP = 7232;

Config small(const std::vector<std::string>& overrides = {}) {
  std::vector<std::string> all = {"model.arch=gpt2",   "model.n_layer=2",     "model.n_head=2",
                                  "model.d_model=16",  "model.seq_len=8",     "model.vocab_size=32",
                                  "data.batch_size=4", "outer.method=diloco", "outer.momentum=0.9"};
  all.insert(all.end(), overrides.begin(), overrides.end());
  return parse_config("", all);
}

int64_t ceil_div(int64_t a, int64_t b) {
  return (a + b - 1) / b;
}

}  // namespace

TEST_CASE("plan: a small model's classes on the cpu, worked out by hand", "[plan]") {
  const Config c = small();
  REQUIRE(parameter_count(c.model) == kSmallP);
  const MemoryClasses m = plan_memory(c, "none", 1, /*gpu=*/false);
  CHECK(m.parameters == 4 * kSmallP);
  CHECK(m.gradients == 4 * kSmallP);
  CHECK(m.optimizer == 12 * kSmallP);   // two moments and the flat kernel's denominator
  CHECK(m.outer_state == 8 * kSmallP);  // anchor and momentum
  CHECK(m.residuals == 0);
  CHECK(m.buffers == 4 * kSmallP + 4 * kSmallP);  // host staging of Δ, the Nesterov scratch
  // 2 layers x s b d (32 + 4 a s / d) = 2 x 8 x 4 x 16 x (32 + 4) at 16 bits; fp32 doubles it.
  CHECK(m.activations == 2 * 2 * 8 * 4 * 16 * 36);
  CHECK(m.host == 0);
  CHECK(m.total() == 36 * kSmallP + 73728);
  CHECK(m.device() == m.total());
}

TEST_CASE("plan: Muon keeps AdamW's moments and its scratch per matrix shape, by hand",
          "[plan][muon]") {
  const Config adamw = small();
  const Config muon = small({"inner.optimizer=muon"});
  const MemoryClasses a = plan_memory(adamw, "none", 1, false);
  const MemoryClasses m = plan_memory(muon, "none", 1, false);
  // The blocks' matrices of d = 16 have shapes 48 x 16 (qkv), 16 x 16 (proj), 64 x 16 (fc) and
  // 16 x 64 (proj): per shape the fp32 Nesterov input (rows cols) and X, Y (m n), A, B (m m) with
  // m = 16; fp32 on the CPU, bf16 on a GPU.
  // AdamW's flat denominator covers only what the matrices leave: P less the 2 blocks' 12 d^2.
  const int64_t shapes_rc = 48 * 16 + 16 * 16 + 64 * 16 + 16 * 64;
  const int64_t shapes_mm = 4 * 16 * 16;
  const int64_t matrices = 2 * 12 * 16 * 16;
  CHECK(m.optimizer ==
        a.optimizer - 4 * matrices + 4 * shapes_rc + 4 * (2 * shapes_rc + 2 * shapes_mm));
  // The fused kernel on a GPU keeps no denominator; Newton-Schulz runs in bf16 there.
  CHECK(plan_memory(muon, "none", 1, true).optimizer ==
        plan_memory(adamw, "none", 1, true).optimizer + 4 * shapes_rc +
            2 * (2 * shapes_rc + 2 * shapes_mm));
  CHECK(m.total() - m.optimizer == a.total() - a.optimizer);
}

TEST_CASE("plan: sharded classes fall as ceil(P / R) for R = 1, 2, 4 and 3", "[plan]") {
  const Config c = small({"outer.error_feedback=true", "outer.wire_dtype=int8"});
  for (int R : {1, 2, 4, 3}) {
    INFO("R = " << R);
    const int64_t S = ceil_div(kSmallP, R);
    const MemoryClasses none = plan_memory(c, "none", R, false);
    const MemoryClasses opt = plan_memory(c, "optimizer", R, false);
    const MemoryClasses grad = plan_memory(c, "gradients", R, false);
    for (const MemoryClasses* m : {&none, &opt, &grad}) {
      CHECK(m->parameters == 4 * kSmallP);
      CHECK(m->residuals == 4 * S);  // one member's shard in every mode
      CHECK(m->activations == none.activations);
    }
    CHECK(none.gradients == 4 * kSmallP);
    CHECK(none.optimizer == 12 * kSmallP);
    CHECK(none.outer_state == 8 * kSmallP);
    // Staging and the Nesterov scratch (the model is below its chunk): the outer state's size.
    CHECK(none.buffers == 8 * kSmallP);
    CHECK(opt.gradients == 4 * kSmallP);
    CHECK(opt.optimizer == 12 * S);
    CHECK(opt.outer_state == 8 * S);
    // Beyond the staging, a sharded R > 1 reduce-scatters through a scratch part and MPI's two
    // ring chunks, each the bucket's largest part (the whole model is one bucket here).
    const int64_t ring = R > 1 ? 3 * 4 * S : 0;
    CHECK(opt.buffers == 8 * S + ring);
    CHECK(grad.gradients == 4 * S);
    CHECK(grad.optimizer == 12 * S);
    CHECK(grad.outer_state == 8 * S);
    // Two buckets of the whole model; a dc of one rank keeps its gradient whole: none.
    CHECK(grad.buffers == 8 * S + ring + (R > 1 ? 2 * 4 * kSmallP : 0));
  }
  CHECK(ceil_div(kSmallP, 3) * 3 > kSmallP);  // R = 3 is the uneven case
}

// The small model's units: the embedding (32 + 8) d = 640, each block 3280, the head's final
// LayerNorm 32, which a tied head gathers with the embedding (672).
TEST_CASE("plan: full sharding and recompute on the small model, worked out by hand", "[plan]") {
  const Config c = small();
  CHECK(unit_numels(c.model) == std::vector<int64_t>{640, 3280, 3280, 32});
  for (int R : {2, 4, 3}) {
    INFO("R = " << R);
    const int64_t S = ceil_div(kSmallP, R);
    const MemoryClasses full = plan_memory(c, "full", R, false);
    const MemoryClasses grad = plan_memory(c, "gradients", R, false);
    CHECK(full.parameters == 4 * S);
    CHECK(full.gradients == 4 * S);
    CHECK(full.optimizer == grad.optimizer);
    CHECK(full.outer_state == grad.outer_state);
    // Staging and the Nesterov scratch; the scratch part and MPI's two ring chunks of the
    // largest unit's reduce-scatter; the two blocks gathered at once (6560) and a block's
    // gradient twice (as autograd returns it, and in its storage's layout).
    const int64_t chunk = ceil_div(3280, R);
    CHECK(full.buffers == 8 * S + 3 * 4 * chunk + 4 * (6560 + 2 * 3280));
    CHECK(full.activations == grad.activations);
  }
  // A dc of one rank has nothing to shard: full plans as none.
  CHECK(plan_memory(c, "full", 1, false).total() == plan_memory(c, "none", 1, false).total());
  // Recomputed blocks keep their inputs (s b d each) and one block's activations, in fp32 here.
  const MemoryClasses blocks = plan_memory(small({"model.recompute=blocks"}), "none", 1, false);
  CHECK(blocks.activations == 2 * (8 * 4 * 16 * 36 + 2 * 8 * 4 * 16 * 2));
  CHECK(blocks.activations < plan_memory(c, "none", 1, false).activations);
}

TEST_CASE("plan: what the config changes: sgd, local_sgd, ddp, instances, adloco, gpu", "[plan]") {
  CHECK(plan_memory(small({"inner.optimizer=sgd"}), "none", 1, false).optimizer == 0);
  CHECK(plan_memory(small({"outer.method=local_sgd"}), "none", 1, false).outer_state ==
        4 * kSmallP);
  CHECK(plan_memory(small({"outer.momentum=0", "outer.momentum_schedule=[\"10:0.9\"]"}), "none", 1,
                    false)
            .outer_state == 8 * kSmallP);
  const MemoryClasses ddp = plan_memory(small({"outer.method=ddp"}), "none", 2, false);
  CHECK(ddp.outer_state == 0);
  CHECK(ddp.buffers == 0);
  CHECK(plan_memory(small({"outer.method=ddp"}), "none", 2, true).buffers == 4 * kSmallP);

  // Two dcs: the inter-dc ring's receive chunk, and the packed send and receive buffers of the
  // chunk that carries the round's scalars: S / 2 values each (fp32 wire).
  const int64_t half = ceil_div(kSmallP, 2);
  CHECK(plan_memory(small(), "none", 1, false, 2).buffers ==
        plan_memory(small(), "none", 1, false).buffers + 3 * 4 * half);
  // The sparse wire instead keeps both dcs' encodings of the shard.
  const Config sparse =
      small({"outer.wire_topk=0.02", "outer.error_feedback=true", "outer.wire_dtype=int2"});
  const WireCodec sparse_wire{WireFormat::int2, 256, false, 0.02, 4096};
  CHECK(plan_memory(sparse, "none", 1, false, 2).buffers ==
        plan_memory(sparse, "none", 1, false).buffers +
            2 * static_cast<int64_t>(sparse_wire.encoded_bytes(kSmallP)));

  const Config adloco = small({"batch.controller=adloco", "batch.instances=3"});
  const MemoryClasses a = plan_memory(adloco, "gradients", 2, false);
  CHECK(a.parameters == 3 * 4 * kSmallP);
  // The test needs the whole gradient: stage 2 runs as stage 1 (effective_shard_mode).
  CHECK(a.gradients == 3 * 4 * kSmallP);
  CHECK(a.optimizer == 3 * 12 * ceil_div(kSmallP, 2));
  // staging, the Nesterov scratch and each instance's whole gradient sample: AdLoCo keeps the
  // gradient whole (no buckets)
  CHECK(a.buffers == 8 * ceil_div(kSmallP, 2) + 3 * 4 * kSmallP);
  // Stage 3 keeps the gradient's shard, and every member's own gradient on it as the sample
  // (R rows of S), filled through an all-to-all scratch of R parts of the largest unit instead of
  // the reduce-scatter's scratch and its two ring chunks.
  CHECK(plan_memory(adloco, "full", 2, false).gradients == 3 * 4 * ceil_div(kSmallP, 2));
  const MemoryClasses f = plan_memory(small({"batch.controller=adloco"}), "full", 2, false);
  const MemoryClasses f_fixed = plan_memory(small(), "full", 2, false);
  const int64_t U = largest_execution_unit(small().model);
  CHECK(f.buffers - f_fixed.buffers ==
        4 * 2 * ceil_div(kSmallP, 2) + 4 * 2 * ceil_div(U, 2) - (4 + 8) * ceil_div(U, 2));

  // A GPU: the fused AdamW keeps no denominator, a device snapshot joins the host staging, bf16
  // activations; the outer state on the host when outer.state_device says so.
  const MemoryClasses g = plan_memory(small(), "optimizer", 2, true);
  const int64_t S = ceil_div(kSmallP, 2);
  CHECK(g.optimizer == 8 * S);
  // and the reduce-scatter's scratch (NCCL: no ring), and the Nesterov scratch beside the outer
  // state (on the device for a model this small)
  CHECK(g.buffers == 8 * S + 4 * S + 4 * S);
  CHECK(g.activations == 2 * 8 * 4 * 16 * 36);
  CHECK(g.host == 4 * S);
  CHECK(plan_memory(small({"inner.adamw=flat"}), "optimizer", 2, true).optimizer == 12 * S);
  const MemoryClasses h = plan_memory(small({"outer.state_device=cpu"}), "optimizer", 2, true);
  CHECK(h.host == 4 * S + 8 * S + 4 * S);  // staging, outer state, its Nesterov scratch
  CHECK(h.device() == h.total() - 16 * S);
  CHECK(plan_memory(small({"run.precision=fp32"}), "none", 1, true).activations ==
        2 * g.activations);
  CHECK_THROWS_AS(plan_memory(small(), "parameters", 2, true), ConfigError);
}

TEST_CASE("plan: the gpt2 and llama-3-8b presets' totals from the formula", "[plan]") {
  // gpt2 on the cpu, 4 ranks per dc, shard gradients: 4 P + 4 S + 12 S + 8 S + 4 S + two
  // buckets of 2^22 floats and the reduce-scatter's scratch and ring chunks (3 x 2^22 / 4) +
  // activations 12 layers x 1024 x 8 x 768 x (32 + 4 x 12 x 1024 / 768) x 2.
  const Config gpt2 = parse_config("", {"model.preset=gpt2", "data.batch_size=8",
                                        "outer.momentum=0.9", "batch.controller=fixed"});
  const int64_t P2 = 124'439'808;
  REQUIRE(parameter_count(gpt2.model) == P2);
  const int64_t S2 = ceil_div(P2, 4);
  const int64_t act2 = int64_t{12} * 1024 * 8 * 768 * (32 + 64) * 2;
  const int64_t nesterov = 4 * (int64_t{1} << 22);  // the outer step's scratch, one chunk
  CHECK(plan_memory(gpt2, "gradients", 4, false).total() ==
        4 * P2 + 28 * S2 + 2 * 4 * (int64_t{1} << 22) + 3 * (int64_t{1} << 22) + nesterov + act2);
  CHECK(plan_memory(gpt2, "none", 4, false).total() == 32 * P2 + nesterov + act2);

  // llama-3-8b on a GPU, 8 ranks per dc: the outer state goes to the host above 2^30
  // parameters (outer.state_device auto). One sequence of 2048 tokens at bf16:
  // 32 layers x 2048 x 4096 x (32 + 4 x 32 x 2048 / 4096) bytes.
  const Config llama =
      parse_config("", {"model.preset=llama-3-8b", "run.device=cuda", "data.batch_size=1",
                        "outer.momentum=0.9", "batch.controller=fixed", "outer.state_device=auto"});
  const int64_t P8 = 8'030'261'248;
  REQUIRE(parameter_count(llama.model) == P8);
  const int64_t S8 = ceil_div(P8, 8);
  const int64_t act8 = 25'769'803'776;
  const MemoryClasses none = plan_memory(llama, "none", 8, true);
  CHECK(none.activations == act8);
  CHECK(none.total() == 4 * P8 + 4 * P8 + 8 * P8 + 8 * P8 + 8 * P8 + nesterov + act8);
  CHECK(none.host == 8 * P8 + 4 * P8 + nesterov);  // outer state, host staging, scratch
  const MemoryClasses opt = plan_memory(llama, "optimizer", 8, true);
  // The reduce-scatter's scratch: the bucket's part, 2^22 / 8 floats (NCCL: no ring chunks).
  const int64_t scratch8 = 4 * (int64_t{1} << 22) / 8;
  CHECK(opt.total() == 8 * P8 + 8 * S8 + 8 * S8 + 8 * S8 + scratch8 + nesterov + act8);
  CHECK(opt.device() == 8 * P8 + 8 * S8 + 4 * S8 + scratch8 + act8);
  const MemoryClasses grad = plan_memory(llama, "gradients", 8, true);
  CHECK(grad.total() == 4 * P8 + 4 * S8 + 8 * S8 + 8 * S8 + 8 * S8 + 2 * 4 * (int64_t{1} << 22) +
                            scratch8 + nesterov + act8);
}

TEST_CASE("plan: one fp32 sync between 2 dcs of one rank on 1 Gbit/s, 50 ms", "[plan]") {
  // 12 scalars (8 + 2 per dc) ride with chunk 0: the ring's two messages are 3616 floats
  // (+ 96 bytes of scalars in chunk 0's), each sent once per phase, two phases.
  const Config c = small({"wan.bandwidth_gbps=1", "wan.latency_ms=50"});
  const LinkPlan p = plan_link(c, 2);
  CHECK(p.dcs == 2);
  CHECK(p.shard_values == kSmallP);
  CHECK(p.pieces == 1);
  CHECK(p.message_bytes == 4 * kSmallP + 96);
  CHECK(p.sent_bytes == 4 * 3616 + 96 + 4 * 3616);
  CHECK(p.seconds == Approx(2 * 0.05 + 2.0 * (4 * 3616 + 96) / 1.25e8).epsilon(1e-12));
  // Four members of 2 dcs share the dc's link: a quarter of the values each, four times the
  // bytes at once.
  const LinkPlan q = plan_link(small({"topology.ranks_per_dc=4"}), 8);
  CHECK(q.shard_values == kSmallP / 4);
  CHECK(q.message_bytes == 4 * (4 * kSmallP / 4 + 96));
  CHECK(q.seconds == Approx(2 * 0.05 + 4 * 2.0 * (4 * 904 + 96) / 1.25e8).epsilon(1e-12));
  // One dc: nothing on the link.
  CHECK(plan_link(c, 1).seconds == 0.0);
  CHECK(plan_link(c, 1).message_bytes == 0);
  CHECK_THROWS_AS(plan_link(small({"topology.ranks_per_dc=4"}), 6), ConfigError);
  // Fragments: each sync a quarter of the model.
  CHECK(plan_link(small({"outer.fragments=4"}), 2).shard_values == kSmallP / 4);
}

TEST_CASE("plan: compute utilisation H t / (H t + exposed)", "[plan]") {
  CHECK(planned_utilisation(20, 0.1, 1, 0.5, 0) == Approx(2.0 / 2.5));
  CHECK(planned_utilisation(20, 0.1, 1, 0.5, 2) == Approx(2.0 / 2.3));
  CHECK(planned_utilisation(20, 0.1, 1, 0.5, 5) == 1.0);
  CHECK(planned_utilisation(20, 0.1, 4, 0.2, 1) == Approx(2.0 / 2.4));
}

TEST_CASE("plan: --device-memory units, and a wrong one names the option", "[plan]") {
  CHECK(parse_byte_size("141GB", "--device-memory") == 141'000'000'000);
  CHECK(parse_byte_size("80 GiB", "--device-memory") == int64_t{80} << 30);
  CHECK(parse_byte_size("512MiB", "--device-memory") == int64_t{512} << 20);
  CHECK(parse_byte_size("1.5TB", "--device-memory") == 1'500'000'000'000);
  CHECK(parse_byte_size("4096", "--device-memory") == 4096);
  for (const char* bad : {"80GX", "80 gb", "GB", "", "-1GB", "0", "1e30GB"}) {
    INFO(bad);
    CHECK_THROWS_WITH(parse_byte_size(bad, "--device-memory"), Catch::Contains("--device-memory"));
  }
  CHECK(format_bytes(512) == "512 B");
  CHECK(format_bytes(1536) == "1.50 KiB");
  CHECK(format_bytes(int64_t{3} << 30) == "3.00 GiB");
  CHECK(format_bytes(int64_t{200} << 30) == "200.0 GiB");
  const Config c = small({"topology.ranks_per_dc=4"});
  CHECK(parse_plan_world("8", c) == 8);
  CHECK_THROWS_WITH(parse_plan_world("6", c), Catch::Contains("topology.ranks_per_dc (4)"));
  CHECK_THROWS_WITH(parse_plan_world("0", c), Catch::Contains("--world"));
}
