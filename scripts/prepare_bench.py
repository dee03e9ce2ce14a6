#!/usr/bin/env python3
"""autoloco-prepare on corpora as they ship: throughput per core and peak memory.

    $(scripts/hf-env.sh | tail -1) scripts/prepare_bench.py [--bin build/release/apps]
        [--out runs/prepare-bench] [--mb 64] [--memory-gb 0] [--memory-parquet-gb 0]
        [--memory-only] [--repeat 3] [--threads N]

Writes, under OUT, a corpus of json lines (zstd) made of the Python docs' reST sources (Debian's
python3-doc; each file a row, repeated to --mb MB of text), a byte-level BPE tokenizer.json of
8192 pieces trained on it with the tokenizers library, and then measures, alternating the
repeats and keeping medians:

  - autoloco-prepare --tokenizer bytes | sentencepiece (--sp-model, a 4096-piece BPE model it
    trained first) | hf (--hf-tokenizer the tokenizer.json), end to end (reading, decompressing,
    parsing, encoding, writing shards): MB of text per second, per core;
  - the reference for hf: the tokenizers library's own Tokenizer.encode_batch of the same texts
    in Python on the same cores (RAYON_NUM_THREADS), the texts already in memory, 1024 at a
    time; and its encode_batch_fast (the same ids without offsets, what autoloco-prepare's
    helper calls where the library has it);

and, with --memory-gb G, the peak resident memory (ru_maxrss) of autoloco-prepare --tokenizer
bytes over a corpus of G GB of json lines (zstd), generated under OUT and removed after; with
--memory-parquet-gb G the same over one parquet file of G GB of text in a single row group (the
layout that asks most of the reader; pyarrow holds it all while writing, about 3.3x G in RAM).
--memory-only skips the throughput measurement.
Prints one JSON object (also OUT/prepare-bench.json) and the table of docs/results.md.
"""
import argparse
import json
import multiprocessing
import os
import statistics
import subprocess
import sys
import time

SOURCES = "/usr/share/doc/python3.11/html/_sources"


def log(*args):
    print("prepare_bench:", *args, file=sys.stderr, flush=True)


def documents():
    docs = []
    for root, _, files in os.walk(SOURCES):
        for name in sorted(files):
            if name.endswith(".txt"):
                with open(os.path.join(root, name), encoding="utf-8", errors="replace") as f:
                    docs.append(f.read())
    if not docs:
        sys.exit(f"prepare_bench: no .txt under {SOURCES}; apt-get install python3-doc")
    return docs


def corpus_texts(docs, target_bytes):
    """The rows of the generated corpora: `docs` repeated (numbered after the first pass, so that
    no two rows are equal) until `target_bytes` of text."""
    total = 0
    rows = 0
    while True:
        for doc in docs:
            text = doc if rows < len(docs) else f"{rows} {doc}"
            yield text
            total += len(text.encode("utf-8"))
            rows += 1
            if total >= target_bytes:
                return


def make_corpus(path, docs, target_bytes):
    """corpus_texts as json lines through zstd; returns (text bytes, rows)."""
    total = 0
    rows = 0
    with subprocess.Popen(["zstd", "-q", "-3", "-T0", "-f", "-o", path],
                          stdin=subprocess.PIPE) as z:
        for text in corpus_texts(docs, target_bytes):
            line = json.dumps({"id": rows, "text": text}, ensure_ascii=False) + "\n"
            z.stdin.write(line.encode("utf-8"))
            total += len(text.encode("utf-8"))
            rows += 1
        z.stdin.close()
    return total, rows


def read_texts(path):
    out = subprocess.run(["zstd", "-dc", path], check=True, capture_output=True).stdout
    return [json.loads(line)["text"] for line in out.splitlines() if line.strip()]


def train_tokenizer(texts, path):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=8192, initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts[:2000], trainer=trainer)
    tok.save(path)


def run_prepare(bin_dir, out, corpus, args, threads):
    cmd = [os.path.join(bin_dir, "autoloco-prepare"), "--out", out, "--overwrite",
           "--threads", str(threads), *args, corpus]
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        sys.exit(f"prepare_bench: {' '.join(cmd)} failed:\n{proc.stderr}")
    return seconds, proc.stdout


def reference_encode(texts, tokenizer_json, threads, method="encode_batch"):
    code = (
        "import json, sys, time\n"
        "from tokenizers import Tokenizer\n"
        "texts = json.load(open(sys.argv[1]))\n"
        "tok = Tokenizer.from_file(sys.argv[2])\n"
        "start = time.perf_counter()\n"
        "encode = getattr(tok, sys.argv[3])\n"
        "n = 0\n"
        "for i in range(0, len(texts), 1024):\n"
        "    n += sum(len(e.ids) for e in encode(texts[i:i + 1024], add_special_tokens=False))\n"
        "print(json.dumps({'seconds': time.perf_counter() - start, 'tokens': n}))\n")
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads), TOKENIZERS_PARALLELISM="true")
    proc = subprocess.run([sys.executable, "-c", code, texts, tokenizer_json, method], env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def make_parquet(path, docs, target_bytes):
    """corpus_texts as one parquet file of a single row group (zstd, pyarrow's other defaults):
    the layout that asks most of a reader's memory, one column chunk of every row."""
    import pyarrow as pa
    import pyarrow.parquet as pq
    texts = list(corpus_texts(docs, target_bytes))
    pq.write_table(pa.table({"text": texts}), path, compression="zstd",
                   row_group_size=len(texts))
    return sum(len(t.encode("utf-8")) for t in texts), len(texts)


def peak_memory(bin_dir, out, docs, gigabytes, parquet=False):
    corpus = os.path.join(out, "memory")
    os.makedirs(corpus, exist_ok=True)
    kind = "parquet (one row group, zstd)" if parquet else "json lines (zstd)"
    path = os.path.join(corpus, "big.parquet" if parquet else "big.jsonl.zst")
    log(f"writing {gigabytes} GB of {kind} for the memory measurement")
    if parquet:
        # In a process of its own: pyarrow holds the whole table while it writes, and a child
        # forked from a parent that large would start its peak (ru_maxrss) there.
        with multiprocessing.get_context("spawn").Pool(1) as pool:
            text_bytes, rows = pool.apply(make_parquet, (path, docs, int(gigabytes * 1e9)))
    else:
        text_bytes, rows = make_corpus(path, docs, int(gigabytes * 1e9))
    compressed = os.path.getsize(path)
    shards = os.path.join(out, "memory-out")
    cmd = [os.path.join(bin_dir, "autoloco-prepare"), "--out", shards, "--overwrite", path]
    start = time.perf_counter()
    # wait4 gives this child's own peak (RUSAGE_CHILDREN would be the largest of all children,
    # the Python references' included).
    with open(os.path.join(out, "memory.log"), "w") as logfile:
        proc = subprocess.Popen(cmd, stdout=logfile, stderr=subprocess.STDOUT)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    seconds = time.perf_counter() - start
    peak_kib = usage.ru_maxrss
    if proc.returncode != 0:
        sys.exit(f"prepare_bench: {' '.join(cmd)} failed; see {out}/memory.log")
    subprocess.run(["rm", "-rf", corpus, shards], check=True)
    return {"format": kind, "text_bytes": text_bytes, "rows": rows, "compressed_bytes": compressed,
            "seconds": seconds, "peak_rss_mib": peak_kib / 1024}


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--bin", default="build/release/apps")
    p.add_argument("--out", default="runs/prepare-bench")
    p.add_argument("--mb", type=float, default=64, help="MB of text in the speed corpus")
    p.add_argument("--repeat", type=int, default=3)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--memory-gb", type=float, default=0,
                   help="also measure peak memory over a corpus of this many GB")
    p.add_argument("--memory-parquet-gb", type=float, default=0,
                   help="and over one parquet file of this many GB of text in one row group")
    p.add_argument("--memory-only", action="store_true",
                   help="measure memory only, not throughput")
    args = p.parse_args()
    os.makedirs(args.out, exist_ok=True)
    docs = documents()
    if args.memory_only:
        result = memory_results(args, docs)
        with open(os.path.join(args.out, "prepare-memory.json"), "w") as f:
            json.dump(result, f, indent=1)
        print(json.dumps(result))
        return 0
    return speed_and_memory(args, docs)


def memory_results(args, docs):
    result = {}
    if args.memory_gb > 0:
        result["memory"] = peak_memory(args.bin, args.out, docs, args.memory_gb)
    if args.memory_parquet_gb > 0:
        result["memory_parquet"] = peak_memory(args.bin, args.out, docs, args.memory_parquet_gb,
                                               parquet=True)
    return result


def speed_and_memory(args, docs):
    corpus = os.path.join(args.out, "corpus")
    os.makedirs(corpus, exist_ok=True)
    path = os.path.join(corpus, "pydoc.jsonl.zst")
    text_bytes, rows = make_corpus(path, docs, int(args.mb * 1e6))
    log(f"{rows} rows, {text_bytes / 1e6:.1f} MB of text in {path}")
    texts = read_texts(path)
    texts_json = os.path.join(args.out, "texts.json")
    with open(texts_json, "w") as f:
        json.dump(texts, f)
    tokenizer_json = os.path.join(args.out, "tokenizer.json")
    train_tokenizer(texts, tokenizer_json)
    sp_dir = os.path.join(args.out, "sp")
    run_prepare(args.bin, sp_dir, path, ["--tokenizer", "sentencepiece", "--vocab-size", "4096"],
                args.threads)
    kinds = {
        "bytes": ["--tokenizer", "bytes"],
        "sentencepiece": ["--tokenizer", "sentencepiece", "--sp-model",
                          os.path.join(sp_dir, "tokenizer.model")],
        "hf": ["--tokenizer", "hf", "--hf-tokenizer", tokenizer_json, "--hf-python", sys.executable],
    }
    times = {k: [] for k in [*kinds, "tokenizers", "tokenizers_fast"]}
    for r in range(args.repeat):
        for kind, flags in kinds.items():
            seconds, _ = run_prepare(args.bin, os.path.join(args.out, kind), path, flags,
                                     args.threads)
            times[kind].append(seconds)
        times["tokenizers"].append(reference_encode(texts_json, tokenizer_json, args.threads)["seconds"])
        times["tokenizers_fast"].append(reference_encode(texts_json, tokenizer_json, args.threads,
                                                         "encode_batch_fast")["seconds"])
        log(f"repeat {r + 1}: " + ", ".join(f"{k} {v[-1]:.2f} s" for k, v in times.items()))
    result = {"text_mb": text_bytes / 1e6, "rows": rows, "threads": args.threads,
              "repeats": args.repeat, "seconds": {k: statistics.median(v) for k, v in times.items()}}
    result["mb_per_s_per_core"] = {k: text_bytes / 1e6 / s / args.threads
                                   for k, s in result["seconds"].items()}
    result["hf_over_tokenizers"] = result["seconds"]["tokenizers"] / result["seconds"]["hf"]
    result["hf_over_tokenizers_fast"] = (result["seconds"]["tokenizers_fast"] /
                                         result["seconds"]["hf"])
    result.update(memory_results(args, docs))
    with open(os.path.join(args.out, "prepare-bench.json"), "w") as f:
        json.dump(result, f, indent=1)
    print(json.dumps(result))
    print()
    print("| encoder | seconds | MB/s per core | against tokenizers' encode_batch |")
    print("| --- | --- | --- | --- |")
    ref = result["seconds"]["tokenizers"]
    for k in ["tokenizers", "tokenizers_fast", "hf", "sentencepiece", "bytes"]:
        s = result["seconds"][k]
        print(f"| {k} | {s:.2f} | {result['mb_per_s_per_core'][k]:.2f} | {ref / s:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
