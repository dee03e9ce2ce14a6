// Limits that tests lower through the environment (a message's largest piece, an MPI call's
// largest count) so that small buffers cross them.
#pragma once

#include <cstddef>

namespace autoloco {

// The value of the environment variable `name` when it is a number of at least `minimum`,
// else `fallback`. Callers read it once (a function-local static): a limit does not change
// during a run.
size_t env_limit(const char* name, size_t fallback, size_t minimum = 1);

}  // namespace autoloco
