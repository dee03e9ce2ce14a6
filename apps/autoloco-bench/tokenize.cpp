// autoloco-bench --tokenize: autoloco-prepare's SentencePiece encoding against spm_encode. The
// measurement is autoloco-prepare --bench (apps/autoloco-prepare/bench_tokenize.cpp), run from
// the directory of this executable with the arguments given after --tokenize: Debian's
// libsentencepiece and LibTorch cannot share one process (lib/CMakeLists.txt), and this one has
// LibTorch.
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "autoloco/util/error.hpp"
#include "bench.hpp"

namespace autoloco::bench {

int tokenize(const Args& args) {
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe");
  const std::string prepare = (self.parent_path() / "autoloco-prepare").string();
  std::vector<std::string> words = {prepare, "--bench"};
  words.insert(words.end(), args.tokenize_args.begin(), args.tokenize_args.end());
  std::vector<char*> argv;
  for (auto& word : words)
    argv.push_back(word.data());
  argv.push_back(nullptr);
  ::execv(prepare.c_str(), argv.data());
  throw Error("--tokenize runs '" + prepare + "', which failed to start (" + std::strerror(errno) +
              "); build autoloco-prepare next to autoloco-bench");
}

}  // namespace autoloco::bench
