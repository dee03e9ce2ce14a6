#!/usr/bin/env python3
"""Writes the seeds of the parquet fuzz target (tests/fuzz/corpus/parquet) with pyarrow, in the
venv of scripts/hf-env.sh, from the repository root:

    $(scripts/hf-env.sh | tail -1) tests/fuzz/make_parquet_seeds.py

Small files in the layouts a reader meets: plain and dictionary-encoded strings, large strings,
nulls, several row groups, the codecs FineWeb and friends use, a file without a text column, and
one whose page header claims 2 GiB (the parquet reader's memory limit; test_row_readers.cpp reads
it too).
"""
import os

import pyarrow as pa
import pyarrow.parquet as pq

OUT = "tests/fuzz/corpus/parquet"
TEXTS = ["row %d: caf\u00e9 \U0001F680 %s" % (i, "x" * (i % 7)) for i in range(40)]


def varint(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def skip_varint(data, i):
    while data[i] & 0x80:
        i += 1
    return i + 1


def claim_huge_page(path):
    """The first data page's sizes made 2^31 - 64 bytes, as a damaged header can claim: the
    header is thrift's compact form, fields 1 to 3 (type, uncompressed and compressed size)
    one-byte field headers 0x15 and zigzag varints."""
    at = pq.ParquetFile(path).metadata.row_group(0).column(0).data_page_offset
    data = open(path, "rb").read()
    i = at
    for _ in range(3):
        assert data[i] == 0x15, "not a page header with the three i32 fields first"
        i = skip_varint(data, i + 1)
    huge = varint((2**31 - 64) * 2)
    header = b"\x15" + varint(0) + b"\x15" + huge + b"\x15" + huge
    with open(path, "wb") as out:
        out.write(data[:at] + header + data[i:])


def write(name, table, **kwargs):
    pq.write_table(table, os.path.join(OUT, name), **kwargs)


os.makedirs(OUT, exist_ok=True)
write("plain.parquet", pa.table({"text": TEXTS}), compression="none")
write("groups_snappy.parquet", pa.table({"id": list(range(40)), "text": TEXTS}),
      row_group_size=16, compression="snappy")
write("zstd_dict.parquet", pa.table({"text": pa.array(TEXTS).dictionary_encode()}),
      compression="zstd", row_group_size=25)
write("large_nulls.parquet",
      pa.table({"text": pa.array([t if i % 5 else None for i, t in enumerate(TEXTS)],
                                 pa.large_string())}), compression="gzip")
write("no_text.parquet", pa.table({"body": TEXTS[:5]}))
write("ints.parquet", pa.table({"text": list(range(5))}))
write("v2_pages.parquet", pa.table({"text": TEXTS}), data_page_version="2.0",
      data_page_size=256, compression="zstd")
write("huge_page.parquet", pa.table({"text": TEXTS}), compression="none",
      use_dictionary=False)
claim_huge_page(os.path.join(OUT, "huge_page.parquet"))
