// A minimal JSON object writer for metrics lines and summaries (flat or nested objects of
// numbers, strings, booleans, number arrays and arrays of objects). Keys keep insertion order.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace autoloco {

class JsonObject {
 public:
  JsonObject& add(const std::string& key, double value);
  JsonObject& add(const std::string& key, int64_t value);
  JsonObject& add(const std::string& key, int value) { return add(key, int64_t{value}); }
  JsonObject& add(const std::string& key, bool value);
  JsonObject& add(const std::string& key, const std::string& value);
  JsonObject& add(const std::string& key, const char* value) {
    return add(key, std::string(value));
  }
  JsonObject& add(const std::string& key, const std::vector<int64_t>& values);
  JsonObject& add(const std::string& key, const std::vector<double>& values);  // NaN as null
  JsonObject& add(const std::string& key, const std::vector<std::string>& values);
  JsonObject& add(const std::string& key, const JsonObject& value);
  JsonObject& add(const std::string& key, const std::vector<JsonObject>& values);
  JsonObject& add_null(const std::string& key);

  // One line, no trailing newline: suitable for .jsonl.
  std::string str() const;
  // One field per line, indented by two spaces, and a final newline: files people read
  // (a model's config.json).
  std::string pretty() const;

 private:
  void add_raw(const std::string& key, std::string encoded);
  std::vector<std::pair<std::string, std::string>> fields_;
};

// The value of a JSON integer literal of decimal digits only (no sign, exponent or fraction),
// or nullopt for anything else or a value past 2^64 - 1.
std::optional<uint64_t> parse_json_uint(const std::string& text);

// Quotes and escapes a string as a JSON string literal.
std::string json_quote(const std::string& text);

}  // namespace autoloco
