"""Cost of the graded t2i relevance labels (vlbench.metrics.graded) on the real test captions.

Measures, per dataset (Flickr30k 1k test: 5,000 captions x 1,000 images; MS-COCO 5k test: 25,000 x 5,000):
  * ROUGE-L (bit-parallel LCS): index build + every query row (the full relevance matrix, computed in
    blocks and discarded), wall and CPU seconds; with --max-queries N only N evenly spaced queries are
    computed and the full time is extrapolated linearly (rows are independent);
  * the naive baseline: coco-caption's pure-Python dynamic-programming LCS on a sample of
    (query, image) pairs, extrapolated to the whole matrix;
  * MiniLM (all-MiniLM-L6-v2 on CPU unless --device): model load, encoding of the distinct captions
    (all of them, or --minilm-sample captions and extrapolated), and every query row.

usage: python scripts/benchmarks/bench_graded.py [--datasets flickr30k coco5k] [--max-queries N] [--skip-minilm]
                                      [--minilm-sample 2000] [--device cpu] [--json out.json]
The figures in docs/graded_relevance.md come from this script.
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

FILES = {"flickr30k": "flickr30k_test.jsonl", "coco5k": "coco5k_test.jsonl",
         "flickr30k-fg": "flickr30k_fg_test.jsonl", "coco5k-fg": "coco5k_fg_test.jsonl"}
DEFAULT_DIR = Path(os.environ.get("VLBENCH_SHARED_CAPTIONS", ROOT.parent / "shared" / "data" / "captions"))


def load(path: Path):
    rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    caps = [c for r in rows for c in r["captions"]]
    c2i = np.repeat(np.arange(len(rows)), [len(r["captions"]) for r in rows])
    return caps, c2i, len(rows)


class Clock:
    def __enter__(self):
        self.w, self.c = time.perf_counter(), time.process_time()
        return self

    def __exit__(self, *a):
        self.wall = time.perf_counter() - self.w
        self.cpu = time.process_time() - self.c


def _hwm_mb() -> float:
    try:
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return float("nan")


def _dp_lcs(a, b):
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def naive_rouge(cand, refs, beta=1.2):
    c = re.findall(r"[a-z0-9]+", cand.lower())[:64]
    if not c:
        return 0.0
    p, r = [], []
    for ref in refs:
        t = re.findall(r"[a-z0-9]+", ref.lower())[:64]
        lcs = _dp_lcs(t, c)
        p.append(lcs / len(c))
        r.append(lcs / len(t) if t else 0.0)
    pm, rm = max(p), max(r)
    return ((1 + beta ** 2) * pm * rm) / (rm + beta ** 2 * pm) if pm and rm else 0.0


def bench_rouge(name, caps, c2i, n_images, max_queries, block=1024):
    from vlbench.metrics.graded import RougeLRelevance

    with Clock() as tb:
        rel = RougeLRelevance(caps, c2i, n_images)
    n = len(caps)
    queries = np.arange(n) if not max_queries or max_queries >= n else \
        np.linspace(0, n - 1, max_queries).round().astype(np.int64)
    s = 0.0
    own = []
    zeros = 0
    with Clock() as tr:
        for a in range(0, len(queries), block):
            q = queries[a:a + block]
            m = rel.rows("t2i", q)
            s += float(m.sum())
            zeros += int((m == 0).sum())
            own.append(m[np.arange(len(q)), c2i[q]])
    scale = n / len(queries)
    own = np.concatenate(own)
    out = dict(dataset=name, captions=n, images=n_images, lcs_pairs=n * n, queries_run=len(queries),
               build_s=tb.wall, rows_wall_s=tr.wall * scale, rows_cpu_s=tr.cpu * scale,
               per_query_ms=tr.wall / len(queries) * 1e3, extrapolated=bool(scale > 1),
               mean_rel=s / (len(queries) * n_images), zero_frac=zeros / (len(queries) * n_images),
               own_is_1=bool((own == 1.0).all()), truncated_captions=rel.n_truncated, vocab=rel.vocab_size,
               dense_tokens=len(rel._index.dense_tokens))
    # naive pure-Python baseline on a random sample of (query, image) pairs
    rng = random.Random(0)
    by_img = [[] for _ in range(n_images)]
    for j, i in enumerate(c2i):
        by_img[i].append(caps[j])
    pairs = [(rng.randrange(n), rng.randrange(n_images)) for _ in range(400)]
    with Clock() as tn:
        vals = [naive_rouge(caps[q], by_img[i]) for q, i in pairs]
    got = [rel.rows("t2i", [q])[0, i] for q, i in pairs]
    assert np.allclose(vals, got, rtol=0, atol=1e-12), "bit-parallel ROUGE-L disagrees with the naive one"
    out["naive_full_s"] = tn.wall / len(pairs) * n * n_images
    out["speedup_vs_naive"] = out["naive_full_s"] / (out["rows_wall_s"] + out["build_s"])
    return out


class SampledEncoder:
    """Encodes the first k distinct captions for real (timed) and gives the rest random unit vectors.

    rows() costs do not depend on the embedding values, so this times them on the full problem while
    the encoding time is extrapolated from k captions.
    """

    def __init__(self, model, k, batch_size):
        self.model, self.k, self.bs = model, k, batch_size
        self.max_seq_length = model.max_seq_length
        self.encoded = 0
        self.wall = self.cpu = 0.0

    def encode(self, sentences, **kw):
        sentences = list(sentences)
        sample = sentences[: self.k]
        with Clock() as t:
            e = self.model.encode(sample, **kw)
        self.wall, self.cpu, self.encoded = t.wall, t.cpu, len(sample)
        rest = np.random.default_rng(0).standard_normal((len(sentences) - len(sample), e.shape[1])).astype(e.dtype)
        rest /= np.linalg.norm(rest, axis=1, keepdims=True)
        return np.concatenate([e, rest])


def bench_minilm(name, caps, c2i, n_images, model, sample, batch_size, device):
    from vlbench.metrics.graded import MiniLMRelevance

    n_distinct = len(set(caps))
    enc = SampledEncoder(model, sample if sample else n_distinct, batch_size)
    with Clock() as tb:
        rel = MiniLMRelevance(caps, c2i, n_images, model=enc, batch_size=batch_size)
    scale = n_distinct / max(1, enc.encoded)
    with Clock() as tr:
        for a in range(0, len(caps), 1024):
            rel.rows("t2i", np.arange(a, min(len(caps), a + 1024)))
    return dict(dataset=name, device=device or "auto", distinct_captions=n_distinct, encoded=enc.encoded,
                encode_wall_s=enc.wall * scale, encode_cpu_s=enc.cpu * scale, encode_extrapolated=bool(scale > 1),
                captions_per_s=enc.encoded / enc.wall if enc.wall else float("nan"),
                rows_wall_s=tr.wall, rows_cpu_s=tr.cpu, build_other_s=tb.wall - enc.wall)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--data-dir", type=Path, default=DEFAULT_DIR)
    ap.add_argument("--datasets", nargs="+", default=["flickr30k", "coco5k"], choices=sorted(FILES))
    ap.add_argument("--max-queries", type=int, default=0, help="ROUGE-L: run only N queries, extrapolate")
    ap.add_argument("--skip-minilm", action="store_true")
    ap.add_argument("--minilm-sample", type=int, default=2000,
                    help="encode this many distinct captions per dataset and extrapolate (0: all)")
    ap.add_argument("--batch-size", type=int, default=128)
    ap.add_argument("--device", default=None, help="MiniLM device (default: sentence-transformers' choice)")
    ap.add_argument("--json", type=Path, default=None)
    args = ap.parse_args(argv)

    info = dict(cpus=os.cpu_count(), loadavg_start=os.getloadavg(), numpy=np.__version__)
    print(f"# bench_graded: {info['cpus']} CPUs, load average at start {info['loadavg_start']}")
    results = {"info": info, "rouge_l": [], "minilm": []}
    data = {}
    for d in args.datasets:
        path = args.data_dir / FILES[d]
        if not path.is_file():
            sys.exit(f"missing {path} (set --data-dir or VLBENCH_SHARED_CAPTIONS)")
        data[d] = load(path)

    print("\n## ROUGE-L (coco-caption formula, beta 1.2; bit-parallel LCS, 1 thread)")
    print(f"{'dataset':<14}{'queries x images':>20}{'LCS pairs':>14}{'build s':>9}{'rows wall s':>13}"
          f"{'rows cpu s':>12}{'ms/query':>10}{'naive est. s':>14}{'speedup':>9}")
    for d, (caps, c2i, n_img) in data.items():
        r = bench_rouge(d, caps, c2i, n_img, args.max_queries)
        results["rouge_l"].append(r)
        ext = " (extrapolated)" if r["extrapolated"] else ""
        print(f"{d:<14}{f'{len(caps)} x {n_img}':>20}{r['lcs_pairs'] / 1e6:>12.0f} M{r['build_s']:>9.2f}"
              f"{r['rows_wall_s']:>13.1f}{r['rows_cpu_s']:>12.1f}{r['per_query_ms']:>10.3f}"
              f"{r['naive_full_s']:>14.0f}{r['speedup_vs_naive']:>8.0f}x{ext}")
        print(f"{'':<14}mean rel {r['mean_rel']:.4f}, zero labels {100 * r['zero_frac']:.1f}%, rel(own image) == 1: "
              f"{r['own_is_1']}, captions truncated to 64 tokens: {r['truncated_captions']}, vocabulary "
              f"{r['vocab']}, dense-mask tokens {r['dense_tokens']}")

    if not args.skip_minilm:
        print("\n## MiniLM (all-MiniLM-L6-v2, max cosine over the image's captions)")
        from vlbench.metrics.graded import load_minilm

        with Clock() as tl:
            model = load_minilm(args.device)
        results["minilm_load_s"] = tl.wall
        dev = str(model.device)
        print(f"model load (imports + weights): {tl.wall:.1f} s wall on {dev}")
        print(f"{'dataset':<14}{'distinct caps':>14}{'encoded':>9}{'caps/s':>8}{'encode wall s':>15}"
              f"{'encode cpu s':>14}{'rows wall s':>13}{'rows cpu s':>12}")
        for d, (caps, c2i, n_img) in data.items():
            r = bench_minilm(d, caps, c2i, n_img, model, args.minilm_sample, args.batch_size, dev)
            results["minilm"].append(r)
            ext = " (encode extrapolated)" if r["encode_extrapolated"] else ""
            print(f"{d:<14}{r['distinct_captions']:>14}{r['encoded']:>9}{r['captions_per_s']:>8.0f}"
                  f"{r['encode_wall_s']:>15.1f}{r['encode_cpu_s']:>14.1f}{r['rows_wall_s']:>13.1f}"
                  f"{r['rows_cpu_s']:>12.1f}{ext}")
    info["loadavg_end"] = os.getloadavg()
    info["peak_rss_mb"] = _hwm_mb()
    print(f"\n# load average at end {info['loadavg_end']}; peak RSS {info['peak_rss_mb']:.0f} MB "
          f"(a load average above the CPU count means other processes shared the CPUs: wall > cpu)")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
