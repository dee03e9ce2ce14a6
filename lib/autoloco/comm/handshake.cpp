#include "autoloco/comm/handshake.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fmt/format.h>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "autoloco/util/sha256.hpp"

namespace autoloco {
namespace {

constexpr size_t kNonceBytes = 16;
constexpr size_t kMacHex = 64;
constexpr int kProtocolVersion = 1;

std::string mac_hex(std::string_view key, std::string_view message) {
  return to_hex(hmac_sha256(key, message));
}

// The hello's fields other than its mac, encoded: what the mac covers.
std::string unsigned_part(const ControlMessage& m) {
  ControlMessage copy(m.type());
  for (const auto& [k, v] : m.fields()) {
    if (k != "mac") copy.set(k, v);
  }
  return copy.encode();
}

std::string session_key(std::string_view key, std::string_view server_nonce,
                        std::string_view client_nonce) {
  return mac_hex(key, fmt::format("autoloco-session\n{}\n{}", server_nonce, client_nonce));
}

void check_nonce(const std::string& nonce, std::string_view who) {
  bool hex = nonce.size() == 2 * kNonceBytes;
  for (const char c : nonce)
    hex = hex && ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'));
  if (!hex) throw ProtocolError(fmt::format("{}: malformed nonce", who));
}

}  // namespace

std::string load_shared_key(const std::string& path, std::string_view what) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    throw ConfigError(
        fmt::format("{}: cannot read '{}': {} (make one with autoloco-lighthouse "
                    "--make-key {}, then copy it to every site)",
                    what, path, std::strerror(errno), path));
  }
  if ((st.st_mode & 077) != 0) {
    throw ConfigError(
        fmt::format("{}: '{}' may be read by others than its owner (mode {:o}); run chmod 600 {}",
                    what, path, st.st_mode & 0777, path));
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string key = ss.str();
  while (!key.empty() &&
         (key.back() == '\n' || key.back() == '\r' || key.back() == ' ' || key.back() == '\t'))
    key.pop_back();
  if (!in.good() && !in.eof()) {
    throw ConfigError(fmt::format("{}: cannot read '{}'", what, path));
  }
  if (key.size() < 16) {
    throw ConfigError(
        fmt::format("{}: '{}' holds {} bytes, a key needs at least 16 (make one "
                    "with autoloco-lighthouse --make-key FILE)",
                    what, path, key.size()));
  }
  return key;
}

void write_new_key(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) {
    throw ConfigError(
        fmt::format("cannot create the key file '{}': {}", path, std::strerror(errno)));
  }
  const std::string key = random_hex(32) + "\n";
  const ssize_t n = ::write(fd, key.data(), key.size());
  const bool ok = n == static_cast<ssize_t>(key.size()) && ::fsync(fd) == 0;
  ::close(fd);
  if (!ok) throw ConfigError(fmt::format("cannot write the key file '{}'", path));
}

ServerHandshake::ServerHandshake(std::string key)
    : key_(std::move(key)), nonce_(random_hex(kNonceBytes)) {}

ControlMessage ServerHandshake::challenge() const {
  ControlMessage m("challenge");
  m.set("version", int64_t{kProtocolVersion});
  m.set("nonce", nonce_);
  return m;
}

ControlMessage ServerHandshake::accept(const ControlMessage& hello, Session& session) const {
  if (hello.type() != "hello") {
    throw ProtocolError(fmt::format("expected 'hello', got '{}'", hello.type()));
  }
  if (hello.integer_or("version", -1) != kProtocolVersion) {
    throw ProtocolError(
        fmt::format("protocol version {} (this side speaks {}): run the same "
                    "autoloco release on every site",
                    hello.integer_or("version", -1), kProtocolVersion));
  }
  const std::string& client_nonce = hello.text("nonce");
  check_nonce(client_nonce, "hello");
  const std::string expected =
      mac_hex(key_, fmt::format("autoloco-hello\n{}\n{}", nonce_, unsigned_part(hello)));
  if (!equal_in_constant_time(expected, hello.text("mac"))) {
    throw AuthError("wrong key (its hello's MAC does not match this side's key file)");
  }
  session.key = session_key(key_, nonce_, client_nonce);
  session.send_direction = 's';
  ControlMessage welcome("welcome");
  welcome.set("mac", mac_hex(key_, fmt::format("autoloco-welcome\n{}\n{}", client_nonce, nonce_)));
  return welcome;
}

ControlMessage client_handshake(const Socket& s, const std::string& key, ControlMessage hello,
                                Session& session, Deadline deadline, const Wakeup* wake,
                                std::string_view what) {
  const ControlMessage challenge =
      ControlMessage::decode(read_frame(s, ControlMessage::kMaxBytes, deadline, wake, what));
  if (challenge.type() != "challenge") {
    throw ProtocolError(fmt::format("{}: expected 'challenge', got '{}'", what, challenge.type()));
  }
  const std::string& server_nonce = challenge.text("nonce");
  check_nonce(server_nonce, what);
  const std::string client_nonce = random_hex(kNonceBytes);
  hello.set("version", int64_t{kProtocolVersion});
  hello.set("nonce", client_nonce);
  hello.set("mac",
            mac_hex(key, fmt::format("autoloco-hello\n{}\n{}", server_nonce, hello.encode())));
  write_frame(s, hello.encode(), deadline, wake, what);
  const ControlMessage reply =
      ControlMessage::decode(read_frame(s, ControlMessage::kMaxBytes, deadline, wake, what));
  if (reply.type() == "refused") {
    throw AuthError(fmt::format("{} refused this client: {}", what, reply.text("reason")));
  }
  if (reply.type() != "welcome") {
    throw ProtocolError(fmt::format("{}: expected 'welcome', got '{}'", what, reply.type()));
  }
  const std::string expected =
      mac_hex(key, fmt::format("autoloco-welcome\n{}\n{}", client_nonce, server_nonce));
  if (!equal_in_constant_time(expected, reply.text("mac"))) {
    throw AuthError(
        fmt::format("{} does not hold this side's key (its welcome's MAC does not "
                    "match): check elastic.key_file and --key-file",
                    what));
  }
  session.key = session_key(key, server_nonce, client_nonce);
  session.send_direction = 'c';
  session.sent = 0;
  session.received = 0;
  return reply;
}

std::string seal(Session& session, std::string_view payload) {
  const std::string mac = mac_hex(
      session.key, fmt::format("{}{}\n{}", session.send_direction, session.sent++, payload));
  std::string out(payload);
  out += mac;
  return out;
}

std::string open_sealed(Session& session, std::string_view sealed) {
  if (sealed.size() < kMacHex) throw AuthError("a frame without its MAC");
  const std::string_view payload = sealed.substr(0, sealed.size() - kMacHex);
  const char from = session.send_direction == 'c' ? 's' : 'c';
  const std::string expected =
      mac_hex(session.key, fmt::format("{}{}\n{}", from, session.received, payload));
  if (!equal_in_constant_time(expected, sealed.substr(sealed.size() - kMacHex))) {
    throw AuthError("a frame whose MAC does not match (altered, replayed or out of order)");
  }
  ++session.received;
  return std::string(payload);
}

void send_message(const Socket& s, Session& session, const ControlMessage& m, Deadline deadline,
                  const Wakeup* wake, std::string_view what) {
  write_frame(s, seal(session, m.encode()), deadline, wake, what);
}

ControlMessage receive_message(const Socket& s, Session& session, Deadline deadline,
                               const Wakeup* wake, std::string_view what) {
  return ControlMessage::decode(open_sealed(
      session, read_frame(s, ControlMessage::kMaxBytes + kMacHex, deadline, wake, what)));
}

}  // namespace autoloco
