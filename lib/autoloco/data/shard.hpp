// Token shard format (llm.c's): a 256 x int32 little-endian header (magic, version, token
// count) followed by the tokens. Writer is atomic; reader memory-maps and validates on open.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace autoloco {

enum class TokenWidth { u16, u32 };

inline constexpr int kShardHeaderInts = 256;
inline constexpr uint64_t kShardHeaderBytes = kShardHeaderInts * sizeof(int32_t);
// uint16 tokens (GPT-2 sized vocabularies).
inline constexpr int32_t kShardMagicU16 = 20240520;
inline constexpr int32_t kShardVersionU16 = 1;
// uint32 tokens: llm.c's llama-3 variant, for vocabularies over 65,536.
inline constexpr int32_t kShardMagicU32 = 20240801;
inline constexpr int32_t kShardVersionU32 = 7;

// Bytes per token of a width.
inline uint64_t token_bytes(TokenWidth width) {
  return width == TokenWidth::u16 ? 2 : 4;
}

// Writes `tokens` to path + ".tmp" and renames it onto `path`, so a crash never leaves a
// half-written shard under the real name. A token too large for `width` is a DataError.
void write_shard(const std::string& path, const std::vector<uint32_t>& tokens, TokenWidth width);

// A read-only, memory-mapped token shard. Move-only; unmaps on destruction.
class Shard {
 public:
  // Opens and validates the header and file size; throws DataError naming the file.
  explicit Shard(const std::string& path);
  ~Shard();
  Shard(Shard&& other) noexcept;
  Shard& operator=(Shard&& other) noexcept;
  Shard(const Shard&) = delete;
  Shard& operator=(const Shard&) = delete;

  const std::string& path() const { return path_; }
  TokenWidth width() const { return width_; }
  uint64_t size() const { return count_; }

  // Token i; throws std::out_of_range past the end.
  uint32_t token(uint64_t i) const;
  // Copies tokens [start, start + n) widened to int64 (torch's index type) into out.
  void copy_tokens(uint64_t start, int64_t n, int64_t* out) const;
  // Largest token id (0 for an empty shard). A full scan: call once, not per batch.
  uint32_t max_token() const;

 private:
  void release() noexcept;
  uint32_t load(uint64_t i) const;

  std::string path_;
  const unsigned char* map_ = nullptr;
  uint64_t map_bytes_ = 0;
  uint64_t count_ = 0;
  TokenWidth width_ = TokenWidth::u16;
};

}  // namespace autoloco
