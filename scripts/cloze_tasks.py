#!/usr/bin/env python3
"""Task files cut from text: cloze items in the layouts eval.tasks reads (docs/tasks.md).

    scripts/cloze_tasks.py --out DIR [--items N] [--seed S] TEXT...
    scripts/cloze_tasks.py --out DIR [--items N] [--seed S] --val-of DATA_DIR

With --val-of, the text is the validation split of a directory autoloco-prepare wrote with the
byte tokenizer (its val_*.bin shards are the text's bytes): items from documents the model never
trained on.

Takes the lines of the TEXT files (a prepared corpus's own documents, say) that hold at least
eight words and makes, for each format, up to N items (default 50; each format from its own
fifth of the lines) whose right answer is the line's own next words and whose wrong ones are other
lines' words:

  DIR/mc.jsonl         {"context", "choices", "gold"}; the context ends in a space now and then
  DIR/hellaswag.jsonl  {"activity_label", "ctx_a", "ctx_b", "endings", "label"}, with HellaSwag's
                       "[title]" and "[step]" marks in some endings
  DIR/arc.jsonl        {"question", "choices": {"text", "label"}, "answerKey"}, labels A-D or 1-4
  DIR/piqa.jsonl       {"goal", "sol1", "sol2", "label"}
  DIR/lambada.jsonl    {"text"}: the line, scored on its last word

Continuations are at most four words (HellaSwag's marks aside), contexts the line's words before
them, so a model of a short context scores them with the start of the context cut.

Items are a pure function of the text, N and the seed. They test that a run scores tasks as
lm-evaluation-harness does (tests/e2e/test_tasks.cpp); a model that learnt the text also scores
above chance on them, which makes them a quick check of a run's tasks on any corpus. Exit status
0, or 1 when the text has fewer than two usable lines, 2 on usage errors.
"""

import argparse
import glob
import json
import os
import random
import struct
import sys


def usable_lines(texts):
    """The distinct lines of eight words or more, as lists of words, in order of appearance."""
    lines, seen = [], set()
    for text in texts:
        for line in text.split("\n"):
            words = line.split()
            if len(words) >= 8 and " ".join(words) not in seen:
                seen.add(" ".join(words))
                lines.append(words)
    return lines


def read_texts(paths):
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as f:
            yield f.read()


def val_text(data_dir):
    """The text of a byte-tokenized prepared directory's val shards (llm.c's shard format:
    256 int32 header, magic 20240520 for uint16 tokens or 20240801 for uint32)."""
    with open(os.path.join(data_dir, "prepare.json")) as f:
        tokenizer = json.load(f).get("tokenizer", "bytes")
    if tokenizer != "bytes":
        raise ValueError(f"{data_dir} was prepared with the {tokenizer} tokenizer; --val-of "
                         "reads byte-tokenized data only (give the text files instead)")
    paths = sorted(glob.glob(os.path.join(data_dir, "val_*.bin")))
    if not paths:
        raise ValueError(f"{data_dir} has no val_*.bin shards")
    data = bytearray()
    for path in paths:
        with open(path, "rb") as f:
            magic, _, count = struct.unpack("<3i", f.read(12))
            f.seek(1024)
            width = {20240520: "H", 20240801: "I"}.get(magic)
            if width is None:
                raise ValueError(f"{path} is not a token shard")
            data += bytes(struct.unpack(f"<{count}{width}", f.read(count * struct.calcsize(width))))
    return data.decode("utf-8", errors="replace")


def split_point(words, rng):
    return rng.randint(3, len(words) - 3)


def rest(words, cut):
    """Up to four words after the first `cut`: the continuations stay short."""
    return " ".join(words[cut:cut + 4])


def choices_for(lines, i, cut, rng, count):
    """The line's own next words after `cut` and `count - 1` of other lines."""
    right = rest(lines[i], cut)
    wrong = []
    for _ in range(100 * count):
        if len(wrong) == count - 1:
            break
        j = rng.randrange(len(lines))
        if j == i:
            continue
        other = rest(lines[j], split_point(lines[j], rng))
        if other != right and other not in wrong:
            wrong.append(other)
    gold = rng.randrange(len(wrong) + 1)
    return wrong[:gold] + [right] + wrong[gold:], gold


def mc_item(lines, i, rng):
    cut = split_point(lines[i], rng)
    choices, gold = choices_for(lines, i, cut, rng, 4)
    context = " ".join(lines[i][:cut])
    # The harness moves a context's trailing whitespace to the continuation.
    if rng.random() < 0.25:
        context += " "
    return {"context": context, "choices": choices, "gold": gold}


def hellaswag_item(lines, i, rng):
    words = lines[i]
    cut = split_point(words, rng)
    a = rng.randint(1, cut - 1)
    endings, gold = choices_for(lines, i, cut, rng, 4)
    marks = [" [title]", " [step]", " [header]"]
    endings = [e + rng.choice(marks) + " more" if rng.random() < 0.2 else e for e in endings]
    return {"activity_label": words[0].strip(".,:;").capitalize() or "Text",
            "ctx_a": " ".join(words[:a]), "ctx_b": " ".join(words[a:cut]).upper(),
            "endings": endings, "label": str(gold)}


def arc_item(lines, i, rng):
    cut = split_point(lines[i], rng)
    texts, gold = choices_for(lines, i, cut, rng, rng.choice([3, 4, 5]))
    labels = ["A", "B", "C", "D", "E"] if rng.random() < 0.7 else ["1", "2", "3", "4", "5"]
    labels = labels[:len(texts)]
    return {"question": " ".join(lines[i][:cut]) + "?",
            "choices": {"text": texts, "label": labels}, "answerKey": labels[gold]}


def piqa_item(lines, i, rng):
    cut = split_point(lines[i], rng)
    sols, gold = choices_for(lines, i, cut, rng, 2)
    return {"goal": " ".join(lines[i][:cut]), "sol1": sols[0], "sol2": sols[1], "label": gold}


def lambada_item(lines, i, rng):
    return {"text": " ".join(lines[i])}


MAKERS = {"mc": mc_item, "hellaswag": hellaswag_item, "arc": arc_item, "piqa": piqa_item,
          "lambada": lambada_item}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", required=True, help="directory for the task files")
    parser.add_argument("--items", type=int, default=50, help="items per format (default 50)")
    parser.add_argument("--seed", type=int, default=1234, help="seed (default 1234)")
    parser.add_argument("--val-of", metavar="DATA_DIR",
                        help="cut the items from this byte-tokenized prepared directory's val "
                             "split instead of TEXT files")
    parser.add_argument("text", nargs="*", help="text files to cut the items from")
    args = parser.parse_args()
    if args.items < 1:
        parser.error("--items must be positive")
    if bool(args.val_of) == bool(args.text):
        parser.error("give TEXT files or --val-of DATA_DIR (one of them)")
    try:
        lines = usable_lines([val_text(args.val_of)] if args.val_of else read_texts(args.text))
    except (OSError, ValueError) as e:
        print(f"cloze_tasks.py: {e}", file=sys.stderr)
        return 1
    if len(lines) < 2:
        print(f"cloze_tasks.py: {len(lines)} lines of eight words or more in the text; need 2",
              file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    # Each format gets its own lines: one lm-eval run over several tasks must never meet the same
    # text split at two points (lm-eval 0.4.13 then scores the shorter continuation at the
    # longer one's positions: docs/tasks.md).
    order = list(range(len(lines)))
    random.Random(args.seed).shuffle(order)
    share = max(1, len(order) // len(MAKERS))
    for k, (name, make) in enumerate(MAKERS.items()):
        rng = random.Random(f"{args.seed}/{name}")
        picks = order[k * share:(k + 1) * share][:args.items] or order[:1]
        path = os.path.join(args.out, name + ".jsonl")
        with open(path, "w", encoding="utf-8") as f:
            for i in picks:
                f.write(json.dumps(make(lines, i, rng), ensure_ascii=False) + "\n")
        print(f"{path}: {len(picks)} items")
    return 0


if __name__ == "__main__":
    sys.exit(main())
