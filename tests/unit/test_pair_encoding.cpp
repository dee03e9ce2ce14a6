// The context/continuation boundary of a scoring request, as lm-evaluation-harness's hf backend
// draws it (third_party/notes/lm-eval.md, section 2.2).
#include <catch2/catch.hpp>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "autoloco/data/tokenizer.hpp"
#include "autoloco/eval/pair_encoding.hpp"
#include "autoloco/eval/task_text.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
using Catch::Matchers::Contains;

namespace {

// Bytes, except that "xy" is one token (1000): a merge that can cross the boundary.
class MergingTokenizer final : public Tokenizer {
 public:
  std::string name() const override { return "merging"; }
  int64_t vocab_size() const override { return 1001; }
  void encode(std::string_view text, std::vector<uint32_t>& out) const override {
    for (size_t i = 0; i < text.size(); ++i) {
      if (text.compare(i, 2, "xy") == 0) {
        out.push_back(1000);
        ++i;
      } else {
        out.push_back(static_cast<unsigned char>(text[i]));
      }
    }
  }
  std::string decode(const std::vector<uint32_t>&) const override { return {}; }
};

std::vector<uint32_t> bytes_of(const std::string& s) {
  return encode_bytes(s);
}

}  // namespace

TEST_CASE("pair encoding: the context's trailing whitespace moves to the continuation", "[eval]") {
  const ByteTokenizer bytes;
  const std::vector<PairIds> ids =
      encode_pairs(bytes, {{"Question: why?\nAnswer: ", " because"}, {"2 + 2 =", " 4"}});
  REQUIRE(ids.size() == 2);
  CHECK(ids[0].context == bytes_of("Question: why?\nAnswer:"));
  CHECK(ids[0].continuation == bytes_of("  because"));
  CHECK(ids[1].context == bytes_of("2 + 2 ="));
  CHECK(ids[1].continuation == bytes_of(" 4"));
  CHECK(python_trailing_space("a \n\xc2\xa0") == 4);
  CHECK(python_trailing_space("a") == 0);
}

TEST_CASE("pair encoding: a merge across the boundary belongs to the context, as in the harness",
          "[eval]") {
  const MergingTokenizer merging;
  // Joint "axyz" is a, xy, z; the context alone is a, x: the continuation is what follows the
  // context's two ids in the joint encoding, z alone.
  const std::vector<PairIds> ids = encode_pairs(merging, {{"ax", "yz"}});
  CHECK(ids[0].context == std::vector<uint32_t>{'a', 'x'});
  CHECK(ids[0].continuation == std::vector<uint32_t>{'z'});
  // Nothing left for the continuation: an error that names the request.
  CHECK_THROWS_WITH(encode_pairs(merging, {{"a", "b"}, {"ax", "y"}}),
                    Contains("request 1") && Contains("no token of its own"));
  CHECK_THROWS_AS(encode_pairs(merging, {{" \n", "a"}}), DataError);
}
