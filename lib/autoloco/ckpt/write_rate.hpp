// How fast this rank can write a checkpoint where it will write it: a probe file is written,
// flushed to the disk and removed, so the start log can say how long a checkpoint will take
// (and whether ckpt.timeout_s leaves room for it) before the first one is due.
#pragma once

#include <cstdint>
#include <string>

namespace autoloco {

// Bytes per second of a durable write of `bytes` into a new file in `dir` (removed after).
// Throws Error naming the file when it cannot be written.
double measure_write_rate(const std::string& dir, int64_t bytes);

}  // namespace autoloco
