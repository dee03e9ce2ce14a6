// End to end: `autoloco-ckpt export --format hf` ships the run's tokenizer, and transformers'
// AutoTokenizer, loading the exported directory, gives the ids the run trained on. For each
// tokenizer of autoloco-prepare (a SentencePiece model trained there, a tokenizer.json trained
// here by the Python tokenizers library, bytes): prepare a small corpus, train a tiny llama a
// few steps on one rank, export, then in Python encode the shards' text back to the shards' ids,
// a few awkward texts to the ids of sentencepiece / tokenizers themselves, and find the BOS and
// EOS of config.json. Plus the options: the data found from the run's relative data.train paths
// or not (said, the rest exported), --tokenizer DIR, --no-tokenizer, and a tokenizer file already
// in the directory stops the export before anything is written. They need the Python of
// scripts/hf-env.sh (transformers, tokenizers, sentencepiece and protobuf): without it they fail,
// saying so; they do not skip.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "../support/hf_python.hpp"
#include "../support/run_files.hpp"
#include "../support/split_tokens.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

namespace fs = std::filesystem;
using autoloco::test::contains;
using autoloco::test::hf_python;
using autoloco::test::json_number;
using autoloco::test::read_text;
using autoloco::test::run_command;
using autoloco::test::shell_quote;
using autoloco::test::write_text;

namespace {

// Trains a ByteLevel BPE tokenizer.json of 400 tokens (GPT-2's kind, with <|endoftext|>).
constexpr const char* kTrainPy = R"PY(
import sys
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
out, files = sys.argv[1], sys.argv[2:]
tok = Tokenizer(models.BPE())
tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
tok.decoder = decoders.ByteLevel()
tok.train(files, trainers.BpeTrainer(
    vocab_size=400, show_progress=False, special_tokens=["<|endoftext|>"],
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tok.save(out)
)PY";

// check.py OUT KIND IDS REF [--generate]: the exported directory OUT against the tokenizer of
// kind KIND (REF: its tokenizer.model or tokenizer.json), on IDS (a split's ids, as the shards
// hold them). Prints "check: ok CLASS" or the problems (exit 1).
constexpr const char* kCheckPy = R"PY(
import json, os, sys
from transformers import AutoTokenizer
out, kind, ids_path, ref = sys.argv[1:5]
ids = [int(x) for x in open(ids_path).read().split()]
tok = AutoTokenizer.from_pretrained(out)
if kind == "sentencepiece":
    import sentencepiece as spm
    sp = spm.SentencePieceProcessor(model_file=ref)
    newline = sp.encode("\n")
    def reference(text):  # autoloco-prepare's encoding: line by line, "\n"'s ids between
        got, lines = [], text.split("\n")
        for i, line in enumerate(lines):
            got += sp.encode(line) if line else []
            got += newline if i + 1 < len(lines) else []
        return got
    text = sp.decode(ids)
    bos, eos = sp.bos_id(), sp.eos_id()
elif kind == "hf":
    from tokenizers import Tokenizer
    library = Tokenizer.from_file(ref)
    def reference(text):
        return library.encode(text, add_special_tokens=False).ids
    text = library.decode(ids, skip_special_tokens=False)
    bos = eos = library.token_to_id("<|endoftext|>")
else:
    def reference(text):
        return list(text.encode("utf-8"))
    text = bytes(ids).decode("utf-8")
    bos = eos = 10  # the document separator, a newline
problems = []
def check(ok, what):
    if not ok:
        problems.append(what)
check(len(ids) > 1000 and reference(text) == ids, "the reference does not give the shards' ids")
got = tok.encode(text)
if got != ids:
    at = next((i for i in range(min(len(got), len(ids))) if got[i] != ids[i]), None)
    problems.append(f"the shards' text: {len(got)} ids where the shards hold {len(ids)}, first "
                    f"difference at {at}: {got[at:at+5] if at is not None else ''} against "
                    f"{ids[at:at+5] if at is not None else ''}")
check(tok.decode(ids) == text, "decoding the shards' ids does not give their text")
for sample in ["Hello world", "  two  spaces\n\tindented line\n", "trailing space ",
               "Ünïcödé: naïve café, Grüße — 東京 🚀", "<s> literal </s> <unk> tags",
               "a <|endoftext|> b", "x <0x0A> y", "digits 12345 and 3.14", "\n\nblank lines\n\n", ""]:
    got = tok.encode(sample)
    check(got == reference(sample), f"{sample!r}: {got} where the reference gives "
                                    f"{reference(sample)}")
    check(tok.decode(got) == sample, f"{sample!r} decodes to {tok.decode(got)!r}")
config = json.load(open(os.path.join(out, "config.json")))
generation = json.load(open(os.path.join(out, "generation_config.json")))
for key, want in (("bos_token_id", bos), ("eos_token_id", eos)):
    check(config.get(key) == want, f"config.json {key} {config.get(key)}, the tokenizer's {want}")
    check(generation.get(key) == want,
          f"generation_config.json {key} {generation.get(key)}, the tokenizer's {want}")
check(tok.bos_token_id == bos and tok.eos_token_id == eos,
      f"AutoTokenizer's bos/eos {tok.bos_token_id}/{tok.eos_token_id}, want {bos}/{eos}")
if "--generate" in sys.argv:
    from transformers import AutoModelForCausalLM
    model = AutoModelForCausalLM.from_pretrained(out)
    batch = tok("the model", return_tensors="pt")
    new = model.generate(**batch, max_new_tokens=4, do_sample=False)[0]
    check(len(new) == len(batch["input_ids"][0]) + 4, f"generate gave {new}")
    print("generated:", repr(tok.decode(new)))
for p in problems:
    print("problem:", p)
print("check:", "ok" if not problems else "FAILED", type(tok).__name__, len(ids), "ids")
sys.exit(1 if problems else 0)
)PY";

// Documents under dir/text: the tiny corpus's sentences, multi-byte UTF-8, indentation, runs of
// spaces, digits and a literal "<s>".
void write_corpus(const std::string& dir) {
  for (int f = 0; f < 8; ++f) {
    std::string text = autoloco::test::tiny_text(60, f);
    text += "Ünïcödé: naïve café, Grüße — 東京 " + std::to_string(f * 7919) + " 🚀\n\n";
    text += "    indented  by four, then  two\n\tand a tab <s> here\n";
    text += autoloco::test::tiny_text(30, f + 100);
    write_text(dir + "/text/doc" + std::to_string(f) + ".txt", text);
  }
}

// Runs `command` with its output in `log`; returns the exit code, the output in `output`.
int run_logged(const std::string& command, const std::string& log, std::string& output) {
  const int code = run_command(command + " > " + shell_quote(log) + " 2>&1");
  output = read_text(log);
  return code;
}

struct Run {
  std::string dir;   // the working directory of prepare and train
  std::string data;  // dir/<data>: the prepared data (relative to dir in the run's config)
  std::string ckpt;  // the checkpoint at the end
  int64_t vocab_size = 0;
};

// autoloco-prepare `prepare_args` into dir/`data`, then a tiny llama trained 2 steps on one rank
// on it, from `dir` with relative data paths; checkpoint at the end.
Run prepare_and_train(const std::string& dir, const std::string& data,
                      const std::string& prepare_args) {
  Run r;
  r.dir = dir;
  r.data = dir + "/" + data;
  std::string output;
  const int prepared =
      run_logged("cd " + shell_quote(dir) + " && " + AUTOLOCO_PREPARE_EXE + " " + prepare_args +
                     " --val-fraction 0.2 --threads 1 --out " + data + " text",
                 dir + "/prepare-" + data + ".log", output);
  INFO(output);
  REQUIRE(prepared == 0);
  r.vocab_size =
      static_cast<int64_t>(json_number(read_text(r.data + "/prepare.json"), "vocab_size"));
  write_text(dir + "/empty.yaml", "{}\n");
  const std::string keys =
      "--set model.preset=llama-tiny --set model.n_layer=1 --set model.seq_len=32 "
      "--set model.vocab_size=" +
      std::to_string(r.vocab_size) + " --set data.train='" + data +
      "/train_*.bin' --set data.val='" + data +
      "/val_*.bin' --set data.batch_size=2 --set run.steps=2 --set run.eval_every=0 "
      "--set run.eval_batches=1 --set run.threads=1 --set outer.method=ddp "
      "--set ckpt.at_end=true --set ckpt.every_minutes=0 --set run.out_dir=runs "
      "--set run.name=" +
      data;
  const int trained = run_logged("cd " + shell_quote(dir) + " && " + AUTOLOCO_MPIEXEC +
                                     " -n 1 --oversubscribe --allow-run-as-root --bind-to none " +
                                     AUTOLOCO_TRAIN_EXE + " empty.yaml " + keys,
                                 dir + "/train-" + data + ".log", output);
  INFO(output);
  REQUIRE(trained == 0);
  r.ckpt = dir + "/runs/" + data + "/checkpoints/step_2";
  REQUIRE(fs::is_directory(r.ckpt));
  return r;
}

// autoloco-ckpt export --format hf from the working directory `cwd`; its output in `output`.
int export_hf(const std::string& cwd, const std::string& ckpt, const std::string& out,
              const std::string& options, std::string& output) {
  return run_logged("cd " + shell_quote(cwd) + " && " + AUTOLOCO_CKPT_EXE + " export --format hf " +
                        options + " " + shell_quote(ckpt) + " " + shell_quote(out),
                    out + ".log", output);
}

// The train split's ids written for check.py, which then checks the export `out`.
void check_in_python(const std::string& python, const Run& r, const std::string& out,
                     const std::string& kind, const std::string& ref, const std::string& extra,
                     const std::string& expected_class) {
  std::string ids;
  for (uint32_t id : autoloco::test::split_tokens(r.data, "train", r.vocab_size))
    ids += std::to_string(id) + " ";
  write_text(out + ".ids", ids);
  write_text(r.dir + "/check.py", kCheckPy);
  std::string output;
  const int code =
      run_logged("HF_HUB_OFFLINE=1 " + shell_quote(python) + " " +
                     shell_quote(r.dir + "/check.py") + " " + shell_quote(out) + " " + kind + " " +
                     shell_quote(out + ".ids") + " " + shell_quote(ref) + " " + extra,
                 out + ".check.log", output);
  INFO(output);
  CHECK(code == 0);
  CHECK(contains(output, "check: ok " + expected_class));
}

std::vector<std::string> listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("e2e: hf export ships the SentencePiece model and AutoTokenizer gives the shard ids",
          "[e2e][hf]") {
  const autoloco::test::TempDir tmp("e2e-hf-tok-sp");
  const std::string dir = tmp.str();
  const std::string python = hf_python("transformers, tokenizers, sentencepiece, google.protobuf",
                                       dir + "/python-check.log");
  write_corpus(dir);
  const Run r = prepare_and_train(dir, "sp", "--tokenizer sentencepiece --vocab-size 360");
  CHECK(r.vocab_size == 360);

  // Found through the run's relative data.train, from the directory it trained in.
  std::string output;
  const std::string out = dir + "/hf";
  REQUIRE(export_hf(dir, r.ckpt, out, "", output) == 0);
  INFO(output);
  CHECK(contains(output, "as LlamaTokenizer (bos 1, eos 2)"));
  CHECK_FALSE(contains(output, "note:"));
  CHECK(listing(out) == std::vector<std::string>{"config.json", "generation_config.json",
                                                 "model.safetensors", "tokenizer.model",
                                                 "tokenizer_config.json"});
  // Written in this order: weights, tokenizer, generation_config.json, config.json last.
  CHECK(output.find("  model.safetensors\n  tokenizer.model\n  tokenizer_config.json\n  "
                    "generation_config.json\n  config.json\n") != std::string::npos);
  CHECK(read_text(out + "/tokenizer.model") == read_text(r.data + "/tokenizer.model"));
  CHECK(contains(read_text(out + "/config.json"), "\"bos_token_id\": 1,"));
  CHECK(contains(read_text(out + "/config.json"), "\"eos_token_id\": 2"));
  check_in_python(python, r, out, "sentencepiece", r.data + "/tokenizer.model", "--generate",
                  "LlamaTokenizer");

  // A tokenizer file already there stops the export before anything is written.
  const std::string taken = dir + "/taken";
  write_text(taken + "/tokenizer_config.json", "mine");
  CHECK(export_hf(dir, r.ckpt, taken, "", output) == 1);
  CHECK(contains(output, taken + "/tokenizer_config.json' exists"));
  CHECK(contains(output, "never writes over a file"));
  CHECK(listing(taken) == std::vector<std::string>{"tokenizer_config.json"});
  CHECK(read_text(taken + "/tokenizer_config.json") == "mine");
  write_text(taken + "/tokenizer.model", "mine");
  fs::remove(taken + "/tokenizer_config.json");
  CHECK(export_hf(dir, r.ckpt, taken, "", output) == 1);
  CHECK(contains(output, taken + "/tokenizer.model' exists"));
  CHECK(listing(taken) == std::vector<std::string>{"tokenizer.model"});

  // From elsewhere the relative data.train is not found: said, and the model exported without.
  fs::create_directories(dir + "/elsewhere");
  const std::string bare = dir + "/bare";
  REQUIRE(export_hf(dir + "/elsewhere", r.ckpt, bare, "", output) == 0);
  CHECK(contains(output, "tokenizer: not exported"));
  CHECK(contains(output, "--tokenizer DIR"));
  CHECK(listing(bare) ==
        std::vector<std::string>{"config.json", "generation_config.json", "model.safetensors"});
  // ... and --tokenizer names the data.
  const std::string named = dir + "/named";
  REQUIRE(export_hf(dir + "/elsewhere", r.ckpt, named, "--tokenizer " + shell_quote(r.data),
                    output) == 0);
  CHECK(contains(output, "as LlamaTokenizer"));
  CHECK(read_text(named + "/tokenizer_config.json") == read_text(out + "/tokenizer_config.json"));

  // --no-tokenizer; a bad --tokenizer fails before anything is written; usage errors.
  const std::string without = dir + "/without";
  REQUIRE(export_hf(dir, r.ckpt, without, "--no-tokenizer", output) == 0);
  CHECK(contains(output, "tokenizer: not exported (--no-tokenizer)"));
  CHECK_FALSE(fs::exists(without + "/tokenizer_config.json"));
  CHECK(export_hf(dir, r.ckpt, dir + "/nope", "--tokenizer " + shell_quote(dir + "/text"),
                  output) == 1);
  CHECK(contains(output, "--tokenizer " + dir + "/text: no prepare.json in it"));
  CHECK(export_hf(dir, r.ckpt, dir + "/nope", "--tokenizer " + shell_quote(dir + "/missing"),
                  output) == 1);
  CHECK(contains(output, "not a directory"));
  CHECK_FALSE(fs::exists(dir + "/nope"));
  CHECK(export_hf(dir, r.ckpt, dir + "/nope", "--tokenizer sp --no-tokenizer", output) == 2);
  CHECK(contains(output, "exclude each other"));
  CHECK(run_logged(std::string(AUTOLOCO_CKPT_EXE) + " export --tokenizer sp " +
                       shell_quote(r.ckpt) + " " + shell_quote(dir + "/nope.h5"),
                   dir + "/h5.log", output) == 2);
  CHECK(contains(output, "--tokenizer applies to --format hf only"));
}

TEST_CASE("e2e: hf export ships a tokenizer.json or the byte tokenizer and AutoTokenizer agrees",
          "[e2e][hf]") {
  const autoloco::test::TempDir tmp("e2e-hf-tok-json");
  const std::string dir = tmp.str();
  const std::string python = hf_python("transformers, tokenizers, sentencepiece, google.protobuf",
                                       dir + "/python-check.log");
  write_corpus(dir);
  std::string files;
  for (int f = 0; f < 8; ++f)
    files += " " + shell_quote(dir + "/text/doc" + std::to_string(f) + ".txt");
  write_text(dir + "/train_tokenizer.py", kTrainPy);
  const std::string tokenizer_json = dir + "/bpe.json";
  REQUIRE(run_command(shell_quote(python) + " " + shell_quote(dir + "/train_tokenizer.py") + " " +
                      shell_quote(tokenizer_json) + files) == 0);

  SECTION("tokenizer.json (hf)") {
    const Run r = prepare_and_train(dir, "hf",
                                    "--tokenizer hf --hf-tokenizer " + shell_quote(tokenizer_json) +
                                        " --hf-python " + shell_quote(python));
    CHECK(r.vocab_size == 400);
    std::string output;
    const std::string out = dir + "/out-hf";
    REQUIRE(export_hf(dir, r.ckpt, out, "", output) == 0);
    INFO(output);
    CHECK(contains(output, "as PreTrainedTokenizerFast (bos 0, eos 0)"));  // <|endoftext|>
    CHECK(read_text(out + "/tokenizer.json") == read_text(tokenizer_json));
    CHECK(contains(read_text(out + "/config.json"), "\"eos_token_id\": 0"));
    check_in_python(python, r, out, "hf", tokenizer_json, "", "TokenizersBackend");
    // The run's vocabulary is not the byte tokenizer's: --tokenizer of other data is refused.
    REQUIRE(run_command("cd " + shell_quote(dir) + " && " + AUTOLOCO_PREPARE_EXE +
                        " --threads 1 --out bytes text > /dev/null 2>&1") == 0);
    CHECK(export_hf(dir, r.ckpt, dir + "/nope", "--tokenizer " + shell_quote(dir + "/bytes"),
                    output) == 1);
    CHECK(contains(output, "is not this model's"));
    CHECK_FALSE(fs::exists(dir + "/nope"));
  }
  SECTION("bytes") {
    const Run r = prepare_and_train(dir, "bytes", "");
    CHECK(r.vocab_size == 256);
    std::string output;
    const std::string out = dir + "/out-bytes";
    REQUIRE(export_hf(dir, r.ckpt, out, "", output) == 0);
    INFO(output);
    CHECK(contains(output, "as PreTrainedTokenizerFast (bos 10, eos 10)"));
    check_in_python(python, r, out, "bytes", "", "", "TokenizersBackend");
  }
}
