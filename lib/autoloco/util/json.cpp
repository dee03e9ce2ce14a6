#include "autoloco/util/json.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cmath>

namespace autoloco {

std::string json_quote(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          out += fmt::format("\\u{:04x}", static_cast<int>(c));
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

void JsonObject::add_raw(const std::string& key, std::string encoded) {
  for (auto& field : fields_) {
    if (field.first == key) {
      field.second = std::move(encoded);
      return;
    }
  }
  fields_.emplace_back(key, std::move(encoded));
}

JsonObject& JsonObject::add(const std::string& key, double value) {
  // JSON has no NaN or infinity: null tells a reader the value was not finite.
  add_raw(key, std::isfinite(value) ? fmt::format("{:.17g}", value) : "null");
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, int64_t value) {
  add_raw(key, fmt::format("{}", value));
  return *this;
}

std::optional<uint64_t> parse_json_uint(const std::string& text) {
  if (text.empty() || text.size() > 20) return std::nullopt;
  uint64_t value = 0;
  for (const char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    if (__builtin_mul_overflow(value, uint64_t{10}, &value) ||
        __builtin_add_overflow(value, static_cast<uint64_t>(c - '0'), &value)) {
      return std::nullopt;
    }
  }
  return value;
}

JsonObject& JsonObject::add_null(const std::string& key) {
  add_raw(key, "null");
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, bool value) {
  add_raw(key, value ? "true" : "false");
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, const std::string& value) {
  add_raw(key, json_quote(value));
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, const std::vector<int64_t>& values) {
  add_raw(key, fmt::format("[{}]", fmt::join(values, ",")));
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i)
    out += (i > 0 ? "," : "") + json_quote(values[i]);
  add_raw(key, out + "]");
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, const std::vector<double>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += std::isfinite(values[i]) ? fmt::format("{:.17g}", values[i]) : "null";
  }
  add_raw(key, out + "]");
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, const JsonObject& value) {
  add_raw(key, value.str());
  return *this;
}

JsonObject& JsonObject::add(const std::string& key, const std::vector<JsonObject>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    if (i > 0) out += ",";
    out += values[i].str();
  }
  add_raw(key, out + "]");
  return *this;
}

std::string JsonObject::str() const {
  std::string out = "{";
  for (size_t i = 0; i < fields_.size(); ++i) {
    if (i > 0) out += ",";
    out += json_quote(fields_[i].first) + ":" + fields_[i].second;
  }
  return out + "}";
}

std::string JsonObject::pretty() const {
  std::string out = "{\n";
  for (size_t i = 0; i < fields_.size(); ++i) {
    out += "  " + json_quote(fields_[i].first) + ": " + fields_[i].second;
    out += i + 1 < fields_.size() ? ",\n" : "\n";
  }
  return out + "}\n";
}

}  // namespace autoloco
