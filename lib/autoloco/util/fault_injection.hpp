// Faults injected on purpose, for the tests of docs/faults.md only: AUTOLOCO_FAULT holds a
// comma-separated list of faults, each a kind and its `key=value` fields joined by ':'.
//   stop:rank=R:step=S         world rank R stops itself (SIGSTOP) at the start of step S
//   kill:rank=R:step=S         world rank R kills itself (SIGKILL) at the start of step S
//   error:rank=R:step=S        world rank R's main thread throws an error in step S, after the
//                              step's stop agreement has started (what a bug or a bad input
//                              does there: the job must end, not hang)
//   late:dc=D:seconds=X[:round=K]
//                              every rank of dc D starts its inter-dc all-reduce X seconds
//                              late (in round K only, or in every round)
//   stop-sync:dc=D:round=K     every rank of dc D stops itself (SIGSTOP) as its first inter-dc
//                              all-reduce of round K starts (not a redo of the round): frozen
//                              inside the collective, its connections open, for the peers that
//                              wait on it
//   ckpt-fail:step=S[:rank=R]  rank R's (default 0) files of the checkpoint of step S fail to
//                              write, as on a full disk
//   ckpt-slow:step=S:seconds=X[:rank=R]
//                              rank R (default 0) takes X seconds longer to write its files of
//                              the checkpoint of step S, as on slow storage
// A job that has it set says so at its start. Not for production runs: nothing else reads it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autoloco {

struct Fault {
  enum class Kind { stop, kill, error, late, stop_sync, ckpt_fail, ckpt_slow };
  Kind kind = Kind::stop;
  int rank = -1;
  int dc = -1;
  int64_t step = -1;
  int64_t round = -1;  // late: -1 means every round
  double seconds = 0.0;
};

class FaultPlan {
 public:
  // The plan of AUTOLOCO_FAULT, parsed once (empty when it is unset). Throws ConfigError naming
  // the variable and the bad entry.
  static const FaultPlan& from_env();
  static FaultPlan parse(const std::string& text);

  bool empty() const { return faults_.empty(); }
  // The plan as written, for the start log.
  const std::string& text() const { return text_; }

  // At the start of inner step `step` on world rank `rank`: stops or kills this process when
  // the plan says so (after a warning line).
  void at_step(int64_t step, int rank) const;
  // In inner step `step` on world rank `rank`, its stop agreement started: throws an Error when
  // the plan says so.
  void in_step(int64_t step, int rank) const;
  // Seconds that dc `dc` starts the inter-dc all-reduce of round `round` late.
  double late_seconds(int dc, int64_t round) const;
  // As the inter-dc all-reduce of round `round` starts on a rank of dc `dc`: stops this process
  // when the plan says so (after a warning line).
  void at_sync(int dc, int64_t round) const;
  // The files of rank `rank` for the checkpoint of step `step` are to fail.
  bool fails_checkpoint(int64_t step, int rank) const;
  // Seconds that rank `rank` is to take longer writing its files of the checkpoint of `step`.
  double slow_checkpoint_s(int64_t step, int rank) const;

 private:
  std::vector<Fault> faults_;
  std::string text_;
  mutable std::vector<bool> fired_;  // stop-sync: once per process
};

}  // namespace autoloco
