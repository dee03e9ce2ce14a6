// autoloco-bench --hf-step: the Trainer's inner step (one rank, as --throughput times it) against
// a transformers training step of the same model on this CPU (LlamaForCausalLM, or the
// Mistral/Qwen2/Qwen3 class of model.family), each in its own process: the step a transformers
// user would write (fp32, sdpa attention, torch.optim.AdamW with the same lr schedule, betas, eps
// and weight decay on the same parameters, the same gradient clipping, the same batch, sequence
// length and threads).
//
// The transformers side is the Python program kHfStepHelper (hf_step_helper.cpp), run with `python
// -c` (embedded, as autoloco-prepare's tokenizer helper is, so that nothing has to be found beside
// the executable). It builds the model from the config.json that `autoloco-ckpt export --format hf`
// would write for these model keys (hf_config_json), and the parameter counts of both sides must
// agree. The two processes take turns, never running together: we time `steps` Trainer steps, then
// ask the helper to time `steps` of its own, and so on for `repeats` rounds (A B A B ...), after
// both have warmed up; the JSON carries every repeat's times and the medians. Memory per process is
// each one's VmHWM (peak resident set) from /proc/self/status, beside its resident set before
// the model was built (the libraries alone). Protocol, one text line each way over a socket that
// is the helper's stdin and stdout:
//   helper -> "ready key=value ..." once built, or "error MESSAGE"
//   "run N" -> "ok SECONDS LOSS" (N steps, timed together)
//   "profile N" -> "ok SECONDS OP=MICROSECONDS ..." (N steps under torch.profiler: their time and
//                  each operator's self time, spaces in its name as underscores)
//   "peak"  -> "ok VMHWM_BYTES"
//   "quit"  (no answer)
#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <torch/torch.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "autoloco/config/config.hpp"
#include "autoloco/data/hf_tokenizer.hpp"
#include "autoloco/model/decoder.hpp"
#include "autoloco/model/hf_config.hpp"
#include "autoloco/train/trainer.hpp"
#include "autoloco/util/blas.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"
#include "bench.hpp"
#include "hf_step_helper.hpp"
#include "op_profile.hpp"

extern char** environ;

namespace autoloco::bench {
namespace {

int64_t status_bytes(const char* key) {
  std::ifstream in("/proc/self/status");
  const std::string prefix = std::string(key) + ":";
  for (std::string line; std::getline(in, line);) {
    if (line.rfind(prefix, 0) != 0) continue;
    std::istringstream fields(line.substr(prefix.size()));
    int64_t kib = -1;
    fields >> kib;
    return kib * 1024;
  }
  return -1;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2.0;
}

// The transformers side: a Python process spoken to line by line.
class Helper {
 public:
  Helper(const std::string& python, const std::string& settings, int threads) : python_(python) {
    int fds[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
      throw Error(std::string("--hf-step: cannot make a socket: ") + std::strerror(errno));
    }
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDIN_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    // The helper's OpenMP and MKL pools start at our thread count (it also sets it), offline.
    std::vector<std::string> env_strings;
    for (char** e = environ; *e != nullptr; ++e) {
      const std::string var = *e;
      if (var.rfind("OMP_NUM_THREADS=", 0) == 0 || var.rfind("MKL_NUM_THREADS=", 0) == 0) continue;
      env_strings.push_back(var);
    }
    env_strings.push_back("OMP_NUM_THREADS=" + std::to_string(threads));
    env_strings.push_back("MKL_NUM_THREADS=" + std::to_string(threads));
    env_strings.push_back("HF_HUB_OFFLINE=1");
    env_strings.push_back("TRANSFORMERS_NO_ADVISORY_WARNINGS=1");
    std::vector<char*> env;
    for (auto& e : env_strings)
      env.push_back(e.data());
    env.push_back(nullptr);
    std::string arg0 = python_, flag = "-c", code = kHfStepHelper, arg1 = settings;
    char* argv[] = {arg0.data(), flag.data(), code.data(), arg1.data(), nullptr};
    const int rc = ::posix_spawnp(&pid_, python_.c_str(), &actions, nullptr, argv, env.data());
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    if (rc != 0) {
      ::close(fds[0]);
      pid_ = -1;
      throw Error("--hf-step: cannot start the Python interpreter '" + python_ +
                  "': " + std::strerror(rc) + "; " + kHowTo);
    }
    fd_ = fds[0];
  }

  ~Helper() {
    if (fd_ >= 0) {
      const char quit[] = "quit\n";
      (void)!::send(fd_, quit, sizeof quit - 1, MSG_NOSIGNAL);
      ::close(fd_);
    }
    if (pid_ > 0) {
      int status = 0;
      ::waitpid(pid_, &status, 0);
    }
  }

  Helper(const Helper&) = delete;
  Helper& operator=(const Helper&) = delete;

  // The answer's words after "ready" or "ok"; throws with the helper's message otherwise.
  std::vector<std::string> answer(const std::string& what) {
    std::string line;
    for (;;) {
      const auto newline = buffer_.find('\n');
      if (newline != std::string::npos) {
        line = buffer_.substr(0, newline);
        buffer_.erase(0, newline + 1);
        break;
      }
      char chunk[4096];
      const ssize_t n = ::read(fd_, chunk, sizeof chunk);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        throw Error("--hf-step: the transformers helper (" + python_ + ") exited while " + what +
                    " (its messages are above); " + kHowTo);
      }
      buffer_.append(chunk, static_cast<size_t>(n));
    }
    std::istringstream in(line);
    std::vector<std::string> words;
    for (std::string w; in >> w;)
      words.push_back(w);
    if (words.empty() || (words[0] != "ok" && words[0] != "ready")) {
      throw Error("--hf-step: the transformers helper failed while " + what + ": " + line);
    }
    words.erase(words.begin());
    return words;
  }

  std::vector<std::string> ask(const std::string& request, const std::string& what) {
    const std::string line = request + "\n";
    if (::send(fd_, line.data(), line.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(line.size())) {
      throw Error("--hf-step: the transformers helper (" + python_ + ") went away before " + what);
    }
    return answer(what);
  }

  static constexpr const char* kHowTo =
      "--python names an interpreter with torch and transformers (scripts/hf-env.sh makes one; "
      "its last line is the path)";

 private:
  std::string python_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string buffer_;
};

std::map<std::string, std::string> key_values(const std::vector<std::string>& words) {
  std::map<std::string, std::string> out;
  for (const auto& w : words) {
    const auto eq = w.find('=');
    if (eq != std::string::npos) out[w.substr(0, eq)] = w.substr(eq + 1);
  }
  return out;
}

// --profile: the operators with the most self time on either side, in ms per step, and each
// side's total, so that a ratio short of 1 says where the time goes.
// The wall time beside the operators' sum shows the time spent outside them (data, bookkeeping,
// Python).
JsonObject profile_json(double ours_s, const std::map<std::string, double>& ours_us,
                        const std::vector<std::string>& theirs_words, int64_t steps) {
  std::map<std::string, std::pair<double, double>> both;  // ms per step: ours, theirs
  double ours_total = 0.0, theirs_total = 0.0;
  const double per_step = 1e3 * static_cast<double>(steps);
  for (const auto& [name, us] : ours_us) {
    std::string key = name;
    std::replace(key.begin(), key.end(), ' ', '_');
    both[key].first += us / per_step;
    ours_total += us / per_step;
  }
  const double theirs_s = theirs_words.empty() ? 0.0 : std::stod(theirs_words[0]);
  for (const auto& w : theirs_words) {
    const auto eq = w.rfind('=');
    if (eq == std::string::npos) continue;
    const double ms = std::stod(w.substr(eq + 1)) / per_step;
    both[w.substr(0, eq)].second += ms;
    theirs_total += ms;
  }
  std::vector<std::pair<std::string, std::pair<double, double>>> rows(both.begin(), both.end());
  std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) {
    return std::max(a.second.first, a.second.second) > std::max(b.second.first, b.second.second);
  });
  rows.resize(std::min<size_t>(rows.size(), 30));
  std::vector<JsonObject> ops;
  for (const auto& [name, ms] : rows) {
    JsonObject op;
    op.add("op", name).add("autoloco_ms", ms.first).add("transformers_ms", ms.second);
    ops.push_back(op);
  }
  JsonObject out;
  out.add("steps", steps)
      .add("autoloco_wall_ms_per_step", 1e3 * ours_s / static_cast<double>(steps))
      .add("transformers_wall_ms_per_step", 1e3 * theirs_s / static_cast<double>(steps))
      .add("autoloco_ops_ms_per_step", ours_total)
      .add("transformers_ops_ms_per_step", theirs_total)
      .add("ops", ops);
  return out;
}

// A number the helper reported; -1 when it did not.
int64_t number(const std::string& text) {
  try {
    return std::stoll(text);
  } catch (const std::logic_error&) {
    return -1;
  }
}

std::string settings_json(const Config& c, const std::string& config_path, int threads,
                          const std::string& adamw) {
  JsonObject s;
  s.add("config", config_path)
      .add("threads", threads)
      .add("seed", c.run.seed)
      .add("vocab_size", c.model.vocab_size)
      .add("seq_len", c.model.seq_len)
      .add("batch_size", c.data.batch_size)
      .add("lr", c.inner.lr)
      .add("betas", c.inner.betas)
      .add("eps", c.inner.eps)
      .add("weight_decay", c.inner.weight_decay)
      .add("grad_clip", c.inner.grad_clip)
      .add("warmup_steps", c.inner.warmup_steps)
      .add("schedule", c.inner.schedule)
      .add("min_lr_ratio", c.inner.min_lr_ratio)
      .add("total_steps", c.run.steps)
      .add("adamw", adamw);
  return s.str();
}

}  // namespace

int hf_step(const Args& args) {
  const std::string dir =
      (std::filesystem::temp_directory_path() / ("autoloco-bench-hf-" + std::to_string(::getpid())))
          .string();
  const Config c = single_process_config(args, dir);
  if (c.model.arch != "llama") {
    throw ConfigError(
        "--hf-step compares with transformers' Llama-family classes: it needs "
        "model.arch llama (e.g. --set model.preset=llama-tiny), not '" +
        c.model.arch + "'");
  }
  if (c.data.grad_accum != 1) {
    throw ConfigError("--hf-step times one micro-batch per step: data.grad_accum must be 1");
  }
  const std::string python = args.python.empty() ? default_hf_python() : args.python;
  const int64_t rss_baseline = status_bytes("VmRSS");

  JsonObject out;
  {
    Trainer trainer(c, MPI_COMM_SELF, {false, false});
    const torch::Tensor first = trainer.model()->parameters().front();
    if (!first.device().is_cpu() || first.scalar_type() != torch::kFloat32) {
      throw ConfigError(
          "--hf-step compares fp32 steps on the CPU: set run.device=cpu and "
          "run.precision=fp32");
    }
    const int threads = torch::get_num_threads();
    const int64_t parameters = parameter_count(*trainer.model());
    const std::string config_path = dir + "/config.json";
    {
      std::ofstream f(config_path);
      f << hf_config_json(c.model, {});
    }

    Helper helper(python, settings_json(c, config_path, threads, args.hf_adamw), threads);
    const auto info = key_values(helper.answer("building the transformers model"));
    auto field = [&](const std::string& key) {
      const auto it = info.find(key);
      return it == info.end() ? std::string("?") : it->second;
    };
    if (field("parameters") != std::to_string(parameters)) {
      throw Error("--hf-step: transformers' " + field("class") + " has " + field("parameters") +
                  " parameters, autoloco's model " + std::to_string(parameters) +
                  ": not the same model (hf_config_json's config.json is in " + dir + ")");
    }

    double loss = 0.0;
    for (int64_t i = 0; i < args.warmup; ++i)
      trainer.train_step();
    if (args.warmup > 0) helper.ask("run " + std::to_string(args.warmup), "warming up");
    std::vector<double> ours_s, theirs_s, ours_tps, theirs_tps, ratios;
    double their_loss = 0.0;
    const double tokens = static_cast<double>(args.steps * trainer.tokens_per_step());
    for (int64_t r = 0; r < args.repeats; ++r) {
      Timer t;
      for (int64_t i = 0; i < args.steps; ++i)
        loss = trainer.train_step().loss;
      ours_s.push_back(t.seconds());
      const auto words = helper.ask("run " + std::to_string(args.steps), "timing its steps");
      if (words.size() < 2) throw Error("--hf-step: the helper's timing lacks its loss");
      theirs_s.push_back(std::stod(words[0]));
      their_loss = std::stod(words[1]);
      ours_tps.push_back(tokens / ours_s.back());
      theirs_tps.push_back(tokens / theirs_s.back());
      ratios.push_back(ours_tps.back() / theirs_tps.back());
    }
    const auto peak = helper.ask("peak", "reading its peak memory");
    const int64_t their_peak = peak.empty() ? -1 : number(peak[0]);
    const int64_t our_peak = status_bytes("VmHWM");
    // After the peaks: the profiler's event records would raise them.
    JsonObject profile;
    if (args.profile) {
      Timer t;
      const auto ours = profile_self_us([&] {
        for (int64_t i = 0; i < args.steps; ++i)
          trainer.train_step();
      });
      const double profiled_s = t.seconds();
      const auto theirs =
          helper.ask("profile " + std::to_string(args.steps), "profiling its steps");
      profile = profile_json(profiled_s, ours, theirs, args.steps);
    }
    const double ours_median = median(ours_tps);
    const double theirs_median = median(theirs_tps);

    out.add("benchmark", "hf_step")
        .add("model", model_json(c.model, parameters))
        .add("batch_size", c.data.batch_size)
        .add("tokens_per_step", trainer.tokens_per_step())
        .add("threads", int64_t{threads})
        .add("warmup", args.warmup)
        .add("steps", args.steps)
        .add("repeats", args.repeats)
        .add("libtorch", TORCH_VERSION)
        .add("blas", blas_library())
        .add("adamw_kernel", c.inner.adamw)
        .add("transformers_libtorch", field("torch"))
        .add("transformers_version", field("transformers"))
        .add("transformers_blas", field("blas"))
        .add("transformers_threads", number(field("threads")))
        .add("transformers_attn_implementation", field("attn"))
        .add("transformers_class", field("class"))
        .add("transformers_adamw", field("adamw"))
        .add("python", python)
        .add("autoloco_s", ours_s)
        .add("transformers_s", theirs_s)
        .add("autoloco_tokens_per_s_repeats", ours_tps)
        .add("transformers_tokens_per_s_repeats", theirs_tps)
        .add("ratio_repeats", ratios)
        .add("autoloco_tokens_per_s", ours_median)
        .add("transformers_tokens_per_s", theirs_median)
        .add("ratio", ours_median / theirs_median)
        .add("autoloco_last_loss", loss)
        .add("transformers_last_loss", their_loss)
        .add("autoloco_rss_peak_bytes", our_peak)
        .add("autoloco_rss_baseline_bytes", rss_baseline)
        .add("transformers_rss_peak_bytes", their_peak)
        .add("transformers_rss_baseline_bytes", number(field("rss_baseline")))
        .add("profile", profile)
        .add("notes",
             "medians over alternating repeats (autoloco, then transformers, in turn; never "
             "together); autoloco runs on this build's LibTorch (" TORCH_VERSION
             ") and its BLAS, transformers on the Python env's torch (its own MKL and oneDNN): "
             "the comparison a user makes on this CPU, not of one LibTorch against itself; "
             "rss_baseline: resident before the model was built (libraries, MPI, Python); "
             "rss_peak: VmHWM of each process");
  }
  std::printf("%s\n", out.str().c_str());
  std::filesystem::remove_all(dir);
  return 0;
}

}  // namespace autoloco::bench
