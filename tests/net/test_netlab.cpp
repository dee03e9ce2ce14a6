// The network lab (scripts/netlab.sh) and autoloco across its hosts: a lab comes up with its
// hosts named, addressed and shaped, and goes away leaving nothing, also when its command fails
// or is signalled; DiLoCo across 2 hosts over TCP ends bitwise equal to the same run on one host;
// wan.mode real reports the measured and the model's link seconds, and the start log names each
// dc's hosts, its threads, and warns when a dc spans hosts; the link benchmark runs across hosts.
// Each test makes its own lab (its own name), so that they can run side by side.
#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "../support/run_files.hpp"
#include "../support/temp_dir.hpp"
#include "../support/tiny_corpus.hpp"

using autoloco::test::count_lines;
using autoloco::test::json_number;
using autoloco::test::read_lines;
using autoloco::test::read_text;

namespace {

const std::string kNetlab = std::string(AUTOLOCO_SOURCE_DIR) + "/scripts/netlab.sh";

struct Result {
  int code = 0;
  std::string out;
};

// Runs a shell command, its stdout and stderr together into `log`.
Result shell(const std::string& command, const std::string& log) {
  const int status = std::system((command + " > " + log + " 2>&1").c_str());
  return {WIFEXITED(status) ? WEXITSTATUS(status) : 128, read_text(log)};
}

// What the lab `name` left in the system: namespaces, hosts files, state.
std::string leftovers(const std::string& name, const std::string& dir) {
  const Result r = shell("ip netns list | grep -E '^" + name + "-' ; ls -d /etc/netns/" + name +
                             "-* /run/netlab/" + name + " 2>/dev/null; true",
                         dir + "/leftovers.txt");
  return r.out;
}

// The tiny model of the e2e suite on the tiny corpus in dir/data, one thread per rank (threads
// that follow each host's cores would differ between placements).
std::string tiny_args(const std::string& dir, const std::string& name) {
  autoloco::test::write_tiny_corpus(dir + "/data");
  return std::string(AUTOLOCO_SOURCE_DIR) + "/configs/diloco.yaml" +
         " --set model.n_layer=2 --set model.d_model=32 --set model.n_head=2"
         " --set model.seq_len=32 --set run.steps=40 --set run.eval_every=20 --set run.log_every=10"
         " --set inner.warmup_steps=5 --set inner.lr=0.01 --set data.batch_size=4"
         " --set interval.H=10 --set run.threads=1 --set ckpt.every_steps=20"
         " --set data.train=" +
         dir + "/data/train_*.bin --set data.val=" + dir +
         "/data/val_*.bin --set run.out_dir=" + dir + "/runs --set run.name=" + name;
}

std::string diff_line(const std::string& diff, const std::string& dataset) {
  const size_t at = diff.find("  " + dataset);
  if (at == std::string::npos) return "";
  return diff.substr(at, diff.find('\n', at) - at);
}

}  // namespace

TEST_CASE("net: a lab comes up named, addressed and shaped, and down leaves nothing", "[net]") {
  const autoloco::test::TempDir tmp("net-lab");
  const std::string dir = tmp.str();
  const std::string name = "nlup";
  shell(kNetlab + " down --name " + name, dir + "/pre.txt");  // a lab left by a killed test
  const Result up = shell(kNetlab + " up 2 --rate 100mbit --name " + name, dir + "/up.txt");
  INFO(up.out);
  REQUIRE(up.code == 0);
  const Result host = shell(kNetlab + " exec h1 --name " + name +
                                " -- sh -c 'hostname; ip -4 -br addr show eth0; ip route; "
                                "tc qdisc show dev eth0; getent hosts " +
                                name + "-h0'",
                            dir + "/host.txt");
  INFO(host.out);
  CHECK(host.code == 0);
  CHECK(host.out.find(name + "-h1\n") == 0);
  CHECK(host.out.find("10.77.0.2/24") != std::string::npos);
  CHECK(host.out.find("tbf") != std::string::npos);
  CHECK(host.out.find("rate 100Mbit") != std::string::npos);
  CHECK(host.out.find("10.77.0.1") != std::string::npos);
  // Nothing routes out of the lab: its subnet only, no default route.
  CHECK(host.out.find("default") == std::string::npos);
  // The names resolve inside the lab only.
  const Result outside = shell("getent hosts " + name + "-h0", dir + "/outside.txt");
  CHECK(outside.code != 0);
  const Result twice = shell(kNetlab + " up 2 --name " + name, dir + "/twice.txt");
  CHECK(twice.code != 0);
  CHECK(twice.out.find("is up already") != std::string::npos);

  const Result down = shell(kNetlab + " down --name " + name, dir + "/down.txt");
  INFO(down.out);
  CHECK(down.code == 0);
  CHECK(leftovers(name, dir).empty());
}

TEST_CASE("net: a lab for one command is removed when it fails or is signalled", "[net]") {
  const autoloco::test::TempDir tmp("net-with");
  const std::string dir = tmp.str();
  const Result failed =
      shell(kNetlab + " with 2 --name nlfail -- sh -c 'exit 3'", dir + "/failed.txt");
  INFO(failed.out);
  CHECK(failed.code == 3);
  CHECK(leftovers("nlfail", dir).empty());

  // Signalled once its lab is up (its state file exists), not after a fixed time; should the lab
  // end before that, the signal finds nothing and the status says how it ended. Its command
  // outlasts any wait for the lab on a loaded machine, and ends within ctest's TIMEOUT should
  // the signal not reach it.
  const Result signalled =
      shell("(" + kNetlab +
                " with 2 --name nlsig -- sleep 300 & pid=$!;"
                " until [ -e /run/netlab/nlsig/rate ]; do kill -0 $pid 2>/dev/null || break;"
                " sleep 0.1; done; kill -TERM $pid; wait $pid; echo status $?)",
            dir + "/signalled.txt");
  INFO(signalled.out);
  CHECK(signalled.out.find("status 143") != std::string::npos);
  CHECK(leftovers("nlsig", dir).empty());

  const Result user =
      shell("setpriv --reuid=65534 --regid=65534 --clear-groups " + kNetlab + " up 1 --name nluser",
            dir + "/user.txt");
  CHECK(user.code != 0);
  CHECK(user.out.find("needs root") != std::string::npos);
}

TEST_CASE("net: diloco across 2 lab hosts over TCP equals the run on one host", "[net]") {
  const autoloco::test::TempDir tmp("net-diloco");
  const std::string dir = tmp.str();
  const std::string mpi =
      std::string(AUTOLOCO_MPIEXEC) + " -n 4 --oversubscribe --allow-run-as-root --bind-to none ";
  const Result local = shell(
      mpi + AUTOLOCO_TRAIN_EXE + " " + tiny_args(dir, "local") + " --set topology.ranks_per_dc=2",
      dir + "/local.txt");
  INFO(local.out);
  REQUIRE(local.code == 0);
  // 2 dcs of 2 ranks, each dc on its own host: the inter-dc ring crosses the shaped links.
  const Result lab = shell(kNetlab + " with 2 --rate 200mbit --name nldiloco -- " + kNetlab +
                               " run --dcs 2 --ranks-per-dc 2 -- " + AUTOLOCO_TRAIN_EXE + " " +
                               tiny_args(dir, "lab") + " --set topology.ranks_per_dc=2",
                           dir + "/lab.txt");
  INFO(lab.out);
  REQUIRE(lab.code == 0);
  CHECK(lab.out.find("dc 0: ranks 0-1 on nldiloco-h0 | threads 1,1") != std::string::npos);
  CHECK(lab.out.find("dc 1: ranks 2-3 on nldiloco-h1 | threads 1,1") != std::string::npos);
  CHECK(lab.out.find("spans the hosts") == std::string::npos);
  const std::string summary = read_text(dir + "/runs/lab/summary.json");
  CHECK(summary.find(R"("hosts":["nldiloco-h1"])") != std::string::npos);

  const Result diff =
      shell(std::string(AUTOLOCO_CKPT_EXE) + " diff " + dir + "/runs/local/checkpoints/step_40 " +
                dir + "/runs/lab/checkpoints/step_40",
            dir + "/diff.txt");
  INFO(diff.out);
  REQUIRE(diff.code == 0);
  CHECK(diff_line(diff.out, "global.h5:outer/anchor").find("identical") != std::string::npos);
  CHECK(diff_line(diff.out, "dc_1.h5:replica/values").find("identical") != std::string::npos);
  CHECK(json_number(summary, "final_eval_loss") ==
        json_number(read_text(dir + "/runs/local/summary.json"), "final_eval_loss"));
}

TEST_CASE("net: wan.mode real measures each sync and the log warns of a dc across hosts", "[net]") {
  const autoloco::test::TempDir tmp("net-real");
  const std::string dir = tmp.str();
  // 2 dcs of 2 ranks, one rank per host: each dc spans 2 hosts. Open MPI's tree spawn off.
  const Result lab = shell(kNetlab + " with 4 --rate 50mbit --name nlreal -- " + kNetlab +
                               " run --dcs 2 --ranks-per-dc 2 --ranks-per-host 1 "
                               "--no-tree-spawn -- " +
                               AUTOLOCO_TRAIN_EXE + " " + tiny_args(dir, "real") +
                               " --set topology.ranks_per_dc=2 --set wan.mode=real",
                           dir + "/lab.txt");
  INFO(lab.out);
  REQUIRE(lab.code == 0);
  CHECK(lab.out.find("dc 1: ranks 2-3 on nlreal-h2,nlreal-h3 | threads 1,1") != std::string::npos);
  CHECK(lab.out.find("dc 0 spans the hosts nlreal-h0,nlreal-h1") != std::string::npos);
  CHECK(lab.out.find("wan.mode real: each sync's link time is measured") != std::string::npos);
  const std::string run = dir + "/runs/real";
  const std::string summary = read_text(run + "/summary.json");
  INFO(summary);
  CHECK(summary.find(R"("mode":"real")") != std::string::npos);
  CHECK(json_number(summary, "link_s") > 0.0);
  CHECK(json_number(summary, "model_link_s") > 0.0);
  // Every sync blocks: the exposed link time is the measured one.
  CHECK(json_number(summary, "exposed_link_s") == json_number(summary, "link_s"));
  CHECK(json_number(summary, "link_s") != json_number(summary, "model_link_s"));
  CHECK(count_lines(run + "/syncs.jsonl") == 4);
  for (const std::string& line : read_lines(run + "/syncs.jsonl")) {
    INFO(line);
    CHECK(json_number(line, "link_s") > 0.0);
    CHECK(json_number(line, "model_link_s") > 0.0);
  }
}

TEST_CASE("net: the link benchmark runs across lab hosts against the model", "[net]") {
  const autoloco::test::TempDir tmp("net-bench");
  const std::string dir = tmp.str();
  const Result bench = shell(kNetlab + " with 2 --rate 200mbit --name nlbench -- " + kNetlab +
                                 " run --dcs 2 --ranks-per-dc 1 -- " + AUTOLOCO_BENCH_EXE +
                                 " --comm --link-gbps 0.2 --sizes 4096,65536 --iters 2 "
                                 "--warmup 1 2>" +
                                 dir + "/bench.err",
                             dir + "/bench.json");
  INFO(bench.out << read_text(dir + "/bench.err"));
  REQUIRE(bench.code == 0);
  CHECK(bench.out.find(R"("benchmark":"link")") != std::string::npos);
  CHECK(json_number(bench.out, "rate_gbps") == 0.2);
  CHECK(json_number(bench.out, "latency_ms") > 0.0);
  CHECK(json_number(bench.out, "measured_s") > 0.0);
  CHECK(json_number(bench.out, "model_s") > 0.0);
  // Each host sent 2 (G - 1) / G of the 16 kB vector.
  CHECK(json_number(bench.out, "host_sent_bytes") == 16384);
}
