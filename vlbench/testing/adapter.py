"""``check_adapter``: a model adapter against what the encoding step relies on (vlbench/encoding/encode.py).

The encoding step calls ``preprocess`` on decoded RGB images (in DataLoader workers), ``collate`` on a list of
those, slices a batch (``batch[a:b]``) when it runs out of memory, sorts texts by ``text_lengths`` and batches
them, encodes each distinct ``text_keys`` key once, and L2-normalizes whatever ``encode_*`` return (a tensor or an
array of shape (n, d), finite, no all-zero row). ``identity()`` is hashed into every cache key and written into
results: plain JSON, the same on every call. So a vector must not depend on its batch mates or their order.
"""

from __future__ import annotations

import pickle
import sys

import numpy as np

from ..models.adapter import ModelAdapter, load_model
from .common import Checker, Report, json_problem, short

#: captions that exercise what the encoder meets: plain text, an empty caption (datasets keep them), non-ASCII
#: text, and captions longer than any text tower that share their first words (truncation and text_keys)
TEXTS = ("a man riding a horse on a beach", "two dogs play in the snow.", "", "Ein Mädchen läuft über die Straße",
         "a " + "very " * 120 + "long caption about a red car", "a " + "very " * 120 + "long caption about a blue bus")


def _images():
    from PIL import Image

    rng = np.random.default_rng(0)
    sizes = ((48, 40), (40, 48), (64, 64), (20, 36))  # landscape, portrait, square, smaller than most inputs
    return [Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8), "RGB") for w, h in sizes]


def _array(out) -> np.ndarray:
    """The encoder's view of an output (encode.py ``_normalize``): tensors to float32 numpy."""
    if hasattr(out, "detach"):
        out = out.detach().float().cpu().numpy()
    return np.asarray(out, dtype=np.float32)


def _unit(x: np.ndarray) -> np.ndarray:
    x = x.astype(np.float64)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def _vectors(c: Checker, out, n: int, what: str) -> np.ndarray:
    x = _array(out)
    c.expect(x.ndim == 2 and len(x) == n, f"{what} of shape ({n}, embed_dim)", f"shape {x.shape}")
    c.expect(x.shape[1] > 0, "embed_dim >= 1", f"shape {x.shape}")
    c.expect(bool(np.isfinite(x).all()), f"finite {what}", "NaN or infinite values")
    norms = np.linalg.norm(x.astype(np.float64), axis=1)
    c.expect(bool((norms > 0).all()), f"no all-zero {what} vector (it has no direction)",
             f"zero rows {np.flatnonzero(norms == 0).tolist()}")
    return x


def _close(c: Checker, a: np.ndarray, b: np.ndarray, atol: float, expected: str) -> None:
    diff = float(np.abs(_unit(a) - _unit(b)).max()) if a.size else 0.0
    c.expect(a.shape == b.shape and diff <= atol, f"{expected} (normalized vectors within {atol:g})",
             f"shapes {a.shape} / {b.shape}, largest difference {diff:.3g}")


def _check_identity(c: Checker, model) -> int | None:
    with c.check("identity"):
        ident = model.identity()
        c.expect(isinstance(ident, dict), "identity() returns a dict", type(ident).__name__)
        problem = json_problem(ident)
        c.expect(problem is None, "identity() is plain JSON (it is written into results)", problem)
        c.expect(model.identity() == ident, "identity() gives the same dict on every call", "a different dict")
        h = model.model_hash()
        c.expect(h == model.model_hash() and len(h) == 64, "a stable 64-hex model hash", h)
        dim = ident.get("embed_dim")
        c.expect(dim is None or (isinstance(dim, int) and dim > 0), "embed_dim, when given, a positive int", dim)
        return dim


def _check_images(c: Checker, model, atol: float) -> np.ndarray:
    images = _images()
    with c.check("preprocess and collate"):
        items = [model.preprocess(im) for im in images]
        batch = model.collate(items)
    with c.check("encode_images"):
        vecs = _vectors(c, model.encode_images(batch), len(images), "image embeddings")
    with c.check("image determinism"):
        _close(c, _vectors(c, model.encode_images(model.collate(items)), len(images), "image embeddings"), vecs,
               atol, "the same images give the same vectors")
    with c.check("image batch independence"):
        one = np.concatenate([_vectors(c, model.encode_images(model.collate([it])), 1, "image embeddings")
                              for it in items])
        _close(c, one, vecs, atol, "encoding images one by one gives the vectors of one batch")
        rev = _vectors(c, model.encode_images(model.collate(items[::-1])), len(items), "image embeddings")
        _close(c, rev[::-1], vecs, atol, "a batch in reverse order gives the same vectors")
    with c.check("batch slicing"):  # the encoder halves a batch on out-of-memory errors: batch[a:b]
        part = _vectors(c, model.encode_images(model.collate(items)[1:3]), 2, "image embeddings")
        _close(c, part, vecs[1:3], atol, "collate(items)[1:3] encodes to the vectors of items 1 and 2")
    _check_picklable(c, model)
    return vecs


def _check_picklable(c: Checker, model) -> None:
    """DataLoader workers that are spawned (macOS, Windows, Python 3.14's forkserver) receive preprocess and
    collate by pickling, which finds the adapter's class by its module."""
    if type(model).__module__ not in sys.modules:  # defined in an exec'd namespace (a doc page, a notebook cell)
        c.skip("preprocess picklable", f"its class's module {type(model).__module__!r} is not importable")
        return
    with c.check("preprocess picklable"):
        pickle.loads(pickle.dumps(model.preprocess))
        pickle.loads(pickle.dumps(model.collate))


def _check_text_helpers(c: Checker, model, texts: list[str]) -> list[str]:
    with c.check("text_keys and text_lengths"):
        keys = model.text_keys(list(texts))
        c.expect(isinstance(keys, list) and len(keys) == len(texts) and all(isinstance(k, str) for k in keys),
                 f"text_keys gives {len(texts)} strings", short(keys))
        c.expect(model.text_keys(list(texts)) == keys, "the same keys on every call", "different keys")
        lengths = np.asarray(model.text_lengths(list(texts)))
        c.expect(lengths.shape == (len(texts),) and lengths.dtype.kind in "iuf",
                 f"text_lengths gives {len(texts)} numbers", short(lengths.tolist()))
    return keys


def _check_texts(c: Checker, model, texts: list[str], atol: float) -> np.ndarray:
    keys = _check_text_helpers(c, model, texts)
    with c.check("encode_texts"):
        vecs = _vectors(c, model.encode_texts(list(texts)), len(texts), "text embeddings")
    with c.check("text determinism"):
        _close(c, _vectors(c, model.encode_texts(list(texts)), len(texts), "text embeddings"), vecs, atol,
               "the same texts give the same vectors")
    with c.check("text batch independence"):
        one = np.concatenate([_vectors(c, model.encode_texts([t]), 1, "text embeddings") for t in texts])
        _close(c, one, vecs, atol, "encoding texts one by one gives the vectors of one batch")
        rev = _vectors(c, model.encode_texts(list(texts)[::-1]), len(texts), "text embeddings")
        _close(c, rev[::-1], vecs, atol, "a batch in reverse order gives the same vectors")
    with c.check("text keys name the vector"):  # texts with one key are encoded once and share its vector
        for i in range(len(texts)):
            for j in range(i):
                if keys[i] == keys[j]:
                    _close(c, vecs[i:i + 1], vecs[j:j + 1], atol, f"texts {j} and {i}, which share a key, "
                                                                  "have one vector")
    return vecs


def _check_empty(c: Checker, model) -> None:
    """The encoder never asks for zero texts; an adapter may return no rows or refuse with an exception."""
    try:
        out = model.encode_texts([])
    except Exception as exc:  # refused: fine, the encoder never asks for it
        c.report.skipped["empty text list"] = f"refused with {type(exc).__name__} (the encoder never asks for it)"
        return
    with c.check("empty text list"):
        x = _array(out)
        c.expect(x.size == 0 and len(x) == 0, "no rows for no texts (or an exception)", f"shape {x.shape}")


def check_adapter(adapter, *, texts=None, atol: float = 1e-4, device: str = "cpu") -> Report:
    """Check a model adapter: a :class:`~vlbench.ModelAdapter` object or a model spec (``"NAME[:CHECKPOINT]"``,
    loaded with ``load_model`` on ``device``). ``texts``: captions to use instead of the built-in sample.
    Returns the :class:`Report` of the checks passed; raises :class:`ConformanceError` at the first failure."""
    c = Checker("model adapter", adapter if isinstance(adapter, str) else
                getattr(adapter, "spec", None) or type(adapter).__name__)
    with c.check("protocol"):
        model = load_model(adapter, device=device) if isinstance(adapter, str) else adapter
        missing = [m for m in ("identity", "preprocess", "collate", "encode_images", "encode_texts", "text_keys",
                               "text_lengths", "model_hash") if not callable(getattr(model, m, None))]
        c.expect(isinstance(model, ModelAdapter) or not missing, "a ModelAdapter (subclass vlbench.ModelAdapter)",
                 f"{type(model).__name__} without {', '.join(missing)}")
    dim = _check_identity(c, model)
    img = _check_images(c, model, atol)
    txt = _check_texts(c, model, list(texts or TEXTS), atol)
    with c.check("one embedding space"):
        c.expect(img.shape[1] == txt.shape[1], "image and text vectors of one size",
                 f"image {img.shape[1]}, text {txt.shape[1]}")
        c.expect(dim is None or dim == img.shape[1], f"identity()'s embed_dim {dim} = the vectors' size",
                 f"vectors of size {img.shape[1]}")
    _check_empty(c, model)
    return c.report
