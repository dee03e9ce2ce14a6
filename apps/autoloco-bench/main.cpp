// autoloco-bench: performance measurements that print JSON.
//   mpirun -n N autoloco-bench --train [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N]
//                  [--peak-tflops F]
//   autoloco-bench --throughput [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N]
//                  [--repeats R]
//   autoloco-bench --hf-step [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N]
//                  [--repeats R] [--python PATH] [--hf-adamw fused|foreach|default]
//                  [--profile]
//   autoloco-bench --overlap [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N]
//                  [--repeats R]
//   autoloco-bench --optimizer [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N]
//                  [--repeats R]
//   mpirun -n N autoloco-bench --shard [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N]
//                  [--repeats R] [--modes M,M...] [--recompute none,blocks]
//   mpirun -n N autoloco-bench --comm [--ranks-per-dc R] [--sizes n1,n2,...] [--iters I]
//                  [--warmup W] [--link-gbps B [--mtu M]]
//   autoloco-bench --ckpt [--bytes N[K|M|G]] [--dir D] [--repeat R]
//   autoloco-bench --tokenize --sp-model M [--threads N] [--repeat R] [--spm-encode P] TEXT
// See train.cpp, shard.cpp, throughput.cpp, hf_step.cpp, overlap.cpp, optimizer.cpp, comm.cpp,
// link.cpp, ckpt.cpp and tokenize.cpp for what each measures.
#include <mpi.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <stdexcept>
#include <string>

#include "autoloco/util/error.hpp"
#include "autoloco/util/mpi_threads.hpp"
#include "bench.hpp"

namespace {

using namespace autoloco;
using autoloco::bench::Args;

constexpr const char* kUsage =
    "usage: mpirun -n N autoloco-bench --train [CONFIG.yaml] [--set k=v ...] [--steps N] "
    "[--warmup N] [--peak-tflops F]\n"
    "       autoloco-bench --throughput [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N] "
    "[--repeats R]\n"
    "       autoloco-bench --hf-step [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N] "
    "[--repeats R] [--python PATH] [--hf-adamw fused|foreach|default] [--profile]\n"
    "       autoloco-bench --overlap [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N] "
    "[--repeats R]\n"
    "       autoloco-bench --optimizer [CONFIG.yaml] [--set k=v ...] [--steps N] [--warmup N] "
    "[--repeats R]\n"
    "       mpirun -n N autoloco-bench --shard [CONFIG.yaml] [--set k=v ...] [--steps N] "
    "[--warmup N] [--repeats R] [--modes none,gradients,full] [--recompute none,blocks]\n"
    "       mpirun -n N autoloco-bench --comm [--ranks-per-dc R] [--sizes n1,n2,...] "
    "[--iters I] [--warmup W] [--link-gbps B [--mtu M]]\n"
    "       autoloco-bench --ckpt [--bytes N[K|M|G]] [--dir D] [--repeat R]\n"
    "       autoloco-bench --tokenize --sp-model M [--threads N] [--repeat R] "
    "[--spm-encode P] TEXT\n";

// std::stoll/stod alone would report "stoll" for "--steps ten": name the argument instead.
template <class T, class Convert>
T parse_number(const std::string& arg, const std::string& text, const char* kind, Convert convert) {
  size_t used = 0;
  T value{};
  try {
    value = convert(text, &used);
  } catch (const std::logic_error&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) throw ConfigError(arg + ": '" + text + "' is not " + kind);
  return value;
}

int64_t parse_int(const std::string& arg, const std::string& text) {
  return parse_number<int64_t>(arg, text, "an integer", [](const std::string& t, size_t* used) {
    return std::stoll(t, used);
  });
}

double parse_double(const std::string& arg, const std::string& text) {
  return parse_number<double>(
      arg, text, "a number", [](const std::string& t, size_t* used) { return std::stod(t, used); });
}

std::vector<int64_t> parse_sizes(const std::string& text) {
  std::vector<int64_t> sizes;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    sizes.push_back(parse_int("--sizes", item));
    if (sizes.back() <= 0) throw ConfigError("--sizes: every size must be > 0 floats");
  }
  if (sizes.empty()) throw ConfigError("--sizes needs at least one size");
  return sizes;
}

// "a,b,c": its items, none empty.
std::vector<std::string> split_list(const std::string& text) {
  std::vector<std::string> items;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) {
    if (item.empty()) throw ConfigError("an empty item in the list '" + text + "'");
    items.push_back(item);
  }
  return items;
}

// "536870912", "512M", "1G", "64KiB": bytes (K, M, G, T are powers of 1024).
int64_t parse_bytes(const std::string& text) {
  size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::logic_error&) {
    throw ConfigError("--bytes: '" + text + "' is not a size (e.g. 536870912, 512M, 1G)");
  }
  std::string suffix = text.substr(used);
  for (const char* tail : {"iB", "B", "i"}) {
    const std::string t = tail;
    if (suffix.size() > t.size() && suffix.compare(suffix.size() - t.size(), t.size(), t) == 0) {
      suffix.erase(suffix.size() - t.size());
      break;
    }
  }
  int shift = -1;
  if (suffix.empty() || suffix == "B") shift = 0;
  if (suffix == "K" || suffix == "k") shift = 10;
  if (suffix == "M" || suffix == "m") shift = 20;
  if (suffix == "G" || suffix == "g") shift = 30;
  if (suffix == "T" || suffix == "t") shift = 40;
  if (shift < 0 || value <= 0 || value > (int64_t{1} << (62 - shift))) {
    throw ConfigError("--bytes: '" + text + "' is not a positive size (e.g. 536870912, 512M, 1G)");
  }
  const int64_t bytes = value << shift;
  if (bytes % 4 != 0) throw ConfigError("--bytes: must be a multiple of 4 (float32 values)");
  return bytes;
}

Args parse_args(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw ConfigError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--train") {
      a.train = true;
    } else if (arg == "--throughput") {
      a.throughput = true;
    } else if (arg == "--hf-step") {
      a.hf_step = true;
    } else if (arg == "--profile") {
      a.profile = true;
    } else if (arg == "--python") {
      a.python = value();
    } else if (arg == "--hf-adamw") {
      a.hf_adamw = value();
      if (a.hf_adamw != "fused" && a.hf_adamw != "foreach" && a.hf_adamw != "default") {
        throw ConfigError("--hf-adamw must be fused, foreach or default, not '" + a.hf_adamw + "'");
      }
    } else if (arg == "--overlap") {
      a.overlap = true;
    } else if (arg == "--optimizer") {
      a.optimizer = true;
    } else if (arg == "--shard") {
      a.shard = true;
    } else if (arg == "--comm") {
      a.comm = true;
    } else if (arg == "--ckpt") {
      a.ckpt = true;
    } else if (arg == "--tokenize") {
      a.tokenize = true;
      a.tokenize_args.assign(argv + i + 1, argv + argc);
      break;
    } else if (arg == "--bytes") {
      a.ckpt_bytes = parse_bytes(value());
    } else if (arg == "--dir") {
      a.ckpt_dir = value();
    } else if (arg == "--set") {
      a.overrides.push_back(value());
    } else if (arg == "--steps") {
      a.steps = parse_int(arg, value());
    } else if (arg == "--warmup") {
      a.warmup = parse_int(arg, value());
    } else if (arg == "--repeats" || arg == "--repeat") {
      a.repeats = parse_int(arg, value());
    } else if (arg == "--modes") {
      a.shard_modes = split_list(value());
    } else if (arg == "--recompute") {
      a.recompute = split_list(value());
    } else if (arg == "--ranks-per-dc") {
      a.ranks_per_dc = static_cast<int>(parse_int(arg, value()));
    } else if (arg == "--peak-tflops") {
      a.peak_tflops = parse_double(arg, value());
    } else if (arg == "--sizes") {
      a.sizes = parse_sizes(value());
    } else if (arg == "--link-gbps") {
      a.link_gbps = parse_double(arg, value());
      if (!(a.link_gbps > 0.0) || !std::isfinite(a.link_gbps)) {
        throw ConfigError("--link-gbps must be > 0: the shaped rate of each host's link in Gbit/s");
      }
    } else if (arg == "--mtu") {
      a.mtu = parse_int(arg, value());
      if (a.mtu < 576 || a.mtu > 65535) {
        throw ConfigError("--mtu must be 576 to 65535: the link's MTU in bytes (Ethernet: 1500)");
      }
    } else if (arg == "--iters") {
      a.iters = parse_int(arg, value());
    } else if (arg == "-h" || arg == "--help") {
      std::fputs(kUsage, stdout);
      std::exit(0);
    } else if (!arg.empty() && arg[0] != '-' && a.config_path.empty()) {
      a.config_path = arg;
    } else {
      throw ConfigError("unknown argument '" + arg + "'\n" + kUsage);
    }
  }
  if (int{a.train} + int{a.shard} + int{a.throughput} + int{a.hf_step} + int{a.overlap} +
          int{a.optimizer} + int{a.comm} + int{a.ckpt} + int{a.tokenize} !=
      1) {
    throw ConfigError(
        std::string("choose one benchmark: --train, --shard, --throughput, --hf-step, "
                    "--overlap, --optimizer, --comm, --ckpt or --tokenize\n") +
        kUsage);
  }
  if (a.steps <= 0 || a.warmup < 0 || a.repeats <= 0 || a.iters <= 0 || a.ranks_per_dc <= 0) {
    throw ConfigError("--steps, --repeats, --iters and --ranks-per-dc must be > 0, --warmup >= 0");
  }
  // !(x > 0) also refuses NaN.
  if (!(a.peak_tflops > 0.0) || !std::isfinite(a.peak_tflops)) {
    throw ConfigError(
        "--peak-tflops must be > 0: the accelerator's dense peak in TFLOP/s that MFU divides by "
        "(default 790, an H200 in bf16)");
  }
  return a;
}

}  // namespace

int main(int argc, char** argv) {
  // --tokenize becomes another executable: before MPI starts, whose runtime would see this
  // process vanish without MPI_Finalize.
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) != "--tokenize") continue;
    try {
      return bench::tokenize(parse_args(argc, argv));
    } catch (const std::exception& e) {
      std::fprintf(stderr, "error: %s\n", e.what());
      return 2;
    }
  }
  autoloco::init_mpi_multithreaded(&argc, &argv);
  int code = 0;
  try {
    const Args args = parse_args(argc, argv);
    code = args.train        ? bench::train(args)
           : args.shard      ? bench::shard(args)
           : args.throughput ? bench::throughput(args)
           : args.hf_step    ? bench::hf_step(args)
           : args.overlap    ? bench::overlap(args)
           : args.optimizer  ? bench::optimizer(args)
           : args.comm       ? bench::comm(args)
                             : bench::ckpt(args);
  } catch (const std::exception& e) {
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    std::fprintf(stderr, "[rank %d] error: %s\n", rank, e.what());
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  MPI_Finalize();
  return code;
}
