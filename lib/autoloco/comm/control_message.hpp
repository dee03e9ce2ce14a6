// The messages between the lighthouse and the dcs (docs/elastic.md, protocol): a type and
// key=value fields, one per line, in text a person can read in a capture or a log. decode()
// is the lighthouse's parser of untrusted bytes (fuzzed: tests/fuzz/fuzz_control.cpp): any input
// either decodes or throws ProtocolError, within the limits below.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autoloco/util/error.hpp"

namespace autoloco {

// Bytes a peer sent that break the protocol: the connection is dropped, the run goes on.
class ProtocolError : public CommError {
 public:
  using CommError::CommError;
};

class ControlMessage {
 public:
  static constexpr size_t kMaxBytes = 64 * 1024;
  static constexpr size_t kMaxFields = 256;
  static constexpr size_t kMaxName = 32;  // type and keys: [a-z0-9_.]

  ControlMessage() = default;
  explicit ControlMessage(std::string type);

  const std::string& type() const { return type_; }
  const std::vector<std::pair<std::string, std::string>>& fields() const { return fields_; }

  // Adds a field (a key may appear once; a value is printable ASCII without a newline).
  ControlMessage& set(const std::string& key, std::string value);
  ControlMessage& set(const std::string& key, int64_t value);
  ControlMessage& set(const std::string& key, double value);  // round-trips exactly

  bool has(std::string_view key) const;
  // The field's value; a missing or malformed field is a ProtocolError naming the message's
  // type and the key.
  const std::string& text(std::string_view key) const;
  int64_t integer(std::string_view key) const;
  double real(std::string_view key) const;
  int64_t integer_or(std::string_view key, int64_t fallback) const;

  // "type\nkey=value\n...".
  std::string encode() const;
  static ControlMessage decode(std::string_view bytes);

 private:
  std::string type_;
  std::vector<std::pair<std::string, std::string>> fields_;
};

// Splits "a,b,c" (empty: none).
std::vector<std::string> split_list(std::string_view s, char sep = ',');
// dc ids as a field's value, "0,2,3", or "none" for no dc; and back (ProtocolError when one is
// not a number).
std::string join_ids(const std::vector<int>& ids);
std::vector<int> parse_ids(const std::string& text);
// Heals as a field's value, "J<S,..." (joiner J heals from source S); and back.
std::string join_heals(const std::vector<std::pair<int, int>>& heals);
std::vector<std::pair<int, int>> parse_heals(const std::string& text);

}  // namespace autoloco
