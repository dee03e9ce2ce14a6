// libFuzzer target: the lighthouse's untrusted bytes (comm/control_message.hpp,
// comm/handshake.hpp, comm/quorum_rules.hpp). The input is records separated by NUL bytes; each
// record is an op byte and a control message's text:
//   op & 3:        the connection (0-3)
//   (op >> 2) & 3: 0 its hello, 1 a later message, 2 its close, 3 time passes ((op >> 4) s)
// Every record's text is decoded (a message that decodes must encode and decode to itself), is
// offered to the server's handshake as a hello and to open_sealed() as a sealed frame (both
// refuse it without the key), and drives one QuorumRules as a client that proved the key would:
// the lighthouse must refuse malformed fields with a ProtocolError, never crash, hang or throw
// anything else.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "autoloco/comm/control_message.hpp"
#include "autoloco/comm/handshake.hpp"
#include "autoloco/comm/quorum_rules.hpp"
#include "fuzz_support.hpp"

namespace {

using autoloco::ControlMessage;

// The lighthouse drops a connection on a ProtocolError (an AuthError is one) and goes on; any
// other exception would end it, so here it is a finding.
template <class F>
void fuzz_expect_protocol(F&& body) {
  try {
    body();
  } catch (const autoloco::ProtocolError&) {
  }
}

bool same(const ControlMessage& a, const ControlMessage& b) {
  return a.type() == b.type() && a.fields() == b.fields();
}

void check_round_trip(std::string_view text) {
  fuzz_expect_protocol([&] {
    const ControlMessage m = ControlMessage::decode(text);
    const ControlMessage back = ControlMessage::decode(m.encode());
    autoloco::fuzz::require(same(m, back), "a decoded message changes through encode() and back");
  });
}

void check_handshake(std::string_view text) {
  const std::string key(32, 'k');
  fuzz_expect_protocol([&] {
    autoloco::Session session;
    autoloco::ServerHandshake server(key);
    server.challenge();
    server.accept(ControlMessage::decode(text), session);
    autoloco::fuzz::require(false, "a hello without the key's mac was accepted");
  });
  fuzz_expect_protocol([&] {
    autoloco::Session session{key, 0, 0, 's'};
    autoloco::open_sealed(session, text);
    autoloco::fuzz::require(false, "a frame without the session's mac was opened");
  });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  autoloco::QuorumSettings settings;
  settings.min_dcs = 2;
  autoloco::QuorumRules rules(settings, [](const std::string&) {});
  double now = 0.0;
  size_t at = 0;
  while (at < input.size()) {
    size_t end = input.find('\0', at);
    if (end == std::string_view::npos) end = input.size();
    const uint8_t op = static_cast<uint8_t>(input[at]);
    const std::string_view text = input.substr(at + 1, end - at - 1);
    at = end + 1;
    check_round_trip(text);
    check_handshake(text);
    const autoloco::ConnId conn = op & 3;
    fuzz_expect_protocol([&] {
      switch ((op >> 2) & 3) {
        case 0:
          rules.on_hello(conn, ControlMessage::decode(text), now);
          break;
        case 1:
          rules.on_message(conn, ControlMessage::decode(text), now);
          break;
        case 2:
          rules.on_closed(conn, now);
          break;
        default:
          now += op >> 4;
          rules.tick(now);
      }
    });
  }
  return 0;
}
