// autoloco-prepare --bench: the tokenizer benchmark (bench_tokenize.cpp). In this executable
// because SentencePiece cannot be loaded beside Debian's LibTorch; autoloco-bench --tokenize
// runs it.
#pragma once

#include <cstdint>
#include <string>

namespace autoloco {

struct BenchTokenizeOptions {
  std::string model;  // a SentencePiece model
  std::string text;   // the text to encode
  std::string spm_encode = "spm_encode";
  int threads = 0;  // 0: every core
  int64_t repeats = 3;
};

// Prints one JSON object; throws on errors.
int bench_tokenize(const BenchTokenizeOptions& options);

}  // namespace autoloco
