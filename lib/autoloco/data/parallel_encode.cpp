// Parallel tokenization of documents (see parallel_encode.hpp).
#include "autoloco/data/parallel_encode.hpp"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <thread>

namespace autoloco {

int tokenizer_threads(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1U, std::thread::hardware_concurrency()));
}

std::vector<std::vector<uint32_t>> encode_documents(const Tokenizer& tokenizer,
                                                    const std::vector<std::string>& texts,
                                                    int threads) {
  if (tokenizer.encodes_in_batches()) return tokenizer.encode_batch(texts);
  std::vector<std::vector<uint32_t>> tokens(texts.size());
  const size_t n = texts.size();
  std::atomic<size_t> next{0};
  std::exception_ptr error;
  std::mutex error_mutex;
  auto worker = [&] {
    for (size_t i = next++; i < n; i = next++) {
      try {
        tokenizer.encode(texts[i], tokens[i]);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(error_mutex);
        if (!error) error = std::current_exception();
        next = n;
      }
    }
  };
  std::vector<std::thread> pool;
  const size_t extra = std::min(static_cast<size_t>(tokenizer_threads(threads)), n);
  for (size_t t = 1; t < extra; ++t)
    pool.emplace_back(worker);
  worker();  // this thread is one of them
  for (auto& thread : pool)
    thread.join();
  if (error) std::rethrow_exception(error);
  return tokens;
}

}  // namespace autoloco
