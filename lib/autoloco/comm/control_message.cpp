#include "autoloco/comm/control_message.hpp"

#include <fmt/format.h>

#include <charconv>
#include <cmath>
#include <cstdio>

namespace autoloco {
namespace {

bool valid_name(std::string_view s) {
  if (s.empty() || s.size() > ControlMessage::kMaxName) return false;
  for (const char c : s) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '.';
    if (!ok) return false;
  }
  return true;
}

bool valid_value(std::string_view s) {
  for (const char c : s) {
    if (c < 0x20 || c > 0x7e) return false;
  }
  return true;
}

// A name as it may be quoted in an error: untrusted bytes never reach a log unescaped.
std::string printable(std::string_view s) {
  std::string out;
  for (const char c : s.substr(0, 40)) {
    if (c >= 0x20 && c <= 0x7e) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
  }
  if (s.size() > 40) out += "...";
  return out;
}

}  // namespace

ControlMessage::ControlMessage(std::string type) : type_(std::move(type)) {
  if (!valid_name(type_)) throw ProtocolError("control message: invalid type '" + type_ + "'");
}

ControlMessage& ControlMessage::set(const std::string& key, std::string value) {
  if (!valid_name(key)) throw ProtocolError(fmt::format("'{}': invalid key '{}'", type_, key));
  if (!valid_value(value)) {
    throw ProtocolError(fmt::format("'{}': the value of '{}' is not printable", type_, key));
  }
  if (has(key)) throw ProtocolError(fmt::format("'{}': '{}' given twice", type_, key));
  fields_.emplace_back(key, std::move(value));
  return *this;
}

ControlMessage& ControlMessage::set(const std::string& key, int64_t value) {
  return set(key, std::to_string(value));
}

ControlMessage& ControlMessage::set(const std::string& key, double value) {
  // 17 significant digits round-trip every double.
  return set(key, fmt::format("{:.17g}", value));
}

bool ControlMessage::has(std::string_view key) const {
  for (const auto& [k, v] : fields_) {
    if (k == key) return true;
  }
  return false;
}

const std::string& ControlMessage::text(std::string_view key) const {
  for (const auto& [k, v] : fields_) {
    if (k == key) return v;
  }
  throw ProtocolError(fmt::format("'{}' message without its '{}' field", type_, key));
}

int64_t ControlMessage::integer(std::string_view key) const {
  const std::string& v = text(key);
  int64_t out = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), out);
  if (ec != std::errc() || end != v.data() + v.size() || v.empty()) {
    throw ProtocolError(
        fmt::format("'{}' message: '{}' is not an integer ('{}')", type_, key, printable(v)));
  }
  return out;
}

double ControlMessage::real(std::string_view key) const {
  const std::string& v = text(key);
  // strtod over a bounded copy: from_chars for doubles needs a newer libstdc++ than Debian 12's
  // for every format we write.
  char* end = nullptr;
  const double out = std::strtod(v.c_str(), &end);
  if (v.empty() || end != v.c_str() + v.size() || !std::isfinite(out)) {
    throw ProtocolError(
        fmt::format("'{}' message: '{}' is not a finite number ('{}')", type_, key, printable(v)));
  }
  return out;
}

int64_t ControlMessage::integer_or(std::string_view key, int64_t fallback) const {
  return has(key) ? integer(key) : fallback;
}

std::string ControlMessage::encode() const {
  std::string out = type_ + "\n";
  for (const auto& [k, v] : fields_) {
    out += k;
    out += '=';
    out += v;
    out += '\n';
  }
  return out;
}

ControlMessage ControlMessage::decode(std::string_view bytes) {
  if (bytes.size() > kMaxBytes) {
    throw ProtocolError(
        fmt::format("control message of {} bytes (at most {})", bytes.size(), kMaxBytes));
  }
  if (bytes.empty() || bytes.back() != '\n') {
    throw ProtocolError("control message does not end with a newline");
  }
  size_t line_end = bytes.find('\n');
  const std::string_view type = bytes.substr(0, line_end);
  if (!valid_name(type)) {
    throw ProtocolError("control message with an invalid type '" + printable(type) + "'");
  }
  ControlMessage m{std::string(type)};
  size_t pos = line_end + 1;
  while (pos < bytes.size()) {
    line_end = bytes.find('\n', pos);
    const std::string_view line = bytes.substr(pos, line_end - pos);
    pos = line_end + 1;
    const size_t eq = line.find('=');
    if (eq == std::string_view::npos) {
      throw ProtocolError(
          fmt::format("'{}' message: line '{}' is not key=value", m.type_, printable(line)));
    }
    if (m.fields_.size() == kMaxFields) {
      throw ProtocolError(
          fmt::format("'{}' message with more than {} fields", m.type_, kMaxFields));
    }
    const std::string_view key = line.substr(0, eq);
    if (!valid_name(key)) {
      throw ProtocolError(fmt::format("'{}' message: invalid key '{}'", m.type_, printable(key)));
    }
    const std::string_view value = line.substr(eq + 1);
    if (!valid_value(value)) {
      throw ProtocolError(
          fmt::format("'{}' message: the value of '{}' is not printable", m.type_, key));
    }
    if (m.has(key)) {
      throw ProtocolError(fmt::format("'{}' message: '{}' given twice", m.type_, key));
    }
    m.fields_.emplace_back(std::string(key), std::string(value));
  }
  return m;
}

std::vector<std::string> split_list(std::string_view s, char sep) {
  std::vector<std::string> out;
  if (s.empty()) return out;
  size_t pos = 0;
  while (true) {
    const size_t next = s.find(sep, pos);
    out.emplace_back(s.substr(pos, next == std::string_view::npos ? next : next - pos));
    if (next == std::string_view::npos) break;
    pos = next + 1;
  }
  return out;
}

std::string join_ids(const std::vector<int>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i)
    s += (i ? "," : "") + std::to_string(ids[i]);
  return s.empty() ? "none" : s;
}

std::vector<int> parse_ids(const std::string& text) {
  std::vector<int> ids;
  if (text == "none") return ids;
  for (const std::string& s : split_list(text)) {
    const bool digits =
        !s.empty() && s.size() <= 9 && s.find_first_not_of("0123456789") == std::string::npos;
    if (!digits) throw ProtocolError("malformed dc id '" + s + "' in '" + text + "'");
    ids.push_back(std::stoi(s));
  }
  return ids;
}

std::string join_heals(const std::vector<std::pair<int, int>>& heals) {
  std::string s;
  for (const auto& [joiner, source] : heals)
    s += (s.empty() ? "" : ",") + std::to_string(joiner) + "<" + std::to_string(source);
  return s;
}

std::vector<std::pair<int, int>> parse_heals(const std::string& text) {
  std::vector<std::pair<int, int>> heals;
  for (const std::string& h : split_list(text)) {
    const size_t lt = h.find('<');
    const std::vector<int> joiner = parse_ids(h.substr(0, lt == std::string::npos ? 0 : lt));
    const std::vector<int> source = parse_ids(h.substr(lt == std::string::npos ? 0 : lt + 1));
    if (joiner.size() != 1 || source.size() != 1) {
      throw ProtocolError("malformed heal '" + h + "'");
    }
    heals.emplace_back(joiner[0], source[0]);
  }
  return heals;
}

}  // namespace autoloco
