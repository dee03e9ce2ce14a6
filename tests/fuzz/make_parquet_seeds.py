#!/usr/bin/env python3
"""Writes the seeds of the parquet fuzz target (tests/fuzz/corpus/parquet) with pyarrow, in the
venv of scripts/hf-env.sh, from the repository root:

    $(scripts/hf-env.sh | tail -1) tests/fuzz/make_parquet_seeds.py

Small files in the layouts a reader meets: plain and dictionary-encoded strings, large strings,
nulls, several row groups, the codecs FineWeb and friends use, and a file without a text column.
"""
import os

import pyarrow as pa
import pyarrow.parquet as pq

OUT = "tests/fuzz/corpus/parquet"
TEXTS = ["row %d: caf\u00e9 \U0001F680 %s" % (i, "x" * (i % 7)) for i in range(40)]


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
