// comm/control_message.hpp: what the lighthouse parses from untrusted bytes.
#include <catch2/catch.hpp>

#include <string>

#include "autoloco/comm/control_message.hpp"

using namespace autoloco;

TEST_CASE("control messages round-trip their fields exactly", "[elastic]") {
  ControlMessage m("ready");
  m.set("round", int64_t{42});
  m.set("tokens", 0.1 + 0.2);
  m.set("hash", std::string("ab12"));
  const ControlMessage back = ControlMessage::decode(m.encode());
  CHECK(back.type() == "ready");
  CHECK(back.integer("round") == 42);
  CHECK(back.real("tokens") == 0.1 + 0.2);
  CHECK(back.text("hash") == "ab12");
  CHECK(back.fields().size() == 3);
  CHECK(back.integer_or("absent", -7) == -7);
}

TEST_CASE("control messages refuse malformed input with the key named", "[elastic]") {
  const auto refused = [](const std::string& bytes, const std::string& words) {
    INFO(bytes);
    REQUIRE_THROWS_AS(ControlMessage::decode(bytes), ProtocolError);
    try {
      ControlMessage::decode(bytes);
    } catch (const ProtocolError& e) {
      CHECK_THAT(e.what(), Catch::Contains(words));
    }
  };
  refused("", "newline");
  refused("ready", "newline");
  refused("Ready\n", "invalid type");
  refused("ready\nround\n", "not key=value");
  refused("ready\nRound=1\n", "invalid key");
  refused("ready\nround=1\nround=2\n", "given twice");
  refused(std::string("ready\nhash=a\x01") + "b\n", "not printable");
  refused(std::string(ControlMessage::kMaxBytes + 1, 'a'), "at most");
  std::string many = "ready\n";
  for (size_t i = 0; i <= ControlMessage::kMaxFields; ++i)
    many += "k" + std::to_string(i) + "=1\n";
  refused(many, "more than");

  const ControlMessage m = ControlMessage::decode("ready\nround=x1\ntokens=nan\n");
  CHECK_THROWS_WITH(m.integer("round"), Catch::Contains("'round' is not an integer"));
  CHECK_THROWS_WITH(m.real("tokens"), Catch::Contains("'tokens' is not a finite number"));
  CHECK_THROWS_WITH(m.text("hash"), Catch::Contains("without its 'hash' field"));
}

TEST_CASE("split_list splits on the separator and keeps empty items", "[elastic]") {
  CHECK(split_list("").empty());
  CHECK(split_list("a") == std::vector<std::string>{"a"});
  CHECK(split_list("a,,b") == std::vector<std::string>{"a", "", "b"});
}

TEST_CASE("dc ids and heals go into a field and back, malformed ones are protocol errors",
          "[elastic]") {
  CHECK(join_ids({}) == "none");
  CHECK(parse_ids("none").empty());
  CHECK(parse_ids(join_ids({0, 2, 3})) == std::vector<int>{0, 2, 3});
  const std::vector<std::pair<int, int>> heals = {{3, 0}, {4, 1}};
  CHECK(join_heals(heals) == "3<0,4<1");
  CHECK(parse_heals(join_heals(heals)) == heals);
  CHECK(parse_heals("").empty());
  for (const char* bad : {"1,x", "-1", "1,,2", "12345678901"})
    CHECK_THROWS_AS(parse_ids(bad), ProtocolError);
  for (const char* bad : {"3", "3<", "<0", "3<0<1", "a<b"})
    CHECK_THROWS_AS(parse_heals(bad), ProtocolError);
}
