// Writes the generated part of the seed corpus of the fuzz targets (tests/fuzz/corpus): token
// shards, small checkpoint files laid out like a run's global.h5, manifests, and safetensors
// files and indexes, each valid and a few near-valid variants (among them checkpoint files whose
// dimensions overflow or exceed the file, a short sync/pending_scalars, manifests naming files
// outside the checkpoint, safetensors files whose tensors overlap or overflow); and
// the config target's dictionary (tests/fuzz/config.dict: every section and key). Run from the
// repository root after changing a format or adding a key:
//   build/fuzz/make_seeds tests/fuzz
// The config target's seeds are written by hand (corpus/config), and scripts/fuzz.sh adds
// configs/*.yaml to them.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/manifest.hpp"
#include "autoloco/config/config.hpp"
#include "autoloco/data/shard.hpp"
#include "autoloco/model/safetensors_dir.hpp"
#include "autoloco/model/safetensors_writer.hpp"

namespace fs = std::filesystem;
using namespace autoloco;

namespace {

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_file(const fs::path& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << bytes;
}

void shards(const fs::path& dir) {
  std::vector<uint32_t> tokens;
  for (uint32_t i = 0; i < 48; ++i)
    tokens.push_back((i * 37) % 256);
  write_shard((dir / "u16.bin").string(), tokens, TokenWidth::u16);
  write_shard((dir / "u32.bin").string(), {70000, 1, 65536, 3, 0, 99999}, TokenWidth::u32);
  write_shard((dir / "empty.bin").string(), {}, TokenWidth::u16);
  const std::string u16 = read_file(dir / "u16.bin");
  write_file(dir / "truncated.bin", u16.substr(0, u16.size() - 3));
  std::string version = u16;
  version[4] = 7;  // the u32 version with the u16 magic
  write_file(dir / "wrong_version.bin", version);
}

DatasetSums checkpoint(const fs::path& path, bool full) {
  fs::remove(path);
  H5Writer w(path.string());
  w.write("format_version", int64_t{1});
  w.write("reason", std::string("every_steps"));
  w.write("counters/step", int64_t{40});
  const std::vector<float> anchor = {0.5f, -1.25f, 3.0f, 0.0f, 2.5f, -0.75f};
  w.write("outer/anchor", anchor.data(), {2, 3});
  if (full) {
    w.write("autoloco_version", std::string("0.1.0"));
    w.write("config", std::string("run:\n  steps: 100\ninner:\n  lr: 0.001\n"));
    w.write("topology/world_size", int64_t{4});
    w.write("topology/ranks_per_dc", int64_t{1});
    w.write("counters/h_per_round", std::vector<int64_t>{20, 20, 25});
    w.write("loop/final_train_loss", 3.25);
    w.write("controller/state", std::vector<double>{0.5, 0.03, 1.0});
    w.write("outer/momentum", anchor.data(), {6});
    const std::vector<uint8_t> rng = {1, 2, 3, 4, 5, 6, 7, 8};
    w.write("rng/cpu", rng.data(), {8});
    w.write("batch/dc_batches", std::vector<int64_t>{});
    w.write("blank", std::string());
  }
  return w.close();
}

// Files whose headers are intact (every HDF5 checksum right) but that claim more than they hold:
// the reader must refuse them before it allocates, whatever the manifest says.
void damaged_checkpoints(const fs::path& dir) {
  const std::vector<float> anchor = {0.5f, -1.25f, 3.0f};
  const auto fresh = [&](const char* name) {
    fs::remove(dir / name);
    return (dir / name).string();
  };
  {
    H5Writer w(fresh("overflow_dims.h5"));  // 2^64 values: HDF5 counts 0
    w.write("counters/step", int64_t{40});
    w.declare("outer/anchor", H5Type::f32, {uint64_t{1} << 32, uint64_t{1} << 32});
    w.declare("counters/h_per_round", H5Type::i64, {uint64_t{1} << 31, uint64_t{1} << 31, 4});
    w.close();
  }
  {
    H5Writer w(fresh("oversized_dims.h5"));  // 4 TiB of anchor in a file of a few KB
    w.write("outer/momentum", anchor.data(), {3});
    w.declare("outer/anchor", H5Type::f32, {uint64_t{1} << 40});
    w.declare("rng/cpu", H5Type::u8, {uint64_t{1} << 62});
    w.declare("config", H5Type::text, {40});  // 40 strings where one is read
    w.close();
  }
  {
    H5Writer w(fresh("short_pending_scalars.h5"));  // a sync in flight of 2 dcs with 3 scalars
    w.write("topology/num_dcs", int64_t{2});
    w.write("sync/pending", int64_t{1});
    w.write("sync/pending_due_step", int64_t{42});
    w.write("sync/pending_round", std::vector<int64_t>{2, 40, 20, 24, 0, 48});
    w.write("sync/pending_scalars", std::vector<double>{2.0, 3.5, 0.25});
    w.write("sync/pending_link_s", 0.125);
    w.write("sync/pending_sum", anchor.data(), {3});
    w.close();
  }
}

void manifests(const fs::path& dir, const DatasetSums& sums) {
  Manifest m;
  m.format_version = 1;
  m.step = 40;
  m.round = 2;
  m.reason = "every_steps";
  m.created = "2026-11-30T10:00:00Z";
  m.files.push_back(ManifestFile{"global.h5", 12345, sums});
  m.files.push_back(ManifestFile{"dc_0.h5", 999, {{"replica/values", DatasetSum{24, 0x1234abcd}}}});
  m.files.push_back(ManifestFile{"rank_0.h5", 512, {}});
  const std::string json = m.to_json();
  write_file(dir / "manifest.json", json);
  write_file(dir / "file_entry.json", m.files[1].to_json());
  write_file(dir / "truncated.json", json.substr(0, json.size() / 2));
  std::string bad_crc = json;
  bad_crc.replace(bad_crc.find("1234abcd"), 8, "12x4abcd");
  write_file(dir / "bad_crc.json", bad_crc);
  // Names that lead out of the checkpoint's directory, or none, or twice; a negative size.
  const auto renamed = [&](const std::string& name) {
    Manifest bad = m;
    bad.files[1].name = name;
    return bad.to_json();
  };
  write_file(dir / "absolute_name.json", renamed("/etc/passwd"));
  write_file(dir / "parent_name.json", renamed("../x.h5"));
  write_file(dir / "subdir_name.json", renamed("a/b.h5"));
  write_file(dir / "empty_name.json", renamed(""));
  write_file(dir / "duplicate_name.json", renamed("global.h5"));
  Manifest negative = m;
  negative.files[2].size = -512;
  write_file(dir / "negative_size.json", negative.to_json());
}

// A file of each dtype the trainer writes, and hand-made headers that break one rule each; and
// model.safetensors.index.json, valid and naming a file outside its directory.
void safetensors(const fs::path& dir) {
  const std::vector<float> f32 = {1.0f, -2.0f, 0.5f, 3.25f, 0.0f, -0.0f};
  const std::vector<uint16_t> half = {0x3f80, 0xc000, 0x3c00};  // bf16 1, -2; f16 1
  const std::vector<int64_t> i64 = {-1, 258};
  fs::remove(dir / "model.safetensors");
  write_safetensors_file(
      (dir / "model.safetensors").string(),
      {SafetensorsBlob{"model.embed_tokens.weight", SafetensorsDtype::F32, {2, 3}, f32.data(), {}},
       SafetensorsBlob{"model.norm.weight", SafetensorsDtype::BF16, {2}, half.data(), {}},
       SafetensorsBlob{"lm_head.weight", SafetensorsDtype::F16, {1, 1}, half.data() + 2, {}},
       SafetensorsBlob{"step", SafetensorsDtype::I64, {}, i64.data(), {}},
       SafetensorsBlob{"empty", SafetensorsDtype::F32, {0, 4}, nullptr, {}}});
  const auto raw = [&](const char* name, const std::string& header, size_t data_bytes) {
    std::string bytes(8, '\0');
    for (int i = 0; i < 8; ++i)
      bytes[static_cast<size_t>(i)] = static_cast<char>((header.size() >> (8 * i)) & 0xff);
    write_file(dir / name, bytes + header + std::string(data_bytes, '\x01'));
  };
  raw("overlap.safetensors",
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
      8);
  raw("hole.safetensors",
      R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
      R"("b":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}})",
      12);
  raw("overflow_dims.safetensors",
      R"({"a":{"dtype":"F64","shape":[4294967296,4294967296],"data_offsets":[0,0]}})", 0);
  raw("size_mismatch.safetensors", R"({"a":{"dtype":"BF16","shape":[3],"data_offsets":[0,4]}})", 4);
  raw("unknown_dtype.safetensors",
      R"({"__metadata__":{"format":"pt"},"a":{"dtype":"F24","shape":[1],"data_offsets":[0,3]}})",
      3);
  raw("out_of_bounds.safetensors", R"({"a":{"dtype":"U8","shape":[16],"data_offsets":[0,16]}})", 8);
  const std::string valid = read_file(dir / "model.safetensors");
  write_file(dir / "truncated.safetensors", valid.substr(0, valid.size() / 2));
  SafetensorsIndex index;
  index.total_size = 32;
  index.weight_map = {{"model.embed_tokens.weight", "model-00001-of-00002.safetensors"},
                      {"lm_head.weight", "model-00002-of-00002.safetensors"}};
  write_file(dir / "index.json", encode_safetensors_index(index));
  index.weight_map["lm_head.weight"] = "../model-00002-of-00002.safetensors";
  write_file(dir / "index_parent.json", encode_safetensors_index(index));
}

// libFuzzer dictionary entries: sections, keys as a YAML mapping writes them and as --set
// writes them, and values the validation tells apart.
void config_dict(const fs::path& path) {
  std::ofstream out(path, std::ios::trunc);
  out << "# The config target's dictionary, written by make_seeds (tests/fuzz/make_seeds.cpp).\n";
  std::vector<std::string> sections;
  for (const std::string& key : config_keys()) {
    const std::string section = key.substr(0, key.find('.'));
    if (sections.empty() || sections.back() != section) {
      sections.push_back(section);
      out << "\"" << section << ":\\x0a\"\n";
    }
    out << "\"  " << key.substr(key.find('.') + 1) << ": \"\n";
    out << "\"\\x0a" << key << "=\"\n";
  }
  for (const char* value : {"\\x0a--set\\x0a",
                            "true",
                            "false",
                            "~",
                            "[",
                            "]",
                            "{",
                            "}",
                            ", ",
                            "\\\"0:5\\\"",
                            ".nan",
                            "-.inf",
                            "9223372036854775807",
                            "-9223372036854775808",
                            "1e308",
                            "0x7f",
                            "&a",
                            "*a",
                            "!!str",
                            "adloco",
                            "autoloco",
                            "schedule",
                            "qsr",
                            "adacomm",
                            "ddp",
                            "local_sgd",
                            "fused",
                            "int4",
                            "e3m0",
                            "streaming",
                            "by_shard",
                            "cuda",
                            "bf16",
                            "both"}) {
    out << "\"" << value << "\"\n";
  }
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds FUZZ_DIR (tests/fuzz)\n");
    return 2;
  }
  const fs::path root = fs::path(argv[1]) / "corpus";
  for (const char* target : {"shard", "manifest", "checkpoint", "safetensors"})
    fs::create_directories(root / target);
  shards(root / "shard");
  checkpoint(root / "checkpoint" / "minimal.h5", false);
  const DatasetSums sums = checkpoint(root / "checkpoint" / "global.h5", true);
  damaged_checkpoints(root / "checkpoint");
  manifests(root / "manifest", sums);
  safetensors(root / "safetensors");
  config_dict(fs::path(argv[1]) / "config.dict");
  return 0;
}
