"""The text-only plausibility scorer of the blind baselines: an interpolated Kneser-Ney bigram language model of image
captions, trained on the MS-COCO Karpathy 5k test captions (vlbench's ``coco`` set), with the caption
normalisation its overlap checks use. Needs no weights (none can be installed offline).

Used by the choice tasks' blind baseline (vlbench/tasks/blind.py, which says what is left out of the training text
and why) and by the meaning-changing probes' blind ceiling of a run (vlbench/pipeline/sensitivity). It lives here,
below both, so that a run can score it; the code is the one the choice tasks have always used.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path

from ...errors import DataError
from ...util.io import sha256_file
from ...util.paths import default_data_dir
from ..builtin import find_caption_file
from ..specs import SPECS

SCORER = "coco-caption-bigram-kn"
_TOKEN = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")


def tokens(text: str) -> list[str]:
    return _TOKEN.findall(text.lower())


def normalized(text: str) -> str:
    """The text as the overlap check compares it: its words (:func:`tokens`) joined by single spaces."""
    return " ".join(tokens(text))


class BigramLM:
    """Interpolated Kneser-Ney bigram model (discount ``d``); the continuation distribution is add-one
    smoothed over the vocabulary plus one unknown word, so every text has a finite score."""

    def __init__(self, texts, d: float = 0.75):
        self.d = d
        self.big: Counter = Counter()
        for t in texts:
            w = ["<s>"] + tokens(t) + ["</s>"]
            self.big.update(zip(w, w[1:]))
        self.hist: Counter = Counter()  # c(v): bigrams starting with v
        self.follow: Counter = Counter()  # N1+(v .): distinct words after v
        self.cont: Counter = Counter()  # N1+(. w): distinct words before w
        for (v, w), c in self.big.items():
            self.hist[v] += c
            self.follow[v] += 1
            self.cont[w] += 1
        self.n_types = len(self.big)
        self.vocab = len(self.cont) + 1

    def p_cont(self, w: str) -> float:
        return (self.cont.get(w, 0) + 1) / (self.n_types + self.vocab)

    def prob(self, v: str, w: str) -> float:
        cv = self.hist.get(v, 0)
        if cv == 0:
            return self.p_cont(w)
        lam = self.d * self.follow[v] / cv
        return max(self.big.get((v, w), 0) - self.d, 0) / cv + lam * self.p_cont(w)

    def score(self, text: str) -> float:
        """Mean log probability per token (the end token included)."""
        w = ["<s>"] + tokens(text) + ["</s>"]
        return sum(math.log(self.prob(a, b)) for a, b in zip(w, w[1:])) / (len(w) - 1)

    def __call__(self, texts) -> list[float]:
        return [self.score(t) for t in texts]


def coco_image_id(name: str) -> int | None:
    m = re.search(r"(\d+)\.(?:jpg|jpeg|png)$", name)
    return int(m.group(1)) if m else None


def coco_caption_lm(data_dir, exclude_ids: set[int], exclude_texts=frozenset()) -> tuple[BigramLM, dict]:
    """The bigram model on the ``coco`` test captions, leaving out the images whose COCO id is in
    ``exclude_ids`` and every caption whose :func:`normalized` text is in ``exclude_texts``."""

    spec = next(s for s in SPECS if s.name == "coco")
    fname = spec.captions
    base = Path(data_dir).expanduser() if data_dir else default_data_dir()
    path = find_caption_file(fname, base)
    if path is None:
        raise DataError(f"the blind baseline's training captions ({fname}: the captions of vlbench's coco "
                        "retrieval set, the COCO Karpathy 5k test split; not a file of the task) are not in "
                        f"{base} nor in {base / 'captions'} (the data folder, --data-dir)",
                        f"put {fname} in {base}: run 'vlbench download coco --captions-only --data-dir {base}' "
                        "while online, or copy it there from a machine that has it (the task's own files stay "
                        "where they are)")

    digest = sha256_file(path)
    if digest != spec.sha256:
        raise DataError(f"{path} has sha256 {digest[:16]}..., expected {spec.sha256[:16]}...",
                        "the blind baseline trains on the pinned coco captions: run 'vlbench download coco "
                        "--captions-only'")
    texts, kept, dropped, total, by_content = [], 0, 0, 0, 0
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        total += len(row["captions"])
        if coco_image_id(row["image"]) in exclude_ids:
            dropped += 1
            continue
        own = [c for c in row["captions"] if normalized(c) not in exclude_texts]
        by_content += len(row["captions"]) - len(own)
        kept += bool(own)
        texts.extend(own)
    info = {"scorer": SCORER, "training_captions": len(texts), "training_images": kept,
            "excluded_images": dropped, "excluded_captions_by_content": by_content, "source_captions": total,
            "source": path.name, "source_sha256": digest,
            "score": "mean log probability per token under an interpolated Kneser-Ney bigram model (d=0.75)"}
    return BigramLM(texts), info
