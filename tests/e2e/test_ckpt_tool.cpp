// End to end: autoloco-ckpt on the checkpoints of a short 2-dc diloco run. ls lists them as
// valid, newest first; verify passes them and fails a copy whose replica bytes were flipped,
// naming the file; diff finds the differences between two steps and none between a checkpoint
// and itself; export writes each parameter with its shape and the anchor's values. And on a
// sharded run's checkpoint (format 2: the anchor, outer momentum and AdamW moments as pieces of
// the rank files): verify and ls pass it, diff against the unsharded run's finds those vectors
// identical, and export writes the unsharded run's anchor.
#include <sys/wait.h>
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"
#include "autoloco/ckpt/h5_file.hpp"

namespace fs = std::filesystem;
using autoloco::test::read_text;

namespace {

// Runs configs/diloco.yaml under mpiexec -n 2 on the tiny corpus in dir/data with `sets` (" --set
// KEY=VALUE ..."), into the run directory dir/runs/<name>, which it returns; its output goes to
// `log`.
std::string launch_train(const std::string& dir, const std::string& name, const std::string& sets,
                         const std::string& log) {
  const std::string config = std::string(AUTOLOCO_SOURCE_DIR) + "/configs/diloco.yaml";
  const std::string command =
      std::string(AUTOLOCO_MPIEXEC) + " -n 2 --oversubscribe --allow-run-as-root --bind-to none " +
      AUTOLOCO_TRAIN_EXE + " " + config + sets + " --set data.train=" + dir +
      "/data/train_*.bin --set data.val=" + dir + "/data/val_*.bin --set run.out_dir=" + dir +
      "/runs --set run.name=" + name + " > " + log + " 2>&1";
  INFO(command << "\n" << read_text(log));
  REQUIRE(std::system(command.c_str()) == 0);
  return dir + "/runs/" + name;
}

// Trains 12 steps on 2 dcs of 1 rank with H = 2 and a checkpoint every 4 steps: step_4, step_8
// and step_12 under the returned run directory.
std::string train_run(const std::string& dir) {
  autoloco::test::write_tiny_corpus(dir + "/data");
  return launch_train(dir, "ck",
                      " --set model.n_layer=2 --set model.d_model=32 --set model.n_head=2"
                      " --set model.seq_len=32 --set run.steps=12 --set run.eval_every=0"
                      " --set run.log_every=4 --set inner.warmup_steps=2 --set inner.lr=0.01"
                      " --set data.batch_size=4 --set interval.H=2 --set ckpt.every_steps=4"
                      " --set ckpt.keep_last=5",
                      dir + "/train.log");
}

// Trains 4 steps on 1 dc of 2 ranks with topology.shard `shard`, H = 2, no clipping (so that
// every shard mode trains bitwise alike: docs/sharding.md, Equal results) and a checkpoint every
// 3 steps: step_3, in the middle of the second round, under the returned run directory.
// `model` replaces the small GPT's model keys (another architecture's, say); the run is named
// `tag` + the shard mode.
std::string train_sharded_run(const std::string& dir, const std::string& shard,
                              const std::string& model =
                                  " --set model.n_layer=1 --set model.d_model=16"
                                  " --set model.n_head=2 --set model.seq_len=16",
                              const std::string& tag = "") {
  return launch_train(dir, tag + shard,
                      model +
                          " --set run.steps=4 --set run.eval_every=0"
                          " --set run.log_every=2 --set inner.warmup_steps=1 --set inner.lr=0.01"
                          " --set inner.grad_clip=0 --set data.batch_size=2 --set interval.H=2"
                          " --set ckpt.every_steps=3 --set topology.ranks_per_dc=2"
                          " --set topology.shard=" +
                          shard,
                      dir + "/train-" + tag + shard + ".log");
}

struct ToolResult {
  int code = -1;
  std::string out;
  std::string err;
};

// Runs autoloco-ckpt with `args`; its output goes through files in `dir`.
ToolResult ckpt_tool(const std::string& dir, const std::string& args) {
  const std::string out = dir + "/tool.out";
  const std::string err = dir + "/tool.err";
  const std::string command =
      std::string(AUTOLOCO_CKPT_EXE) + " " + args + " > " + out + " 2> " + err;
  ToolResult r;
  r.code = autoloco::test::run_command(command);
  r.out = read_text(out);
  r.err = read_text(err);
  return r;
}

// The line of `text` that starts with `prefix` followed by a space, or "".
std::string line_starting(const std::string& text, const std::string& prefix) {
  std::istringstream lines(text);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind(prefix + " ", 0) == 0) return line;
  }
  return "";
}

// Flips 32 bytes in the middle of dc_0.h5's replica/values data, found by its own bytes.
void corrupt_replica(const std::string& checkpoint) {
  const std::string path = checkpoint + "/dc_0.h5";
  std::vector<float> values;
  {
    const autoloco::H5Reader reader(path);
    values = reader.read_f32("replica/values");
  }
  REQUIRE(values.size() > 16);
  const std::string needle(reinterpret_cast<const char*>(values.data() + values.size() / 2), 32);
  std::string bytes = read_text(path);
  const size_t at = bytes.find(needle);
  REQUIRE(at != std::string::npos);
  REQUIRE(bytes.rfind(needle) == at);  // one place only: the test flips a known region
  for (size_t i = at; i < at + needle.size(); ++i)
    bytes[i] = static_cast<char>(bytes[i] ^ 0xff);
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

struct Param {
  std::string name;
  std::vector<int64_t> shape;
  int64_t offset = 0;
  int64_t numel = 1;
};

std::vector<Param> parameters(const std::string& table) {
  static const std::regex line_re(R"(^(\S+) \[([0-9,]*)\] ([0-9]+)$)");
  std::vector<Param> out;
  std::istringstream lines(table);
  for (std::string line; std::getline(lines, line);) {
    std::smatch m;
    REQUIRE(std::regex_match(line, m, line_re));
    Param p;
    p.name = m[1].str();
    p.offset = std::stoll(m[3].str());
    std::istringstream dims(m[2].str());
    for (std::string d; std::getline(dims, d, ',');) {
      p.shape.push_back(std::stoll(d));
      p.numel *= p.shape.back();
    }
    out.push_back(p);
  }
  return out;
}

}  // namespace

TEST_CASE("e2e: autoloco-ckpt ls and verify find a damaged replica", "[e2e][ckpt]") {
  const autoloco::test::TempDir tmp("e2e-ckpt-tool-ls");
  const std::string dir = tmp.str();
  const std::string run = train_run(dir);

  const ToolResult ls = ckpt_tool(dir, "ls " + run);
  INFO(ls.out << ls.err);
  REQUIRE(ls.code == 0);
  size_t last = 0;
  for (const int step : {12, 8, 4}) {
    const std::string name = "step_" + std::to_string(step);
    const std::string line = line_starting(ls.out, name);
    INFO(name);
    REQUIRE(!line.empty());
    std::istringstream cells(line);
    std::string cell, step_cell;
    cells >> cell >> step_cell;
    CHECK(step_cell == std::to_string(step));
    CHECK(line.find(" valid") != std::string::npos);
    const size_t at = ls.out.find(line);
    CHECK(at > last);  // newest first
    last = at;
  }

  const ToolResult verify = ckpt_tool(dir, "verify " + run);
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  CHECK(verify.out.find("ok " + run + "/checkpoints/step_4 (") != std::string::npos);
  CHECK(verify.out.find("ok " + run + "/checkpoints/step_12 (") != std::string::npos);
  CHECK(verify.out.find("FAILED") == std::string::npos);

  // A copy of step_8 with flipped replica bytes, next to an abandoned temporary directory.
  const std::string bad = dir + "/bad/checkpoints";
  fs::create_directories(bad + "/.tmp-step_16");
  fs::copy(run + "/checkpoints/step_8", bad + "/step_8", fs::copy_options::recursive);
  corrupt_replica(bad + "/step_8");

  const ToolResult failed = ckpt_tool(dir, "verify " + bad + "/step_8");
  INFO(failed.out << failed.err);
  CHECK(failed.code == 1);
  CHECK(failed.out.find("FAILED " + bad + "/step_8: ") != std::string::npos);
  CHECK(failed.out.find("dc_0.h5") != std::string::npos);
  CHECK(failed.out.find("replica/values") != std::string::npos);

  // The quick check sees nothing (the sizes are right); --verify does.
  const ToolResult quick = ckpt_tool(dir, "ls " + dir + "/bad");
  INFO(quick.out << quick.err);
  CHECK(quick.code == 0);
  CHECK(line_starting(quick.out, "step_8").find(" valid") != std::string::npos);
  CHECK(line_starting(quick.out, ".tmp-step_16").find("incomplete (being written or abandoned)") !=
        std::string::npos);
  const ToolResult full = ckpt_tool(dir, "ls --verify " + dir + "/bad");
  INFO(full.out << full.err);
  CHECK(full.code == 0);
  CHECK(line_starting(full.out, "step_8").find("damaged: ") != std::string::npos);
  CHECK(line_starting(full.out, "step_8").find("dc_0.h5") != std::string::npos);

  const ToolResult missing = ckpt_tool(dir, "verify " + dir + "/no-such-run");
  CHECK(missing.code == 1);
  CHECK(missing.out.find("FAILED " + dir + "/no-such-run: ") != std::string::npos);
  CHECK(ckpt_tool(dir, "bogus").code == 2);
  CHECK(ckpt_tool(dir, "ls").code == 2);
}

TEST_CASE("e2e: autoloco-ckpt diff and export read the parameters", "[e2e][ckpt]") {
  const autoloco::test::TempDir tmp("e2e-ckpt-tool-diff");
  const std::string dir = tmp.str();
  const std::string ckpts = train_run(dir) + "/checkpoints";

  const ToolResult diff = ckpt_tool(dir, "diff " + ckpts + "/step_4 " + ckpts + "/step_8 --top 5");
  INFO(diff.out << diff.err);
  REQUIRE(diff.code == 0);
  const std::string anchor = line_starting(diff.out, "  global.h5:outer/anchor");
  INFO(anchor);
  CHECK(anchor.find("max |a-b| ") != std::string::npos);
  CHECK(line_starting(diff.out, "  dc_0.h5:replica/values").find("max |a-b| ") !=
        std::string::npos);
  CHECK(line_starting(diff.out, "  global.h5:counters/step").find("4 | 8") != std::string::npos);
  CHECK(diff.out.find("largest float32 differences (top 5 of") != std::string::npos);
  CHECK(diff.out.find("the checkpoints are identical") == std::string::npos);

  const ToolResult same = ckpt_tool(dir, "diff " + ckpts + "/step_8 " + ckpts + "/step_8");
  INFO(same.out << same.err);
  CHECK(same.code == 0);
  CHECK(line_starting(same.out, "  global.h5:outer/anchor").find("identical") != std::string::npos);
  CHECK(same.out.find("the checkpoints are identical") != std::string::npos);

  const std::string out = dir + "/params.h5";
  const ToolResult exported = ckpt_tool(dir, "export " + ckpts + "/step_8 " + out);
  INFO(exported.out << exported.err);
  REQUIRE(exported.code == 0);
  CHECK(exported.out.find("wrote " + out) != std::string::npos);

  const autoloco::H5Reader global(ckpts + "/step_8/global.h5");
  const std::vector<Param> params = parameters(global.read_string("model/parameters"));
  const std::vector<float> values = global.read_f32("outer/anchor");
  REQUIRE(params.size() > 2);
  const autoloco::H5Reader file(out);
  CHECK(file.read_int("step") == 8);
  CHECK(file.read_string("config") == global.read_string("config"));
  for (const Param& p : params) {
    INFO(p.name);
    REQUIRE(file.has(p.name));
    CHECK(file.shape(p.name) == p.shape);
    const std::vector<float> got = file.read_f32(p.name);
    REQUIRE(static_cast<int64_t>(got.size()) == p.numel);
    CHECK(std::memcmp(got.data(), values.data() + p.offset, got.size() * sizeof(float)) == 0);
  }

  const ToolResult again = ckpt_tool(dir, "export " + ckpts + "/step_8 " + out);
  CHECK(again.code == 1);
  CHECK(again.err.find("'" + out + "' exists") != std::string::npos);
}

TEST_CASE("e2e: autoloco-ckpt reads a sharded checkpoint as the unsharded one", "[e2e][ckpt]") {
  const autoloco::test::TempDir tmp("e2e-ckpt-tool-sharded");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string whole = train_sharded_run(dir, "none") + "/checkpoints/step_3";
  const std::string run = train_sharded_run(dir, "optimizer");
  const std::string sharded = run + "/checkpoints/step_3";
  {
    // The test's premise: the vectors are pieces of the rank files, not whole in their homes.
    const autoloco::H5Reader global(sharded + "/global.h5");
    const autoloco::H5Reader dc(sharded + "/dc_0.h5");
    const autoloco::H5Reader rank(sharded + "/rank_1.h5");
    REQUIRE(!global.has("outer/anchor"));
    REQUIRE(!dc.has("adamw/exp_avg"));
    REQUIRE(rank.has("outer/anchor_ranges"));
    REQUIRE(rank.has("outer/momentum_ranges"));
    REQUIRE(rank.has("adamw/exp_avg_sq_ranges"));
  }

  const ToolResult verify = ckpt_tool(dir, "verify " + run);
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  CHECK(verify.out.find("ok " + sharded + " (") != std::string::npos);
  const ToolResult ls = ckpt_tool(dir, "ls --verify " + run);
  INFO(ls.out << ls.err);
  CHECK(ls.code == 0);
  CHECK(line_starting(ls.out, "step_3").find(" valid") != std::string::npos);

  const ToolResult diff = ckpt_tool(dir, "diff " + whole + " " + sharded);
  INFO(diff.out << diff.err);
  REQUIRE(diff.code == 0);
  for (const char* vector :
       {"global.h5:outer/anchor", "global.h5:outer/momentum", "dc_0.h5:adamw/exp_avg",
        "dc_0.h5:adamw/exp_avg_sq", "dc_0.h5:replica/values"}) {
    INFO(vector);
    CHECK(line_starting(diff.out, std::string("  ") + vector).find("identical") !=
          std::string::npos);
  }
  CHECK(diff.out.find("\nonly in A: ") == std::string::npos);
  CHECK(diff.out.find("\nonly in B: ") == std::string::npos);
  CHECK(diff.out.find("_ranges") == std::string::npos);
  CHECK(diff.out.find("; 0 only in A, 0 only in B") != std::string::npos);

  // The anchor, not dc 0's replica (a step past it in the middle of the round).
  const autoloco::H5Reader global(whole + "/global.h5");
  const std::vector<float> anchor = global.read_f32("outer/anchor");
  REQUIRE(anchor != autoloco::H5Reader(whole + "/dc_0.h5").read_f32("replica/values"));
  const std::vector<Param> params = parameters(global.read_string("model/parameters"));
  REQUIRE(params.size() > 2);
  const std::string out_whole = dir + "/whole.h5";
  const std::string out_sharded = dir + "/sharded.h5";
  CHECK(ckpt_tool(dir, "export " + whole + " " + out_whole).code == 0);
  const ToolResult exported = ckpt_tool(dir, "export " + sharded + " " + out_sharded);
  INFO(exported.out << exported.err);
  REQUIRE(exported.code == 0);
  CHECK(exported.out.find("from " + sharded + ": outer/anchor (assembled from 2 rank files)") !=
        std::string::npos);
  const autoloco::H5Reader a(out_whole);
  const autoloco::H5Reader b(out_sharded);
  CHECK(b.read_int("step") == 3);
  for (const Param& p : params) {
    INFO(p.name);
    const std::vector<float> got = b.read_f32(p.name);
    REQUIRE(static_cast<int64_t>(got.size()) == p.numel);
    CHECK(got == a.read_f32(p.name));
    CHECK(std::memcmp(got.data(), anchor.data() + p.offset, got.size() * sizeof(float)) == 0);
  }

  // The Hugging Face export: the same safetensors, byte for byte.
  const std::string hf_whole = dir + "/hf-whole";
  const std::string hf_sharded = dir + "/hf-sharded";
  CHECK(ckpt_tool(dir, "export --format hf --no-tokenizer " + whole + " " + hf_whole).code == 0);
  const ToolResult hf =
      ckpt_tool(dir, "export --format hf --no-tokenizer " + sharded + " " + hf_sharded);
  INFO(hf.out << hf.err);
  REQUIRE(hf.code == 0);
  const std::string tensors = read_text(hf_sharded + "/model.safetensors");
  CHECK(!tensors.empty());
  CHECK(tensors == read_text(hf_whole + "/model.safetensors"));
}

// topology.shard full: no dc file holds the replica; each member's rank file holds its shard,
// and the tool assembles them.
TEST_CASE("e2e: autoloco-ckpt exports a fully sharded replica from its members' pieces",
          "[e2e][ckpt]") {
  const autoloco::test::TempDir tmp("e2e-ckpt-tool-full");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string run = train_sharded_run(dir, "full");
  const std::string ckpt = run + "/checkpoints/step_3";
  std::vector<float> replica;
  {
    const autoloco::H5Reader global(ckpt + "/global.h5");
    const autoloco::H5Reader dc(ckpt + "/dc_0.h5");
    REQUIRE(!dc.has("replica/values"));
    replica.assign(static_cast<size_t>(global.read_int("model/numel")), NAN);
    for (const char* file : {"/rank_0.h5", "/rank_1.h5"}) {
      const autoloco::H5Reader rank(ckpt + file);
      REQUIRE(rank.has("replica/values_ranges"));
      const std::vector<int64_t> ranges = rank.read_i64("replica/values_ranges");
      const std::vector<float> values = rank.read_f32("replica/values");
      REQUIRE(ranges.size() == 2);  // one run: the member's shard
      std::copy(values.begin(), values.end(), replica.begin() + ranges[0]);
    }
  }
  const ToolResult verify = ckpt_tool(dir, "verify " + ckpt);
  INFO(verify.out << verify.err);
  CHECK(verify.code == 0);
  const std::string out = dir + "/replica.h5";
  const ToolResult exported = ckpt_tool(dir, "export --replica 0 " + ckpt + " " + out);
  INFO(exported.out << exported.err);
  REQUIRE(exported.code == 0);
  CHECK(exported.out.find("replica/values of dc 0 (assembled from 2 rank files)") !=
        std::string::npos);
  const autoloco::H5Reader global(ckpt + "/global.h5");
  const autoloco::H5Reader b(out);
  for (const Param& p : parameters(global.read_string("model/parameters"))) {
    INFO(p.name);
    const std::vector<float> got = b.read_f32(p.name);
    REQUIRE(static_cast<int64_t>(got.size()) == p.numel);
    CHECK(std::memcmp(got.data(), replica.data() + p.offset, got.size() * sizeof(float)) == 0);
  }
  const ToolResult hf =
      ckpt_tool(dir, "export --format hf --no-tokenizer " + ckpt + " " + dir + "/hf-full");
  INFO(hf.out << hf.err);
  CHECK(hf.code == 0);
}

// The families of docs/models.md in a sharded dc: a Qwen3-shaped llama (query/key norms, heads
// wider than d_model / n_head, q/k/v biases as Qwen2 has them, Llama 3.1's rope scaling) trained
// unsharded, with the optimizer state sharded and fully sharded exports the same safetensors,
// byte for byte.
TEST_CASE("e2e: a sharded dc of the llama family's variants exports the unsharded run's bytes",
          "[e2e][ckpt][hf]") {
  const autoloco::test::TempDir tmp("e2e-ckpt-tool-family");
  const std::string dir = tmp.str();
  autoloco::test::write_tiny_corpus(dir + "/data");
  const std::string model =
      " --set model.arch=llama --set model.n_layer=2 --set model.d_model=32 --set model.n_head=4"
      " --set model.n_kv_head=2 --set model.head_dim=16 --set model.qk_norm=true"
      " --set model.attention_bias=true --set model.family=qwen3 --set model.rope_scaling=llama3"
      " --set model.rope_original_seq_len=8 --set model.ffn_hidden=48 --set model.seq_len=16";
  std::string reference;
  for (const std::string shard : {"none", "optimizer", "full"}) {
    INFO(shard);
    const std::string ckpt =
        train_sharded_run(dir, shard, model, "family-") + "/checkpoints/step_3";
    const std::string out = dir + "/hf-" + shard;
    const ToolResult hf = ckpt_tool(dir, "export --format hf --no-tokenizer " + ckpt + " " + out);
    INFO(hf.out << hf.err);
    REQUIRE(hf.code == 0);
    const std::string tensors = read_text(out + "/model.safetensors");
    REQUIRE_FALSE(tensors.empty());
    CHECK(read_text(out + "/config.json").find("Qwen3ForCausalLM") != std::string::npos);
    if (reference.empty()) {
      reference = tensors;
    } else {
      CHECK(tensors == reference);
    }
  }
}
