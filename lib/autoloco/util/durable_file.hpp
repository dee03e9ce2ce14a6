// Writes that survive a crash or a power cut at any moment: a file is written under a
// temporary name, flushed to the disk, then renamed over the target, and the directory entry is
// flushed too. Checkpoints rely on these.
#pragma once

#include <string>

namespace autoloco {

// Replaces `path` with `text` atomically and durably. Throws Error naming the file.
void write_file_durable(const std::string& path, const std::string& text);

// Flushes a file's data to the disk (fsync). Throws Error naming the file.
void fsync_file(const std::string& path);

// Flushes a directory's entries (after a create, rename or remove inside it).
void fsync_directory(const std::string& dir);

// rename(2) of `from` to `to`, then both parents flushed. Throws Error naming both.
void rename_durable(const std::string& from, const std::string& to);

}  // namespace autoloco
