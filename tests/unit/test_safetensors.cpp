// The safetensors layer of model/ (Hugging Face weights): tensors of each dtype read back
// bitwise, the exact bytes of a small file and the header's padding, transformers' sharding and
// index, files that are never written over, and damaged files and indexes refused with a
// CheckpointError that names the file, the tensor and what is wrong.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "../support/temp_dir.hpp"
#include "autoloco/model/safetensors.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
namespace fs = std::filesystem;
using Catch::Contains;

namespace {

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

std::string le64(uint64_t n) {
  std::string out(8, '\0');
  for (int i = 0; i < 8; ++i)
    out[static_cast<size_t>(i)] = static_cast<char>((n >> (8 * i)) & 0xff);
  return out;
}

// A file of the given header text and `data_bytes` bytes of data (0x01, 0x02, ...).
std::string file_bytes(const std::string& header, size_t data_bytes) {
  std::string data(data_bytes, '\0');
  for (size_t i = 0; i < data_bytes; ++i)
    data[i] = static_cast<char>(i + 1);
  return le64(header.size()) + header + data;
}

// The same bits: compared as integers, so NaNs and signed zeros count too.
bool bitwise_equal(const torch::Tensor& a, const torch::Tensor& b) {
  if (a.scalar_type() != b.scalar_type() || a.sizes() != b.sizes()) return false;
  // An empty tensor of LibTorch 2.x has no storage (data_ptr() is null), and memcmp must not
  // be given null even for 0 bytes (UndefinedBehaviorSanitizer).
  if (a.numel() == 0) return true;
  const torch::Tensor x = a.contiguous(), y = b.contiguous();
  return std::memcmp(x.data_ptr(), y.data_ptr(), x.numel() * x.element_size()) == 0;
}

std::vector<std::string> files_in(const fs::path& dir) {
  std::vector<std::string> names;
  for (const auto& e : fs::directory_iterator(dir))
    names.push_back(e.path().filename().string());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace

TEST_CASE("safetensors: tensors of every dtype read back bitwise", "[unit][safetensors]") {
  const test::TempDir tmp("safetensors");
  torch::manual_seed(7);
  torch::Tensor f32 = torch::randn({3, 5});
  f32[0][0] = std::numeric_limits<float>::quiet_NaN();
  f32[0][1] = -0.0F;
  f32[0][2] = std::numeric_limits<float>::infinity();
  const NamedTensors tensors = {
      {"model.embed_tokens.weight", f32},
      {"bf16", torch::randn({4, 2}).to(torch::kBFloat16)},
      {"f16", torch::randn({7}).to(torch::kFloat16)},
      {"f64", torch::randn({2, 2}, torch::kFloat64)},
      {"i64", torch::arange(-3, 3, torch::kInt64)},
      {"i32", torch::arange(0, 6, torch::kInt32).reshape({2, 3})},
      {"u8", torch::arange(250, 256, torch::kInt64).to(torch::kUInt8)},
      {"bool", torch::tensor({true, false, true})},
      {"scalar", torch::tensor(2.5F)},
      {"empty", torch::zeros({0, 4})},
      {"transposed", torch::randn({3, 4}).t()},  // not contiguous: copied while written
  };
  const std::string path = tmp.file("model.safetensors");
  write_safetensors(path, tensors);

  const SafetensorsReader file(path);
  REQUIRE(file.entries().size() == tensors.size());
  CHECK(file.metadata() == std::map<std::string, std::string>{{"format", "pt"}});
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, tensor] = tensors[i];
    INFO(name);
    CHECK(file.entries()[i].name == name);  // the order they were written in
    CHECK(file.entries()[i].shape == tensor.sizes().vec());
    const torch::Tensor stored = read_tensor(file, name, std::nullopt);
    CHECK(bitwise_equal(stored, tensor));
    if (tensor.is_floating_point()) {
      CHECK(bitwise_equal(read_tensor(file, name), tensor.to(torch::kFloat32)));
    }
  }
  CHECK(file.entry("bf16").dtype == SafetensorsDtype::BF16);
  CHECK(file.entry("f16").dtype == SafetensorsDtype::F16);
  CHECK(file.entry("scalar").shape.empty());
  CHECK(read_tensor(file, "i64", torch::kFloat64).equal(torch::arange(-3, 3, torch::kFloat64)));
  CHECK_THROWS_WITH(read_tensor(file, "lm_head.weight"),
                    Contains(path) && Contains("no tensor 'lm_head.weight'"));
}

TEST_CASE("safetensors: the exact bytes of a small file", "[unit][safetensors]") {
  const test::TempDir tmp("safetensors");
  const std::string path = tmp.file("tiny.safetensors");
  write_safetensors(path, {{"a", torch::tensor({1.0F, -2.0F})},
                           {"b", torch::tensor({int64_t{258}}).reshape({1, 1})}});
  const std::string json =
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[1,1],"data_offsets":[8,16]}})";
  REQUIRE(json.size() == 141);
  const std::string header = json + std::string(3, ' ');  // padded to 144
  const std::string data("\x00\x00\x80\x3f\x00\x00\x00\xc0\x02\x01\x00\x00\x00\x00\x00\x00", 16);
  CHECK(read_file(path) == le64(144) + header + data);
}

TEST_CASE("safetensors: the header is padded with spaces to a multiple of 8 bytes",
          "[unit][safetensors]") {
  const test::TempDir tmp("safetensors");
  for (size_t length = 1; length <= 16; ++length) {
    const std::string path = tmp.file("pad" + std::to_string(length) + ".safetensors");
    write_safetensors(path, {{std::string(length, 'w'), torch::ones({3}, torch::kFloat16)}});
    const std::string bytes = read_file(path);
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i)
      n = (n << 8) | static_cast<unsigned char>(bytes[static_cast<size_t>(i)]);
    INFO("name length " << length << ", header " << n);
    CHECK(n % 8 == 0);
    CHECK(bytes.size() == 8 + n + 6);
    const std::string header = bytes.substr(8, n);
    const size_t close = header.find_last_of('}');
    CHECK(header.find_first_not_of(' ', close + 1) == std::string::npos);
    CHECK(n - (close + 1) < 8);
    CHECK(
        bitwise_equal(read_tensor(SafetensorsReader(path), std::string(length, 'w'), std::nullopt),
                      torch::ones({3}, torch::kFloat16)));
  }
}

TEST_CASE("safetensors: a file written by hand reads with the layout it declares",
          "[unit][safetensors]") {
  const test::TempDir tmp("safetensors");
  // Tensors listed out of data order, no metadata, no padding, a scalar I64 then two BF16s.
  const std::string header = R"({"w":{"dtype":"BF16","shape":[1,2],"data_offsets":[8,12]},)"
                             R"("x":{"dtype":"I64","shape":[],"data_offsets":[0,8]}})";
  const std::string path = tmp.file("hand.safetensors");
  // x = 0x0807060504030201; w = bf16 0x3f80 (1.0) and 0xc000 (-2.0).
  write_file(path, le64(header.size()) + header +
                       std::string("\x01\x02\x03\x04\x05\x06\x07\x08", 8) +
                       std::string("\x80\x3f\x00\xc0", 4));
  const SafetensorsReader file(path);
  REQUIRE(file.entries().size() == 2);
  CHECK(file.entries()[0].name == "x");  // in data order
  CHECK(file.entries()[1].name == "w");
  CHECK(file.metadata().empty());
  CHECK(read_tensor(file, "x", std::nullopt).item<int64_t>() == 0x0807060504030201);
  CHECK(read_tensor(file, "w").equal(torch::tensor({{1.0F, -2.0F}})));
  CHECK(read_tensor(file, "w", std::nullopt).scalar_type() == torch::kBFloat16);
}

TEST_CASE("safetensors: shards as transformers cuts them, with the index", "[unit][safetensors]") {
  CHECK(plan_shards({40, 40, 120, 20, 20}, 100) ==
        std::vector<std::vector<size_t>>{{0, 1}, {2}, {3, 4}});
  CHECK(plan_shards({50, 50, 1}, 100) == std::vector<std::vector<size_t>>{{0, 1}, {2}});
  CHECK(plan_shards({}, 100) == std::vector<std::vector<size_t>>{{}});
  CHECK(plan_shards({200}, 100) == std::vector<std::vector<size_t>>{{0}});
  CHECK(hf_shard_name(0, 3) == "model-00001-of-00003.safetensors");

  const test::TempDir tmp("safetensors");
  torch::manual_seed(3);
  const NamedTensors tensors = {
      {"model.layers.0.w", torch::randn({10})},
      {"model.layers.0.v", torch::randn({10})},
      {"model.big", torch::randn({30})},
      {"model.layers.1.w", torch::randn({5})},
      {"lm_head.weight", torch::randn({5}).to(torch::kBFloat16)},
  };
  const fs::path dir = tmp.path / "out";
  const std::vector<std::string> written = save_safetensors(dir.string(), tensors, 100);
  const std::vector<std::string> expected = {
      "model-00001-of-00003.safetensors", "model-00002-of-00003.safetensors",
      "model-00003-of-00003.safetensors", "model.safetensors.index.json"};
  CHECK(written == expected);
  CHECK(files_in(dir) == expected);
  CHECK(read_file((dir / kHfWeightsIndexFile).string()) ==
        "{\n"
        "  \"metadata\": {\n"
        "    \"total_size\": 230\n"
        "  },\n"
        "  \"weight_map\": {\n"
        "    \"lm_head.weight\": \"model-00003-of-00003.safetensors\",\n"
        "    \"model.big\": \"model-00002-of-00003.safetensors\",\n"
        "    \"model.layers.0.v\": \"model-00001-of-00003.safetensors\",\n"
        "    \"model.layers.0.w\": \"model-00001-of-00003.safetensors\",\n"
        "    \"model.layers.1.w\": \"model-00003-of-00003.safetensors\"\n"
        "  }\n"
        "}\n");
  const SafetensorsIndex index =
      parse_safetensors_index(read_file((dir / kHfWeightsIndexFile).string()), "index");
  CHECK(index.total_size == uint64_t{230});
  CHECK(index.weight_map.size() == 5);

  const SafetensorsDir model(dir.string());
  CHECK(model.files().size() == 3);
  std::vector<std::string> names;
  for (const auto& [name, tensor] : tensors) {
    names.push_back(name);
    CHECK(bitwise_equal(read_tensor(model, name, std::nullopt), tensor));
  }
  CHECK(model.names() == names);  // the order given
  CHECK(model.locate("model.big").file->path() == (dir / expected[1]).string());
  CHECK_THROWS_WITH(model.locate("missing"),
                    Contains(dir.string()) && Contains("no tensor 'missing'"));

  // Everything in one file when it fits: model.safetensors and no index.
  const fs::path one = tmp.path / "one";
  CHECK(save_safetensors(one.string(), tensors) == std::vector<std::string>{kHfWeightsFile});
  CHECK(files_in(one) == std::vector<std::string>{kHfWeightsFile});
  const SafetensorsDir single(one.string());
  CHECK(single.names() == names);
  CHECK(bitwise_equal(read_tensor(single, "model.big"), tensors[2].second));
}

TEST_CASE("safetensors: an existing file is never written over", "[unit][safetensors]") {
  const test::TempDir tmp("safetensors");
  const std::string path = tmp.file("model.safetensors");
  write_safetensors(path, {{"a", torch::ones({4})}});
  const std::string before = read_file(path);
  CHECK_THROWS_AS(write_safetensors(path, {{"b", torch::zeros({8})}}), CheckpointError);
  CHECK_THROWS_WITH(write_safetensors(path, {{"b", torch::zeros({8})}}),
                    Contains(path) && Contains("already exists"));
  CHECK(read_file(path) == before);
  CHECK(files_in(tmp.path) == std::vector<std::string>{"model.safetensors"});  // no temporaries

  // A model directory: neither its weights nor its index is replaced, nor a shard's name.
  CHECK_THROWS_WITH(save_safetensors(tmp.str(), {{"b", torch::zeros({8})}}), Contains(path));
  CHECK(read_file(path) == before);
  const test::TempDir other("safetensors");
  write_file(other.file(kHfWeightsIndexFile), "{}");
  CHECK_THROWS_WITH(save_safetensors(other.str(), {{"b", torch::zeros({8})}}),
                    Contains(other.file(kHfWeightsIndexFile)) && Contains("already exists"));
  CHECK(files_in(other.path) == std::vector<std::string>{kHfWeightsIndexFile});
  const test::TempDir third("safetensors");
  write_file(third.file("model-00002-of-00002.safetensors"), "mine");
  CHECK_THROWS_WITH(
      save_safetensors(third.str(), {{"a", torch::zeros({8})}, {"b", torch::zeros({8})}}, 40),
      Contains("model-00002-of-00002.safetensors") && Contains("already exists"));
  CHECK(files_in(third.path) == std::vector<std::string>{"model-00002-of-00002.safetensors"});
  CHECK(read_file(third.file("model-00002-of-00002.safetensors")) == "mine");
}

TEST_CASE("safetensors: tensors that cannot be written are refused", "[unit][safetensors]") {
  const test::TempDir tmp("safetensors");
  const std::string path = tmp.file("x.safetensors");
  CHECK_THROWS_WITH(write_safetensors(path, {{"a", torch::ones({2})}, {"a", torch::ones({2})}}),
                    Contains(path) && Contains("'a'") && Contains("twice"));
  CHECK_THROWS_WITH(write_safetensors(path, {{"__metadata__", torch::ones({2})}}),
                    Contains("reserved"));
  CHECK_THROWS_WITH(write_safetensors(path, {{"c", torch::ones({2}, torch::kComplexFloat)}}),
                    Contains(path) && Contains("'c'"));
  CHECK_FALSE(fs::exists(path));
  CHECK(files_in(tmp.path).empty());
}

TEST_CASE("safetensors: damaged files are refused naming the file and what is wrong",
          "[unit][safetensors]") {
  const test::TempDir tmp("safetensors");
  const std::string path = tmp.file("bad.safetensors");
  const auto refused = [&](const std::string& bytes, const std::string& what) {
    fs::remove(path);
    write_file(path, bytes);
    INFO(what);
    CHECK_THROWS_AS(SafetensorsReader(path), CheckpointError);
    CHECK_THROWS_WITH(SafetensorsReader(path), Contains(path) && Contains(what));
  };
  const std::string ok = R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  {
    write_file(path, file_bytes(ok, 8));
    CHECK(SafetensorsReader(path).entries().size() == 1);  // the base of the variants below
  }
  SECTION("truncated header length") {
    refused(std::string("\x10\x00\x00", 3), "too short");
  }
  SECTION("header longer than the file") {
    refused(le64(ok.size() + 100) + ok, "runs past the end of the file");
  }
  SECTION("header length over the limit") {
    refused(le64(uint64_t{1} << 40), "over the limit");
  }
  SECTION("header length that wraps") {
    refused(le64(~uint64_t{0}) + ok, "over the limit");
  }
  SECTION("bad JSON") {
    refused(file_bytes(R"({"t":{"dtype":"F32",)", 8), "not valid JSON");
  }
  SECTION("not an object") {
    refused(file_bytes("[1, 2]", 8), "not a JSON object");
  }
  SECTION("unknown dtype") {
    refused(file_bytes(R"({"t":{"dtype":"F24","shape":[2],"data_offsets":[0,8]}})", 8),
            "tensor 't': unknown dtype 'F24'");
  }
  SECTION("shape and offsets disagree") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", 8),
            "tensor 't': shape [3] of F32 is 12 bytes but data_offsets [0, 8] hold 8");
  }
  SECTION("offsets out of bounds") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})", 8),
            "tensor 't': data_offsets [8, 16] do not lie in the data section of 8 bytes");
  }
  SECTION("offsets reversed") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}})", 8),
            "do not lie in the data section");
  }
  SECTION("overlapping tensors") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                       R"("u":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       8),
            "tensor 'u': its bytes [4, 8) overlap those of tensor 't'");
  }
  SECTION("a hole between tensors") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("u":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
                       12),
            "tensor 'u': bytes [4, 8) of the data section before it belong to no tensor");
  }
  SECTION("trailing bytes") {
    refused(file_bytes(ok, 9), "the data section holds 9 bytes but the tensors cover 8");
  }
  SECTION("huge dims that overflow") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296],)"
                       R"("data_offsets":[0,0]}})",
                       0),
            "tensor 't': shape [4294967296, 4294967296] has more elements than fit in 64 bits");
    refused(file_bytes(R"({"t":{"dtype":"F64","shape":[2305843009213693952],)"
                       R"("data_offsets":[0,0]}})",
                       0),
            "more elements than fit in 64 bits");
  }
  SECTION("a dim too large for int64") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[9223372036854775808],)"
                       R"("data_offsets":[0,8]}})",
                       8),
            "tensor 't': \"shape\" holds '9223372036854775808'");
  }
  SECTION("negative or fractional dims") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", 8),
            "\"shape\" holds '-2'");
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[2.0],"data_offsets":[0,8]}})", 8),
            "\"shape\" holds '2.0'");
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":["2"],"data_offsets":[0,8]}})", 8),
            "\"shape\" holds '2'");
  }
  SECTION("a name given twice") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                       R"("t":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                       8),
            "tensor 't': the header names it twice");
  }
  SECTION("missing and unknown fields") {
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[2]}})", 8), "lacks one of");
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1}})", 8),
            "unexpected or repeated field 'x'");
    refused(file_bytes(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]}})", 8),
            "not a pair");
  }
  SECTION("metadata that is not strings") {
    refused(file_bytes(R"({"__metadata__":{"a":[1]},)"
                       R"("t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})",
                       8),
            "\"__metadata__\" holds a value that is not a string");
  }
  SECTION("not a file") {
    fs::create_directories(tmp.path / "dir.safetensors");
    CHECK_THROWS_WITH(SafetensorsReader(tmp.file("dir.safetensors")),
                      Contains("dir.safetensors") && Contains("not a plain file"));
    CHECK_THROWS_WITH(SafetensorsReader(tmp.file("none.safetensors")),
                      Contains("none.safetensors") && Contains("cannot open"));
  }
}

TEST_CASE(
    "safetensors: an index that names files outside its directory or missing tensors is "
    "refused",
    "[unit][safetensors]") {
  const test::TempDir tmp("safetensors");
  const std::string shard = "model-00001-of-00001.safetensors";
  write_safetensors(tmp.file(shard), {{"a", torch::ones({2})}});
  const std::string index_path = tmp.file(kHfWeightsIndexFile);
  const auto with_index = [&](const std::string& json) {
    fs::remove(index_path);
    write_file(index_path, json);
    return SafetensorsDir(tmp.str());
  };
  const auto map_to = [](const std::string& tensor, const std::string& file) {
    return R"({"metadata":{"total_size":8},"weight_map":{")" + tensor + R"(":")" + file + R"("}})";
  };
  CHECK(with_index(map_to("a", shard)).names() == std::vector<std::string>{"a"});
  for (const std::string& file :
       std::vector<std::string>{"../" + shard, "/etc/passwd", "sub/" + shard, "..", ""}) {
    INFO(file);
    CHECK_THROWS_AS(with_index(map_to("a", file)), CheckpointError);
    CHECK_THROWS_WITH(with_index(map_to("a", file)),
                      Contains(index_path) && Contains("not a plain file name"));
  }
  CHECK_THROWS_WITH(
      with_index(map_to("a", "model-00002-of-00002.safetensors")),
      Contains(index_path) && Contains("model-00002-of-00002.safetensors") && Contains("missing"));
  CHECK_THROWS_WITH(with_index(map_to("b", shard)),
                    Contains(index_path) && Contains("tensor 'b'") && Contains("no such tensor"));
  CHECK_THROWS_WITH(with_index("{\"weight_map\": [1]}"),
                    Contains(index_path) && Contains("no \"weight_map\" object"));
  CHECK_THROWS_WITH(with_index("{\"weight_map\": {"),
                    Contains(index_path) && Contains("not valid JSON"));
  CHECK_THROWS_WITH(with_index(R"({"weight_map":{"a":")" + shard + R"(","a":")" + shard + R"("}})"),
                    Contains(index_path) && Contains("'a' twice"));
  fs::remove(index_path);
  fs::remove(tmp.file(shard));
  CHECK_THROWS_WITH(SafetensorsDir(tmp.str()), Contains(tmp.str()) && Contains(kHfWeightsFile) &&
                                                   Contains(kHfWeightsIndexFile));
}
