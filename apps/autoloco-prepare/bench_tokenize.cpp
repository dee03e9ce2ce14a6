// autoloco-prepare --bench (run by autoloco-bench --tokenize): autoloco-prepare's SentencePiece
// encoding against SentencePiece's own spm_encode, on the same model and text, in MB of text per
// second. Ours is prepare's path:
// the text cut into documents by prepare's rule for one file, encoded by encode_documents on 1
// thread (the per-core figure the issue asks about) and on --threads threads. The baseline runs
// `spm_encode --model M --output_format=id` on the text, output to /dev/null, timed from outside
// (its process start included: milliseconds against seconds). Each of the three runs R times,
// in turn; the median of each is reported, and the ratios ours / spm_encode.
#include <fmt/format.h>
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "autoloco/data/documents.hpp"
#include "autoloco/data/parallel_encode.hpp"
#include "autoloco/data/sentencepiece_tokenizer.hpp"
#include "autoloco/util/error.hpp"
#include "autoloco/util/file_bytes.hpp"
#include "autoloco/util/json.hpp"
#include "autoloco/util/timer.hpp"
#include "bench_tokenize.hpp"

namespace autoloco {
namespace {

std::string read_text(const std::string& path) {
  auto text = read_file_bytes(path);
  if (!text) throw DataError("cannot read the text '" + path + "'");
  return std::move(*text);
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// Seconds of `spm_encode` over the text; throws when it cannot run or fails.
double time_spm_encode(const BenchTokenizeOptions& args) {
  const std::string command = fmt::format("'{}' --model='{}' --output_format=id < '{}' > /dev/null",
                                          args.spm_encode, args.model, args.text);
  const Timer timer;
  const int status = std::system(command.c_str());
  const double seconds = timer.seconds();
  if (status != 0) {
    throw DataError(
        fmt::format("the baseline '{}' failed (status {}); install sentencepiece "
                    "(scripts/setup.sh) or point --spm-encode at it",
                    command, status));
  }
  return seconds;
}

}  // namespace

int bench_tokenize(const BenchTokenizeOptions& args) {
  const auto sp = SentencePieceTokenizer::from_file(args.model);
  const std::string text = read_text(args.text);
  const uint64_t limit =
      std::max<uint64_t>(auto_document_bytes(1, text.size(), 0.05), kMinDocumentBytes);
  std::vector<std::string> docs;
  for (const auto& [offset, size] : cut_documents(text, limit))
    docs.push_back(text.substr(offset, size));
  const int threads = tokenizer_threads(args.threads);

  std::vector<double> ours_1, ours_n, spm;
  uint64_t tokens = 0;
  for (int64_t r = 0; r < args.repeats; ++r) {
    Timer t1;
    const auto one = encode_documents(*sp, docs, 1);
    ours_1.push_back(t1.seconds());
    Timer tn;
    encode_documents(*sp, docs, threads);
    ours_n.push_back(tn.seconds());
    spm.push_back(time_spm_encode(args));
    tokens = 0;
    for (const auto& doc : one)
      tokens += doc.size();
  }
  const double mb = static_cast<double>(text.size()) / 1e6;
  const double ours_1_mbs = mb / median(ours_1);
  const double ours_n_mbs = mb / median(ours_n);
  const double spm_mbs = mb / median(spm);
  const JsonObject out =
      JsonObject()
          .add("benchmark", "tokenize")
          .add("model", args.model)
          .add("vocab_size", sp->vocab_size())
          .add("text", args.text)
          .add("text_bytes", static_cast<int64_t>(text.size()))
          .add("documents", static_cast<int64_t>(docs.size()))
          .add("tokens", static_cast<int64_t>(tokens))
          .add("bytes_per_token", static_cast<double>(text.size()) / static_cast<double>(tokens))
          .add("repeats", args.repeats)
          .add("threads", threads)
          .add("ours_1_thread_mb_s", ours_1_mbs)
          .add("ours_threads_mb_s", ours_n_mbs)
          .add("spm_encode_mb_s", spm_mbs)
          .add("ratio_per_core", ours_1_mbs / spm_mbs)
          .add("ratio_threads", ours_n_mbs / spm_mbs);
  std::puts(out.str().c_str());
  return 0;
}

}  // namespace autoloco
