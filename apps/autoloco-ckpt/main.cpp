// autoloco-ckpt: inspects the checkpoints autoloco-train writes (list, verify, compare, export,
// logits) without MPI; the entry point picks the command and turns errors into exit codes.
#include <fmt/format.h>

#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "autoloco/util/error.hpp"
#include "ckpt_tool.hpp"

namespace {

constexpr const char* kUsage = R"(usage: autoloco-ckpt COMMAND [options] ...

Inspects the checkpoints of autoloco-train runs: <run>/checkpoints/step_<N>/ with global.h5,
dc_<d>.h5, rank_<r>.h5 and manifest.json (written last; sizes and crc32 of every dataset).
PATH is a run directory, its checkpoints/ directory or one checkpoint.

commands:
  ls PATH [--verify]         table of the checkpoints, newest first: name, step, round, reason,
                             created, size, status (valid, incomplete, damaged). It also shows
                             .tmp-step_<N> (being written or abandoned) and the rejected-* and
                             superseded-* directories a resume set aside. The status is the
                             quick check (manifest, file sizes); --verify reads every dataset
                             and checks its crc32
  verify PATH...             full check of each checkpoint (every checkpoint of a run
                             directory): prints 'ok PATH (N files, X bytes)' or
                             'FAILED PATH: problem'; exits 0 only if all are ok
  diff A B [--top N]         compares two checkpoints of one model: for each float32 dataset
                             both hold, max |a-b| and max |a-b| / max |a| per parameter (the N
                             largest, default 20) and per dataset; the other datasets that
                             differ (counters, loop state, config, ...) and those only one
                             side holds. The vectors a sharded run writes as pieces of its
                             rank files (anchor, outer state, AdamW moments) are compared
                             whole, under global.h5 or dc_<d>.h5, whatever the layout.
                             Exits 0 (a report), 3 if the models differ
  export CKPT OUT.h5 [--replica DC]
                             writes the parameters as a standalone HDF5 file: one float32
                             dataset per parameter, named and shaped as in the model, plus
                             'step' and 'config'. Taken from the anchor (outer/anchor; a
                             sharded run's is assembled from its rank files), or
                             from dc_<DC>.h5's replica with --replica DC or when the run has
                             no anchor (ddp: dc 0). Never writes over OUT.h5
  export --format hf CKPT OUT_DIR [--replica DC] [--max-shard-bytes N]
         [--tokenizer DIR | --no-tokenizer]
                             writes a Hugging Face model directory (GPT2LMHeadModel or
                             LlamaForCausalLM): config.json, generation_config.json and
                             model.safetensors, or shards of at most N bytes (default 5 GB)
                             with model.safetensors.index.json, as save_pretrained does, and
                             the run's tokenizer: found through the prepare.json beside the
                             run's data.train shards (relative paths from the current
                             directory), or in DIR, a directory autoloco-prepare wrote.
                             sentencepiece: tokenizer.model and a tokenizer_config.json for
                             LlamaTokenizer; hf: tokenizer.json; bytes: a byte-level
                             tokenizer.json; no BOS/EOS added, as in the shards, and their ids
                             in config.json. Without the data it says so and exports the rest.
                             transformers' from_pretrained and AutoTokenizer, lm_eval --model
                             hf and inference servers load it (docs/models.md). Never writes
                             over a file
  logits SRC --tokens FILE --out FILE [--replica DC]
                             autoloco's float32 logits [B, T, V] of a batch (FILE: one
                             sequence of token ids per line) under the model of a checkpoint
                             or of a Hugging Face directory (SRC/config.json), written as raw
                             little-endian float32; how exports are checked against
                             transformers

options:
  -h, --help                 print this help

exit codes: 0 success, 1 a checkpoint cannot be read or a check failed, 2 a bad command line,
3 (diff) the checkpoints hold different models

examples:
  autoloco-ckpt ls runs/quickstart
  autoloco-ckpt verify runs/quickstart/checkpoints/step_200
  autoloco-ckpt diff runs/a/checkpoints/step_100 runs/a/checkpoints/step_200 --top 10
  autoloco-ckpt export runs/a/checkpoints/step_200 model.h5
  autoloco-ckpt export --format hf runs/a/checkpoints/step_200 hf/a-200
  autoloco-ckpt export --format hf --tokenizer data/pydoc-sp4k runs/a/checkpoints/step_200 hf/b
)";

}  // namespace

int main(int argc, char** argv) {
  using namespace autoloco::ckpt_tool;
  const std::vector<std::string> args(argv + 1, argv + argc);
  for (const std::string& arg : args) {
    if (arg == "--") break;
    if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      return 0;
    }
  }
  try {
    if (args.empty()) throw UsageError("no COMMAND given: ls, verify, diff, export or logits");
    const std::string& command = args.front();
    const std::vector<std::string> rest(args.begin() + 1, args.end());
    if (command == "ls") return run_ls(rest);
    if (command == "verify") return run_verify(rest);
    if (command == "diff") return run_diff(rest);
    if (command == "export") return run_export(rest);
    if (command == "logits") return run_logits(rest);
    throw UsageError(
        fmt::format("unknown command '{}': use ls, verify, diff, export or logits", command));
  } catch (const UsageError& e) {
    std::fflush(stdout);
    fmt::print(stderr, "autoloco-ckpt: {}\nrun 'autoloco-ckpt --help' for usage\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fflush(stdout);
    fmt::print(stderr, "autoloco-ckpt: error: {}\n", e.what());
    return kExitFailure;
  }
}
