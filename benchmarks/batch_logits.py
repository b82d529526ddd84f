"""Does llama.cpp give a token the same logits in a batch as decoded alone? (issue 15)

    python benchmarks/batch_logits.py [--chars 600 3000] [--tokens 8]

Prompt lookup verifies a draft in one batch; "identical text at temperature 0" needs the
batch's logits to pick what decoding one token at a time picks. This evaluates a prefix
of benchmarks/data/orders.py with the starter model, then the next tokens of the file
once one at a time and once as one batch, and compares the logits of each position: the
largest difference over the vocabulary, the largest difference in the gaps between the
best token and the next four (what decides a greedy pick), and whether the best token is
the same. It does so with and without llama.cpp's extra CPU buffer types (repacked and
AMX weights) and with flash attention off and on. Prints a table and writes JSON.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import llama_cpp
import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.throughput import starter_model  # noqa: E402

SOURCE = ROOT / "benchmarks" / "data" / "orders.py"


def _load(path: Path, extra_bufts: bool, flash_attn: bool) -> llama_cpp.Llama:
    bindings = llama_cpp.llama_cpp  # the ctypes module Llama calls, not the package's re-export
    default = bindings.llama_model_default_params

    def params():
        made = default()
        made.use_extra_bufts = extra_bufts
        return made

    # Llama builds its model parameters from this function and offers no argument for the field.
    bindings.llama_model_default_params = params
    try:
        return llama_cpp.Llama(str(path), n_ctx=4096, n_threads=2, flash_attn=flash_attn, verbose=False)
    finally:
        bindings.llama_model_default_params = default


def _logits(llm: llama_cpp.Llama, index: int) -> np.ndarray:
    pointer = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, index)
    return np.ctypeslib.as_array(pointer, shape=(llm.n_vocab(),)).copy()


def compare(llm: llama_cpp.Llama, chars: int, count: int) -> list[dict]:
    text = SOURCE.read_text(encoding="utf-8")
    prompt = llm.tokenize(text[:chars].encode(), add_bos=True)
    following = llm.tokenize(text[chars:chars + 400].encode(), add_bos=False)[:count]
    llm.reset()
    llm.eval(prompt)
    alone = []
    for token in following:
        llm.eval([token])
        alone.append(_logits(llm, -1))
    llm.reset()
    llm.eval(prompt)
    llm._batch.set_batch(batch=following, n_past=llm.n_tokens, logits_all=True)
    llm._ctx.decode(llm._batch)
    rows = []
    for position, single in enumerate(alone):
        batched = _logits(llm, position)
        best = np.argsort(single)[-5:][::-1]
        gaps_single = single[best[0]] - single[best[1:]]
        gaps_batched = batched[best[0]] - batched[best[1:]]
        rows.append({"position": position, "max_diff": float(np.max(np.abs(batched - single))),
                     "gap_diff": float(np.max(np.abs(gaps_single - gaps_batched))),
                     "margin": float(gaps_single[0]), "same_best": bool(np.argmax(batched) == best[0])})
    return rows


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chars", type=int, nargs="+", default=[600, 3000], help="prefix lengths of the file")
    parser.add_argument("--tokens", type=int, default=8, help="positions compared after each prefix")
    parser.add_argument("--json", type=Path, default=ROOT / "benchmarks" / "results" / "batch_logits.json")
    args = parser.parse_args()
    path = starter_model()
    results = []
    print(f"{'extra bufts':<12}{'flash attn':<12}{'prefix':>7}{'max |diff|':>12}{'max gap diff':>14}"
          f"{'smallest margin':>17}{'same best':>11}")
    for extra in (True, False):
        for flash in (False, True):
            llm = _load(path, extra, flash)
            for chars in args.chars:
                rows = compare(llm, chars, args.tokens)
                summary = {"extra_bufts": extra, "flash_attn": flash, "prefix_chars": chars, "rows": rows}
                results.append(summary)
                print(f"{str(extra):<12}{str(flash):<12}{chars:>7}{max(r['max_diff'] for r in rows):>12.3f}"
                      f"{max(r['gap_diff'] for r in rows):>14.3f}{min(r['margin'] for r in rows):>17.3f}"
                      f"{sum(r['same_best'] for r in rows):>8}/{len(rows)}")
            llm.close()
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps({"model": str(path), "results": results}, indent=2), encoding="utf-8")
    print(f"\nwritten: {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
