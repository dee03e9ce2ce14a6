// Running another executable to its end, its output going where ours goes: how the trainer has
// autoloco-prepare tokenize its tasks (SentencePiece cannot share a process with LibTorch).
#pragma once

#include <string>
#include <vector>

namespace autoloco {

// Runs argv[0] (a path) with `argv` and waits for it. Returns its exit status, or 128 + the
// signal that ended it. Throws Error naming the executable when it cannot be started.
int run_to_end(const std::vector<std::string>& argv);

// The executable `name` in the directory of the running one (/proc/self/exe): the apps of one
// build or installation sit together.
std::string sibling_executable(const std::string& name);

}  // namespace autoloco
