// The checkpoint library without MPI: HDF5 files that read back what was written with each
// dataset's CRC-32, manifests, the quick and full checks that tell complete checkpoints from
// incomplete or damaged ones, the commit and pruning of the checkpoints directory, and which
// config keys a resume may change.
// LibTorch first: Debian's LibTorch pulls in glog, whose CHECK would replace Catch's.
#include <torch/torch.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>

#include "../support/temp_dir.hpp"
#include "autoloco/ckpt/checkpoint_dir.hpp"
#include "autoloco/ckpt/compatibility.hpp"
#include "autoloco/ckpt/h5_file.hpp"
#include "autoloco/ckpt/layout.hpp"
#include "autoloco/ckpt/manifest.hpp"
#include "autoloco/util/crc32.hpp"
#include "autoloco/util/error.hpp"

using namespace autoloco;
namespace fs = std::filesystem;

namespace {

// A checkpoint directory as the trainer writes one: a data file, then the manifest.
std::string fake_checkpoint(const std::string& dir, int64_t step, int64_t values = 4096) {
  const std::string tmp = begin_checkpoint(dir, step);
  H5Writer w(tmp + "/" + kGlobalFile);
  std::vector<float> data(static_cast<size_t>(values));
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>(step) + 0.001f * static_cast<float>(i);
  w.write("outer/anchor", data.data(), {values});
  w.write("counters/step", step);
  Manifest m;
  m.format_version = kCheckpointFormat;
  m.step = step;
  m.reason = "every_steps";
  m.created = utc_now();
  ManifestFile f;
  f.name = kGlobalFile;
  f.datasets = w.close();
  f.size = static_cast<int64_t>(fs::file_size(tmp + "/" + kGlobalFile));
  m.files.push_back(f);
  write_manifest(tmp, m);
  return commit_checkpoint(dir, tmp, step);
}

void flip_byte(const std::string& path, std::streamoff offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  char b = 0;
  f.seekg(offset);
  f.read(&b, 1);
  b = static_cast<char>(~b);
  f.seekp(offset);
  f.write(&b, 1);
}

}  // namespace

TEST_CASE("crc32: the standard check value and continuation over pieces", "[unit][ckpt]") {
  const std::string text = "123456789";
  CHECK(crc32(text.data(), text.size()) == 0xCBF43926u);
  CHECK(crc32(text.data() + 4, 5, crc32(text.data(), 4)) == 0xCBF43926u);
}

TEST_CASE("h5 file: numbers strings and shapes read back as written with their sums",
          "[unit][ckpt]") {
  const test::TempDir tmp("ckpt-h5");
  const std::string path = tmp.file("a.h5");
  const std::vector<float> f = {1.5f, -2.0f, 3.25f, 0.0f, 7.0f, 8.0f};
  const std::vector<double> d = {0.1, NAN, 1e300};
  const std::vector<int64_t> empty;
  H5Writer w(path);
  w.write("group/matrix", f.data(), {2, 3});
  w.write("deep/a/b/doubles", d);
  w.write("scalar", int64_t{42});
  w.write("empty", empty);
  w.write("text", std::string("run:\n  name: x\n"));
  w.write("blank", std::string());
  const DatasetSums sums = w.close();
  CHECK(sums.size() == 6);
  CHECK(sums.at("group/matrix").bytes == 24);
  CHECK(sums.at("group/matrix").crc == crc32(f.data(), 24));
  CHECK_THROWS_AS(H5Writer(path), CheckpointError);  // never written over

  const H5Reader r(path, &sums);
  CHECK(r.shape("group/matrix") == std::vector<int64_t>{2, 3});
  CHECK(r.read_f32("group/matrix") == f);
  const std::vector<double> back = r.read_f64("deep/a/b/doubles");
  CHECK(back[0] == 0.1);
  CHECK(std::isnan(back[1]));
  CHECK(back[2] == 1e300);
  CHECK(r.read_int("scalar") == 42);
  CHECK(r.read_i64("empty").empty());
  CHECK(r.read_string("text") == "run:\n  name: x\n");
  CHECK(r.read_string("blank").empty());
  CHECK(r.has("deep/a/b/doubles"));
  CHECK_FALSE(r.has("deep/x/doubles"));
  CHECK_THROWS_WITH(r.read_f32("missing"), Catch::Contains("no dataset 'missing'"));
  CHECK_THROWS_WITH(r.read_int("group/matrix"), Catch::Contains("holds 6 values where 1"));
  CHECK(r.sums().at("text").crc == sums.at("text").crc);
}

TEST_CASE("h5 reader: bytes that differ from the manifest fail naming file and dataset",
          "[unit][ckpt]") {
  const test::TempDir tmp("ckpt-flip");
  const std::string dir = tmp.file("checkpoints");
  const std::string ckpt = fake_checkpoint(dir, 10, 1 << 16);
  const std::string file = ckpt + "/" + kGlobalFile;
  CHECK(verify_checkpoint(ckpt).empty());
  // The 256 KiB anchor dominates the file: its middle is raw data, not HDF5 metadata.
  flip_byte(file, static_cast<std::streamoff>(fs::file_size(file) / 2));
  CHECK(inspect_checkpoint(ckpt).ok());  // same size: only reading the data finds it
  const std::string problem = verify_checkpoint(ckpt);
  CHECK_THAT(problem, Catch::Contains("global.h5") && Catch::Contains("outer/anchor") &&
                          Catch::Contains("corrupted"));
  const Manifest m = read_manifest(ckpt);
  const H5Reader r(file, &m.find(kGlobalFile)->datasets);
  CHECK_THROWS_WITH(r.read_f32("outer/anchor"), Catch::Contains("does not match the manifest"));
}

TEST_CASE("checkpoint dir: newest first and incomplete or truncated ones flagged", "[unit][ckpt]") {
  const test::TempDir tmp("ckpt-list");
  const std::string dir = tmp.file("checkpoints");
  CHECK(list_checkpoints(dir).empty());  // no directory yet
  fake_checkpoint(dir, 5);
  fake_checkpoint(dir, 20);
  const std::string truncated = fake_checkpoint(dir, 100);
  fs::resize_file(truncated + "/" + kGlobalFile, 1000);
  // A job killed while writing leaves a temporary directory: never listed as a checkpoint.
  begin_checkpoint(dir, 200);
  // A step directory without a manifest (killed between the rename of a copy and ...).
  fs::create_directories(dir + "/step_300");

  const auto list = list_checkpoints(dir);
  REQUIRE(list.size() == 4);
  CHECK(list[0].step == 300);
  CHECK_THAT(list[0].problem, Catch::Contains("manifest.json' is missing"));
  CHECK(list[1].step == 100);
  CHECK_THAT(list[1].problem, Catch::Contains("truncated"));
  CHECK(list[2].step == 20);
  CHECK(list[2].ok());
  CHECK(list[2].manifest->reason == "every_steps");
  CHECK(list[3].step == 5);
  CHECK(list[3].ok());
  CHECK_FALSE(verify_checkpoint(truncated).empty());
}

TEST_CASE("checkpoint dir: commit replaces a step and prune keeps the newest complete ones",
          "[unit][ckpt]") {
  const test::TempDir tmp("ckpt-prune");
  const std::string dir = tmp.file("checkpoints");
  for (int64_t step : {10, 20, 30, 40})
    fake_checkpoint(dir, step);
  const std::string again = fake_checkpoint(dir, 40);  // same step written twice: replaced
  CHECK(verify_checkpoint(again).empty());
  begin_checkpoint(dir, 50);                 // a dead job's leftover
  fs::create_directories(dir + "/step_45");  // incomplete: left for the user to look at

  const std::vector<std::string> removed = prune_checkpoints(dir, 2, again);
  CHECK(removed.size() == 3);  // step_10, step_20, .tmp-step_50
  CHECK_FALSE(fs::exists(dir + "/step_10"));
  CHECK_FALSE(fs::exists(dir + "/step_20"));
  CHECK_FALSE(fs::exists(dir + "/.tmp-step_50"));
  CHECK(fs::exists(dir + "/step_30"));
  CHECK(fs::exists(dir + "/step_40"));
  CHECK(fs::exists(dir + "/step_45"));

  const std::string aside = set_aside_checkpoint(dir + "/step_30", "rejected");
  CHECK(fs::path(aside).filename() == "rejected-step_30");
  CHECK(list_checkpoints(dir).size() == 2);  // step_45 and step_40
}

TEST_CASE("manifest: round trip through JSON and a damaged one is an error", "[unit][ckpt]") {
  Manifest m;
  m.format_version = kCheckpointFormat;
  m.step = 12;
  m.round = 3;
  m.reason = "signal";
  m.created = "2026-11-30T10:00:00Z";
  ManifestFile f;
  f.name = "dc_0.h5";
  f.size = 1234;
  f.datasets["replica/values"] = DatasetSum{400, 0xdeadbeef};
  m.files.push_back(f);
  const Manifest back = parse_manifest(m.to_json(), "test");
  CHECK(back.step == 12);
  CHECK(back.round == 3);
  CHECK(back.reason == "signal");
  REQUIRE(back.find("dc_0.h5") != nullptr);
  CHECK(back.find("dc_0.h5")->datasets.at("replica/values").crc == 0xdeadbeef);
  CHECK(back.total_bytes() == 1234);
  const std::string json = m.to_json();
  CHECK_THROWS_AS(parse_manifest(json.substr(0, json.size() / 2), "half"), CheckpointError);
}

TEST_CASE("compatibility: safe keys may change and others are refused by name", "[unit][ckpt]") {
  const Config saved = parse_config("", {"run.steps=100", "inner.lr=0.001"});
  Config now = saved;
  now.run.steps = 200;
  now.run.log_every = 7;
  now.ckpt.every_steps = 50;
  const std::vector<ConfigChange> allowed = check_config_resumable(saved, now, "ckpt");
  REQUIRE(allowed.size() == 3);
  CHECK(allowed[0].key == "run.steps");
  CHECK(allowed[0].saved == "100");
  CHECK(allowed[0].now == "200");

  now.inner.lr = 0.002;
  now.outer.momentum = 0.5;
  CHECK_THROWS_AS(check_config_resumable(saved, now, "ckpt"), ResumeMismatch);
  CHECK_THROWS_WITH(check_config_resumable(saved, now, "ckpt"),
                    Catch::Contains("inner.lr: 0.001 in the checkpoint, 0.002 now") &&
                        Catch::Contains("outer.momentum: 0.9 in the checkpoint, 0.5 now"));
  CHECK(safe_to_change("ckpt.keep_last"));
  CHECK_FALSE(safe_to_change("model.d_model"));
  CHECK_FALSE(safe_to_change("model.arch"));
  // Where the keys and the first weights came from; the keys themselves are compared.
  CHECK(safe_to_change("model.preset"));
  CHECK(safe_to_change("model.init_from"));
  // The resume's topology check decides it (--allow-topology-change), as for the dcs.
  CHECK(safe_to_change("topology.ranks_per_dc"));
  CHECK(safe_to_change("topology.shard"));
}

TEST_CASE("h5 reader: a dataset larger than one read slice reads back and is checked whole",
          "[unit][ckpt]") {
  const test::TempDir tmp("ckpt-large");
  const std::string path = tmp.file("large.h5");
  // 42 MB: two 32 MiB slices, the second partial, each checksummed while the next is read.
  std::vector<float> data(10'500'000);
  for (size_t i = 0; i < data.size(); ++i)
    data[i] = static_cast<float>(i % 9973) * 0.5f;
  H5Writer w(path);
  w.write("outer/anchor", data.data(), {static_cast<int64_t>(data.size())});
  const DatasetSums sums = w.close();
  CHECK(sums.at("outer/anchor").crc == crc32(data.data(), data.size() * sizeof(float)));
  {
    const H5Reader r(path, &sums);
    CHECK(r.read_f32("outer/anchor") == data);
  }
  // A byte of the second slice: only the checksum over every slice together finds it.
  flip_byte(path, static_cast<std::streamoff>(fs::file_size(path) - 1000));
  CHECK(H5Reader(path).read_f32("outer/anchor") != data);  // the flip is in the data
  const H5Reader r(path, &sums);
  CHECK_THROWS_WITH(r.read_f32("outer/anchor"), Catch::Contains("does not match the manifest"));
}

namespace {

// The message of the CheckpointError that `f` throws; "" when it throws none (another exception
// escapes and fails the test).
template <class F>
std::string checkpoint_error(F&& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "";
}

// Sums of a file that holds `name` as six honest floats: the manifest a crafted file is read
// against (its byte count and CRC-32 are those of what the trainer would have written).
DatasetSums honest_sums(const std::string& path, const std::string& name) {
  const std::vector<float> six = {1, 2, 3, 4, 5, 6};
  H5Writer w(path);
  w.write(name, six.data(), {6});
  return w.close();
}

}  // namespace

TEST_CASE("h5 reader: dimensions whose product overflows are refused naming file and dataset",
          "[unit][ckpt]") {
  const test::TempDir tmp("ckpt-overflow");
  const std::string path = tmp.file("global.h5");
  const DatasetSums sums = honest_sums(tmp.file("honest.h5"), "outer/anchor");
  {
    H5Writer w(path);
    // HDF5 takes these and counts 2^64 mod 2^64 = 0 values.
    w.declare("outer/anchor", H5Type::f32, {uint64_t{1} << 32, uint64_t{1} << 32});
    w.declare("counters/h_per_round", H5Type::i64, {uint64_t{1} << 31, uint64_t{1} << 31, 4});
    w.close();
  }
  const std::string overflow = "does not fit in 64 bits";
  const H5Reader plain(path);
  CHECK_THAT(
      checkpoint_error([&] { plain.numel("outer/anchor"); }),
      Catch::Contains(path) && Catch::Contains("'outer/anchor'") && Catch::Contains(overflow));
  CHECK_THAT(checkpoint_error([&] { plain.read_f32("outer/anchor"); }), Catch::Contains(overflow));
  CHECK_THAT(checkpoint_error([&] { plain.read_i64("counters/h_per_round"); }),
             Catch::Contains("'counters/h_per_round'") && Catch::Contains(overflow));
  CHECK_THAT(checkpoint_error([&] { plain.sums(); }), Catch::Contains(overflow));
  const H5Reader checked(path, &sums);
  CHECK_THAT(checkpoint_error([&] { checked.read_f32("outer/anchor"); }),
             Catch::Contains(path) && Catch::Contains(overflow));
  std::vector<float> into(6);
  CHECK_THAT(checkpoint_error([&] { checked.read("outer/anchor", into.data(), 6); }),
             Catch::Contains(overflow));
}

TEST_CASE(
    "h5 reader: a dataset declared larger than the file or the manifest is refused before "
    "it is allocated",
    "[unit][ckpt]") {
  const test::TempDir tmp("ckpt-oversized");
  const std::string path = tmp.file("global.h5");
  const DatasetSums sums = honest_sums(tmp.file("honest.h5"), "outer/anchor");
  {
    H5Writer w(path);
    w.declare("outer/anchor", H5Type::f32, {uint64_t{1} << 40});  // 4 TiB: would bad_alloc
    w.declare("counters/h_per_round", H5Type::i64, {uint64_t{1} << 60});
    w.declare("rng/cpu", H5Type::u8, {uint64_t{1} << 62});
    w.declare("controller/state", H5Type::f64, {16});  // 128 bytes: fits in the file
    w.close();
  }
  const std::string too_big = "more than the file's";
  const H5Reader plain(path);
  CHECK_THAT(
      checkpoint_error([&] { plain.read_f32("outer/anchor"); }),
      Catch::Contains(path) && Catch::Contains("'outer/anchor'") && Catch::Contains(too_big));
  CHECK_THAT(checkpoint_error([&] { plain.read_i64("counters/h_per_round"); }),
             Catch::Contains(too_big));
  CHECK_THAT(checkpoint_error([&] { plain.read_u8("rng/cpu"); }),
             Catch::Contains("'rng/cpu'") && Catch::Contains(too_big));
  CHECK_THAT(checkpoint_error([&] { plain.sums(); }), Catch::Contains(too_big));
  CHECK(plain.read_f64("controller/state").size() == 16);  // small: read, as fill values

  // With the manifest: its byte count bounds what is allocated, before any value is read.
  DatasetSums manifest = sums;
  manifest["controller/state"] = DatasetSum{24, 0x12345678};  // three values written
  const H5Reader checked(path, &manifest);
  CHECK_THAT(checkpoint_error([&] { checked.read_f32("outer/anchor"); }),
             Catch::Contains(path) && Catch::Contains(too_big));
  CHECK_THAT(checkpoint_error([&] { checked.read_f64("controller/state"); }),
             Catch::Contains(path) && Catch::Contains("'controller/state'") &&
                 Catch::Contains("(128 bytes; the manifest says 24 bytes)"));
  CHECK_THAT(checkpoint_error([&] { checked.read_u8("rng/cpu"); }), Catch::Contains("'rng/cpu'"));
}

TEST_CASE("h5 reader: a string dataset of several strings is refused, not read past its buffer",
          "[unit][ckpt]") {
  const test::TempDir tmp("ckpt-strings");
  const std::string path = tmp.file("global.h5");
  {
    H5Writer w(path);
    w.write("reason", std::string("end"));
    w.declare("config", H5Type::text, {40});  // 40 strings of 8 bytes, where one is read
    w.close();
  }
  const H5Reader r(path);
  CHECK(r.read_string("reason") == "end");
  CHECK_THAT(
      checkpoint_error([&] { r.read_string("config"); }),
      Catch::Contains(path) && Catch::Contains("'config'") && Catch::Contains("holds 40 strings"));
}

TEST_CASE(
    "manifest: file names outside the checkpoint directory, empty, repeated or with a "
    "negative size are refused naming the name",
    "[unit][ckpt]") {
  const auto manifest_with = [](const std::vector<std::string>& names, int64_t size = 10) {
    Manifest m;
    m.format_version = kCheckpointFormat;
    m.step = 5;
    m.reason = "end";
    m.created = "2026-11-30T10:00:00Z";
    for (const std::string& name : names)
      m.files.push_back(ManifestFile{name, size, {{"outer/anchor", DatasetSum{24, 0xabcdef01}}}});
    return m.to_json();
  };
  CHECK_NOTHROW(parse_manifest(manifest_with({"global.h5", "dc_0.h5", "rank_0.h5"}), "ok"));
  CHECK_NOTHROW(parse_manifest(manifest_with({"a..h5"}), "dots inside a name"));
  for (const std::string bad : {"/etc/passwd", "../x.h5", "a/b.h5", "", ".", "..", "dc_0.h5/"}) {
    INFO(bad);
    CHECK_THAT(checkpoint_error([&] {
                 parse_manifest(manifest_with({"global.h5", bad}), "ckpt/manifest.json");
               }),
               Catch::Contains("ckpt/manifest.json") &&
                   Catch::Contains("'" + bad + "', which is not a plain file name"));
    CHECK_THROWS_AS(parse_manifest_file(ManifestFile{bad, 1, {}}.to_json(), "entry"),
                    CheckpointError);
  }
  CHECK_THAT(checkpoint_error([&] {
               parse_manifest(manifest_with({"global.h5", "rank_0.h5", "global.h5"}), "m.json");
             }),
             Catch::Contains("m.json") && Catch::Contains("lists the file 'global.h5' twice"));
  CHECK_THAT(checkpoint_error([&] { parse_manifest(manifest_with({"global.h5"}, -1), "m.json"); }),
             Catch::Contains("m.json") && Catch::Contains("-1 bytes"));

  // A checkpoint whose manifest names a file elsewhere fails the quick check; nothing is opened.
  const test::TempDir tmp("ckpt-names");
  const std::string dir = tmp.file("checkpoints");
  const std::string ckpt = fake_checkpoint(dir, 10);
  Manifest m = read_manifest(ckpt);
  m.files.push_back(
      ManifestFile{"/etc/passwd", static_cast<int64_t>(fs::file_size("/etc/passwd")), {}});
  write_manifest(ckpt, m);
  const CheckpointInfo info = inspect_checkpoint(ckpt);
  CHECK_FALSE(info.ok());
  CHECK_THAT(info.problem, Catch::Contains("/etc/passwd"));
  CHECK_THAT(verify_checkpoint(ckpt), Catch::Contains("/etc/passwd"));
}
