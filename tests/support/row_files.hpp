// Test support: json lines written plain, gzip (several members) and zstd (several frames)
// compressed by the libraries themselves, and parquet files written by pyarrow in the Python of
// scripts/hf-env.sh, for the tests of autoloco-prepare's row readers.
#pragma once

#include <zlib.h>
#include <zstd.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <string>
#include <vector>

#include "autoloco/data/row_reader.hpp"
#include "hf_python.hpp"
#include "run_files.hpp"

namespace autoloco::test {

// `text` compressed as one gzip member.
inline std::string gzip_member(const std::string& text) {
  z_stream z{};
  REQUIRE(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, static_cast<uLong>(text.size())) + 64, '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(text.data()));
  z.avail_in = static_cast<uInt>(text.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  REQUIRE(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// `text` compressed as one zstd frame, with the content checksum the zstd command writes.
inline std::string zstd_frame(const std::string& text) {
  std::string out(ZSTD_compressBound(text.size()), '\0');
  ZSTD_CCtx* context = ZSTD_createCCtx();
  REQUIRE(context != nullptr);
  ZSTD_CCtx_setParameter(context, ZSTD_c_checksumFlag, 1);
  const size_t size = ZSTD_compress2(context, out.data(), out.size(), text.data(), text.size());
  ZSTD_freeCCtx(context);
  REQUIRE(ZSTD_isError(size) == 0U);
  out.resize(size);
  return out;
}

// `text` split in two at `cut`, each half compressed on its own and the two concatenated, as
// `cat a.gz b.gz` (pigz, zstd -T) makes.
inline std::string gzip_two_members(const std::string& text, size_t cut) {
  return gzip_member(text.substr(0, cut)) + gzip_member(text.substr(cut));
}
inline std::string zstd_two_frames(const std::string& text, size_t cut) {
  return zstd_frame(text.substr(0, cut)) + zstd_frame(text.substr(cut));
}

// True, with a note that the test is skipped, in a build that reads no parquet (the ci preset
// requires the reader, so CI runs these tests).
inline bool without_parquet() {
  if (parquet_supported()) return false;
  WARN("AUTOLOCO_TEST_SKIPPED: this build reads no parquet (configured without pyarrow)");
  return true;
}

// Runs `script` (Python with pyarrow imported as pa, pyarrow.parquet as pq, and `d` the path of
// `dir`, which also gets the script and its log) in the venv of scripts/hf-env.sh.
inline void run_pyarrow(const std::filesystem::path& dir, const std::string& script) {
  const std::string log = (dir / "pyarrow.log").string();
  const std::string python = hf_python("pyarrow, pyarrow.parquet", log);
  const std::string path = (dir / "make_parquet.py").string();
  write_text(path, "import pyarrow as pa\nimport pyarrow.parquet as pq\nd = " +
                       shell_quote(dir.string()) + "\n" + script);
  INFO(read_text(log));
  REQUIRE(run_command(shell_quote(python) + " " + shell_quote(path) + " > " + shell_quote(log) +
                      " 2>&1") == 0);
}

}  // namespace autoloco::test
