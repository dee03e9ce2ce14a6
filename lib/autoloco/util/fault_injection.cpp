#include "autoloco/util/fault_injection.hpp"

#include <fmt/format.h>

#include <csignal>
#include <cstdlib>
#include <sstream>

#include "autoloco/util/error.hpp"
#include "autoloco/util/log.hpp"

namespace autoloco {
namespace {

constexpr const char* kVariable = "AUTOLOCO_FAULT";

std::vector<std::string> split(const std::string& text, char by) {
  std::vector<std::string> parts;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, by);)
    parts.push_back(part);
  return parts;
}

[[noreturn]] void bad(const std::string& entry, const std::string& why) {
  throw ConfigError(fmt::format(
      "{}: '{}': {}. Write e.g. stop:rank=1:step=6, kill:rank=1:step=6, error:rank=1:step=6, "
      "late:dc=1:seconds=2, stop-sync:dc=1:round=3, ckpt-fail:step=10, "
      "ckpt-slow:step=10:seconds=5 (comma-separated; test-only, docs/faults.md)",
      kVariable, entry, why));
}

template <class T>
T number(const std::string& entry, const std::string& key, const std::string& value) {
  std::istringstream in(value);
  T out{};
  in >> out;
  if (in.fail() || !in.eof() || out < 0)
    bad(entry, fmt::format("{}={} is not a number >= 0", key, value));
  return out;
}

Fault parse_one(const std::string& entry) {
  const std::vector<std::string> parts = split(entry, ':');
  if (parts.empty()) bad(entry, "an empty fault");
  Fault f;
  const std::string& kind = parts[0];
  if (kind == "stop") {
    f.kind = Fault::Kind::stop;
  } else if (kind == "kill") {
    f.kind = Fault::Kind::kill;
  } else if (kind == "late") {
    f.kind = Fault::Kind::late;
  } else if (kind == "stop-sync") {
    f.kind = Fault::Kind::stop_sync;
  } else if (kind == "error") {
    f.kind = Fault::Kind::error;
  } else if (kind == "ckpt-fail") {
    f.kind = Fault::Kind::ckpt_fail;
    f.rank = 0;
  } else if (kind == "ckpt-slow") {
    f.kind = Fault::Kind::ckpt_slow;
    f.rank = 0;
  } else {
    bad(entry, fmt::format(
                   "unknown kind '{}' (stop, kill, error, late, stop-sync, ckpt-fail or ckpt-slow)",
                   kind));
  }
  for (size_t i = 1; i < parts.size(); ++i) {
    const auto eq = parts[i].find('=');
    if (eq == std::string::npos) bad(entry, fmt::format("'{}' is not key=value", parts[i]));
    const std::string key = parts[i].substr(0, eq);
    const std::string value = parts[i].substr(eq + 1);
    if (key == "rank") {
      f.rank = number<int>(entry, key, value);
    } else if (key == "dc") {
      f.dc = number<int>(entry, key, value);
    } else if (key == "step") {
      f.step = number<int64_t>(entry, key, value);
    } else if (key == "round") {
      f.round = number<int64_t>(entry, key, value);
    } else if (key == "seconds") {
      f.seconds = number<double>(entry, key, value);
    } else {
      bad(entry, fmt::format("unknown field '{}'", key));
    }
  }
  const bool at_step =
      f.kind == Fault::Kind::stop || f.kind == Fault::Kind::kill || f.kind == Fault::Kind::error;
  if (at_step && (f.rank < 0 || f.step < 0))
    bad(entry, "stop, kill and error need rank= and step=");
  if (f.kind == Fault::Kind::late && (f.dc < 0 || f.seconds <= 0)) {
    bad(entry, "late needs dc= and seconds= (> 0)");
  }
  if (f.kind == Fault::Kind::stop_sync && (f.dc < 0 || f.round < 0)) {
    bad(entry, "stop-sync needs dc= and round=");
  }
  if (f.kind == Fault::Kind::ckpt_fail && f.step < 0) bad(entry, "ckpt-fail needs step=");
  if (f.kind == Fault::Kind::ckpt_slow && (f.step < 0 || f.seconds <= 0)) {
    bad(entry, "ckpt-slow needs step= and seconds= (> 0)");
  }
  return f;
}

}  // namespace

FaultPlan FaultPlan::parse(const std::string& text) {
  FaultPlan plan;
  plan.text_ = text;
  for (const std::string& entry : split(text, ',')) {
    if (!entry.empty()) plan.faults_.push_back(parse_one(entry));
  }
  plan.fired_.assign(plan.faults_.size(), false);
  return plan;
}

const FaultPlan& FaultPlan::from_env() {
  static const FaultPlan plan = [] {
    const char* text = std::getenv(kVariable);
    return text ? parse(text) : FaultPlan{};
  }();
  return plan;
}

void FaultPlan::at_step(int64_t step, int rank) const {
  for (const Fault& f : faults_) {
    if (f.step != step || f.rank != rank) continue;
    if (f.kind == Fault::Kind::stop) {
      log::warn("{}: stopping this rank (SIGSTOP) at step {}", kVariable, step);
      std::raise(SIGSTOP);
    } else if (f.kind == Fault::Kind::kill) {
      log::warn("{}: killing this rank (SIGKILL) at step {}", kVariable, step);
      std::raise(SIGKILL);
    }
  }
}

double FaultPlan::late_seconds(int dc, int64_t round) const {
  double late = 0.0;
  for (const Fault& f : faults_) {
    if (f.kind == Fault::Kind::late && f.dc == dc && (f.round < 0 || f.round == round)) {
      late += f.seconds;
    }
  }
  return late;
}

void FaultPlan::at_sync(int dc, int64_t round) const {
  for (size_t i = 0; i < faults_.size(); ++i) {
    const Fault& f = faults_[i];
    if (f.kind == Fault::Kind::stop_sync && f.dc == dc && f.round == round && !fired_[i]) {
      fired_[i] = true;
      log::warn("{}: stopping this rank (SIGSTOP) in the inter-dc all-reduce of round {}",
                kVariable, round);
      std::raise(SIGSTOP);
    }
  }
}

void FaultPlan::in_step(int64_t step, int rank) const {
  for (const Fault& f : faults_) {
    if (f.kind == Fault::Kind::error && f.step == step && f.rank == rank) {
      throw Error(
          fmt::format("an error injected by {} in step {} on the main thread", kVariable, step));
    }
  }
}

double FaultPlan::slow_checkpoint_s(int64_t step, int rank) const {
  double slow = 0.0;
  for (const Fault& f : faults_) {
    if (f.kind == Fault::Kind::ckpt_slow && f.step == step && f.rank == rank) slow += f.seconds;
  }
  return slow;
}

bool FaultPlan::fails_checkpoint(int64_t step, int rank) const {
  for (const Fault& f : faults_) {
    if (f.kind == Fault::Kind::ckpt_fail && f.step == step && f.rank == rank) return true;
  }
  return false;
}

}  // namespace autoloco
