// Test support for the elastic mode (docs/elastic.md): a lighthouse the test starts (on loopback,
// or on a lab's head node), each dc's launch of the tiny model, and what the dcs' run
// directories say (their quorums, their state hashes). The e2e, net and slurm suites share it.
#pragma once

#include <catch2/catch.hpp>

#include <map>
#include <memory>
#include <regex>
#include <string>
#include <vector>

#include "child_process.hpp"
#include "run_files.hpp"
#include "wait.hpp"

namespace autoloco::test {

// The tiny model of the fault tests, as overrides of configs/diloco.yaml: 1 layer, H = 4, a
// checkpoint every 8 steps, on the corpus in dir/data.
inline std::string elastic_sets(const std::string& dir, int steps) {
  return " --set model.n_layer=1 --set model.d_model=32 --set model.n_head=2"
         " --set model.seq_len=32 --set run.eval_every=0 --set run.log_every=4"
         " --set inner.warmup_steps=2 --set data.batch_size=2 --set interval.H=4"
         " --set run.threads=1 --set ckpt.every_steps=8 --set run.steps=" +
         std::to_string(steps) + " --set data.train=" + dir +
         "/data/train_*.bin --set data.val=" + dir + "/data/val_*.bin";
}

// autoloco-train on the tiny model, its run directory dir/runs/NAME.
inline std::string elastic_train_args(const std::string& dir, const std::string& name,
                                      int steps = 24) {
  return std::string(AUTOLOCO_TRAIN_EXE) + " " + AUTOLOCO_SOURCE_DIR + "/configs/diloco.yaml" +
         elastic_sets(dir, steps) + " --set run.out_dir=" + dir + "/runs --set run.name=" + name;
}

inline std::string mpirun_args(int ranks) {
  return std::string(AUTOLOCO_MPIEXEC) + " -n " + std::to_string(ranks) +
         " --oversubscribe --allow-run-as-root --bind-to none ";
}

// A lighthouse with a new key in `dir`. `prefix` runs it elsewhere (a lab's head node: it must
// exec the command, so that the pid is the lighthouse's) on `host`; port 0 takes a free one.
class Lighthouse {
 public:
  Lighthouse(const std::string& dir, const TestLimit& limit, const std::string& prefix = "",
             const std::string& host = "127.0.0.1", int port = 0)
      : dir_(dir), prefix_(prefix), host_(host) {
    REQUIRE(run_command(std::string(AUTOLOCO_LIGHTHOUSE_EXE) + " --make-key " + key() +
                        " > /dev/null") == 0);
    address_ = start(port, limit);
  }
  ~Lighthouse() {
    process_->signal(SIGTERM);
    process_->wait();
  }
  Lighthouse(const Lighthouse&) = delete;
  Lighthouse& operator=(const Lighthouse&) = delete;

  // Kills the lighthouse (SIGKILL: it keeps nothing) and starts a new one at the same address
  // with the same key; its log is lighthouse-N.log for the N-th restart.
  void kill_and_restart(const TestLimit& limit) {
    process_->signal(SIGKILL);
    process_->wait();
    ++restarts_;
    const std::string port = address_.substr(address_.rfind(':') + 1);
    REQUIRE(start(std::stoi(port), limit) == address_);
  }

  std::string key() const { return dir_ + "/key"; }
  std::string log_path() const {
    return dir_ + "/lighthouse" + (restarts_ > 0 ? "-" + std::to_string(restarts_) : "") + ".log";
  }
  std::string log() const { return read_text(log_path()); }
  bool running() { return process_->running(); }

  // autoloco-train's settings for dc `dc` of `dcs`, at least `min_dcs` in every round. Deaths
  // here are closed connections, seen at once, so the timeouts are generous: a slow machine must
  // not drop a dc. A test about a silent dc sets elastic.heartbeat_timeout_s itself.
  std::string elastic_args(int dc, int dcs, int min_dcs) const {
    return " --set elastic.lighthouse=" + address_ + " --set elastic.key_file=" + key() +
           " --set elastic.dc=" + std::to_string(dc) + " --set elastic.dcs=" + std::to_string(dcs) +
           " --set elastic.min_dcs=" + std::to_string(min_dcs) +
           " --set elastic.heartbeat_timeout_s=60 --set elastic.collective_timeout_s=120"
           " --set elastic.round_deadline_s=300 --set elastic.quorum_timeout_s=500";
  }

 private:
  // Starts the process and returns the address it listens on, once it says so.
  std::string start(int port, const TestLimit& limit) {
    process_ = std::make_unique<ChildProcess>(prefix_ + " " + AUTOLOCO_LIGHTHOUSE_EXE + " --host " +
                                                  host_ + " --port " + std::to_string(port) +
                                                  " --key-file " + key(),
                                              log_path());
    const std::regex listening("listening on ([0-9.]+:[0-9]+)");
    std::string log;
    wait_until(
        [&] {
          log = read_text(log_path());
          return std::regex_search(log, listening);
        },
        [&] { return process_->running() && limit.time_left(); });
    INFO(log);
    std::smatch m;
    REQUIRE(std::regex_search(log, m, listening));
    return m[1].str();
  }

  std::string dir_;
  std::string prefix_;
  std::string host_;
  std::string address_;
  int restarts_ = 0;
  std::unique_ptr<ChildProcess> process_;
};

// Waits for each process to end (bounded by the test's time) and returns their exit codes, -1
// for one still running.
inline std::vector<int> wait_all(std::vector<std::unique_ptr<ChildProcess>>& processes,
                                 const TestLimit& limit) {
  std::vector<int> codes;
  for (auto& p : processes) {
    wait_until([&] { return !p->running(); }, [&] { return limit.time_left(); });
    codes.push_back(p->running() ? -1 : p->wait());
  }
  return codes;
}

inline std::string run_summary(const std::string& dir, const std::string& name) {
  return read_text(dir + "/runs/" + name + "/summary.json");
}

inline std::string string_field(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\":\"([^\"]*)\"");
  return std::regex_search(json, m, re) ? m[1].str() : std::string();
}

// The raw text of a number in flat JSON, for comparisons bit for bit.
inline std::string number_text(const std::string& json, const std::string& key) {
  std::smatch m;
  const std::regex re("\"" + key + "\":(-?[0-9.eE+-]+)");
  return std::regex_search(json, m, re) ? m[1].str() : std::string();
}

// The final state hash in a dc's summary.json.
inline std::string final_hash(const std::string& dir, const std::string& name) {
  return string_field(run_summary(dir, name), "state_hash");
}

// The dcs of each round a dc committed (its syncs.jsonl), by round.
inline std::map<int, std::string> quorums(const std::string& dir, const std::string& name) {
  std::map<int, std::string> out;
  const std::regex re("\"round\":([0-9]+),.*\"quorum_dcs\":\\[([0-9,]*)\\]");
  for (const std::string& line : read_lines(dir + "/runs/" + name + "/syncs.jsonl")) {
    std::smatch m;
    if (std::regex_search(line, m, re)) out[std::stoi(m[1].str())] = m[2].str();
  }
  return out;
}

// The last round a dc committed, 0 before its first.
inline int committed_round(const std::string& dir, const std::string& name) {
  const std::map<int, std::string> q = quorums(dir, name);
  return q.empty() ? 0 : q.rbegin()->first;
}

// The logs dir/NAME.log, each under its name, for a failure's message.
inline std::string logs(const std::string& dir, const std::vector<std::string>& names) {
  std::string all;
  for (const auto& n : names)
    all += "--- " + n + "\n" + read_text(dir + "/" + n + ".log");
  return all;
}

}  // namespace autoloco::test
