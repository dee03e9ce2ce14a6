// This process's resident memory, as the kernel counts it: what a rank really holds, against
// which the trainer's reported bytes by class (train/memory_plan.hpp) are checked.
#pragma once

#include <cstdint>

namespace autoloco {

// Resident bytes now (/proc/self/statm); 0 where the file cannot be read.
int64_t resident_bytes();
// The largest resident size this process has had (getrusage's ru_maxrss).
int64_t peak_resident_bytes();

}  // namespace autoloco
