// A file that is created, never written over: its bytes go to a temporary name beside it, reach
// the disk, and only then take the final name, and only if no file has that name. Exports rely
// on it (a model handed to another tool is never clobbered by a second export into the same
// directory), and a crash at any moment leaves either no file or the complete one, plus at most a
// stray temporary ".<name>.tmp-*".
#pragma once

#include <cstddef>
#include <string>

namespace autoloco {

class NewFile {
 public:
  // Creates the temporary file beside `path`. Throws Error naming `path` when it already exists
  // or the temporary cannot be created.
  explicit NewFile(std::string path);
  // Removes the temporary file unless commit() succeeded.
  ~NewFile();
  NewFile(const NewFile&) = delete;
  NewFile& operator=(const NewFile&) = delete;

  // Appends `size` bytes. Throws Error naming the file (a full disk, an I/O error).
  void write(const void* data, size_t size);
  // Flushes the data, gives it the final name without replacing any file that appeared there
  // meanwhile, and flushes the directory. Throws Error naming the file.
  void commit();

  const std::string& path() const { return path_; }

 private:
  std::string path_;
  std::string tmp_;
  int fd_ = -1;
  bool committed_ = false;
};

// Writes `text` as a new file `path` through NewFile: an existing file stays as it was and the
// call throws Error naming it.
void write_new_file(const std::string& path, const std::string& text);

// Gives `from` the name `to` unless a file named `to` exists (then Error naming `to`, and `from`
// is left where it was), then flushes the directory. Both names are in one directory.
void rename_no_replace(const std::string& from, const std::string& to);

}  // namespace autoloco
