"""Semantic guard of the synonym perturbations: a candidate caption is accepted only if its
all-MiniLM-L6-v2 cosine similarity to the original caption is at least ``threshold``.

A perturbation with a ``choices(text, tokens, rng)`` method lists its candidate outputs per caption, best
first; :func:`guarded_outputs` returns, per caption, the first candidate the guard accepts (or ``None``:
not applicable). It works in rounds over all captions at once: round r encodes, in one batch, the r-th
candidate of every caption still undecided (each distinct string once, vectors kept in a
:class:`VectorCache`), so the cost is about one encoding per original plus one per tried candidate. At most
``max_tries`` candidates are tried per caption.

The encoder is the one of semantic drift (:mod:`vlbench.perturbations.drift`); when it is not installed
a :class:`~vlbench.errors.VlbenchError` says so with the install command (or how to turn the guard off).
The threshold is chosen from data: see docs/perturbations.md ("Semantic guard").
"""

from __future__ import annotations

import hashlib
import io
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from pathlib import Path

from .. import stores
from ..errors import VlbenchError
from ..util.io import cache_write_bytes
from .drift import INSTALL_HINT, encode, model_dir

DEFAULT_THRESHOLD = 0.80
DEFAULT_WORD_THRESHOLD = 0.60
MAX_TRIES = 4
ENCODER_NAME = "sentence-transformers/all-MiniLM-L6-v2"


class VectorCache:
    """str -> L2-normalized vector; ``encode_fn(list of str) -> array`` is called once per batch of new strings.

    With ``disk=True`` the vectors are also kept under ``<vlbench cache>/minilm-vectors/`` (one .npz shard
    per encoded batch, keyed by sha256 of the text), like any embedding, so a later process encodes nothing
    it has seen."""

    def __init__(self, encode_fn: Callable | None = None, disk: bool = False):
        self._encode = encode_fn
        self._vec: dict = {}
        self._disk, self._loaded = disk, set[str]()
        self._root: Path | None = None

    def configure(self, cache_dir=None, disk: bool = True) -> None:
        """Keep the vectors under ``<cache_dir>/minilm-vectors/`` (None: the default cache folder), or, with
        ``disk=False`` (``--no-cache``), neither read nor write them on disk. A run calls this with its own
        ``--cache-dir``/``--no-cache``, so everything a run caches lies in one folder."""
        self._root = Path(cache_dir).expanduser() if cache_dir else None
        self._disk = disk

    @contextmanager
    def configured(self, cache_dir=None, disk: bool = True):
        """:meth:`configure` for the duration of a ``with`` block (a run), then the settings from before."""
        before = (self._root, self._disk)
        self.configure(cache_dir, disk)
        try:
            yield self
        finally:
            self._root, self._disk = before

    def _dir(self):
        return stores.path("minilm-vectors", self._root)

    def result_file(self, key: str):
        """Where a result computed from this cache's vectors (a drift summary) is remembered: None without disk."""
        return stores.path("validity-drift", self._root) / f"{key[:32]}.json" if self._disk else None

    def _load_disk(self, keys: dict) -> None:
        import numpy as np

        root = self._dir()
        if str(root) not in self._loaded and root.is_dir():
            self._loaded.add(str(root))
            self._disk_vec = getattr(self, "_disk_vec", {})
            for shard in sorted(root.glob("*.npz")):
                try:
                    with np.load(shard, allow_pickle=False) as z:
                        self._disk_vec.update(zip(z["keys"].tolist(), z["vectors"]))
                except (OSError, ValueError, KeyError):
                    continue  # a damaged shard is ignored (its texts are encoded again)
        disk = getattr(self, "_disk_vec", {})
        for t, k in keys.items():
            if k in disk:
                self._vec[t] = disk[k]

    def _save_disk(self, texts, emb) -> None:
        import numpy as np

        keys = np.array([hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in texts])
        buf = io.BytesIO()
        np.savez(buf, keys=keys, vectors=np.asarray(emb, dtype=np.float32))
        root = self._dir()
        cache_write_bytes(root / f"{hashlib.sha256(keys.tobytes()).hexdigest()[:32]}.npz", buf.getvalue())

    def encode_fn(self):
        if self._encode is None:
            self._encode = encode
        return self._encode

    def ensure(self, texts: Sequence[str]) -> None:
        # sorted: the batches (and so the last bits of each vector) do not depend on the callers' order
        new = sorted({t for t in texts if t not in self._vec})
        if new and self._disk:
            self._load_disk({t: hashlib.sha256(t.encode("utf-8", "surrogatepass")).hexdigest() for t in new})
            new = [t for t in new if t not in self._vec]
        if not new:
            return
        emb = self.encode_fn()(new)
        for t, v in zip(new, emb):
            self._vec[t] = v
        if self._disk:
            try:
                self._save_disk(new, emb)
            except OSError:  # a read-only cache only costs time later
                pass

    def cosine(self, a: str, b: str) -> float:
        """Cosine rounded to 4 decimals: batch composition changes float32 results in the 7th digit, and
        a decision must not hang on that."""
        import numpy as np

        return round(float(np.dot(self._vec[a], self._vec[b])), 4)

    def __len__(self) -> int:
        return len(self._vec)


_SHARED = VectorCache(disk=True)


def shared_cache() -> VectorCache:
    """The process-wide MiniLM vector cache (guard and validity share it)."""
    return _SHARED


def check_available() -> None:
    """Raise VlbenchError if the guard's encoder cannot be loaded (names the fix)."""
    try:
        model_dir()
    except VlbenchError as exc:
        raise VlbenchError(f"the synonym perturbations' semantic guard cannot run: {exc.message}",
                           f"{INSTALL_HINT}; or turn the guard off: --param synonym-noun.guard=off "
                           f"--param synonym-adjective.guard=off (the numbers then differ)") from None


def select(originals: Sequence[str], choices: Sequence[Sequence], threshold: float, *,
           cache: VectorCache | None = None, max_tries: int = MAX_TRIES,
           word_threshold: float | None = None) -> list[str | None]:
    """Per caption, the first of its choices with cosine >= threshold to the original, else None.

    A choice is a string, or (string, [(word, replacement), ...]); with ``word_threshold`` the word and its
    replacement (lower case, each encoded alone) must also have cosine >= word_threshold."""
    cache = shared_cache() if cache is None else cache
    out: list[str | None] = [None] * len(originals)
    choices = [[c if isinstance(c, tuple) else (c, []) for c in cs] for cs in choices]
    if word_threshold is not None:  # word pairs first: a small vocabulary, cheap to encode
        pairs = {(w.lower(), r.lower()) for cs in choices for _, ws in cs for w, r in ws}
        cache.ensure([x for p in pairs for x in p])
        choices = [[(o, ws) for o, ws in cs if all(cache.cosine(w.lower(), r.lower()) >= word_threshold
                                                   for w, r in ws)] for cs in choices]
    todo = [i for i, c in enumerate(choices) if c]
    if todo:
        cache.ensure([originals[i] for i in todo])
    for r in range(max_tries):
        todo = [i for i in todo if r < len(choices[i])]
        if not todo:
            break
        cache.ensure([choices[i][r][0] for i in todo])
        left = []
        for i in todo:
            if cache.cosine(originals[i], choices[i][r][0]) >= threshold:
                out[i] = choices[i][r][0]
            else:
                left.append(i)
        todo = left
    return out


def guarded_outputs(obj, captions, caption_ids, usable, parsed, seed,
                    rng_for) -> tuple[dict[int, str | None], dict[str, int]]:
    """(index -> output (or None) for every usable caption of a guarded perturbation ``obj``, how many captions
    were left unchanged for each reason)."""
    check_available()
    idx = [i for i, ok in enumerate(usable) if ok]
    choices = [obj.choices(captions[i], parsed.get(captions[i]), rng_for(seed, obj.name, caption_ids[i]),
                           with_words=True) for i in idx]
    picked = select([captions[i] for i in idx], choices, float(obj.params["threshold"]),
                    word_threshold=obj.params.get("word_threshold"))
    out = dict(zip(idx, picked))
    # why a caption is left unchanged: the rules found no candidate, or the guard refused every one it tried
    out_reasons = {"no_candidate": sum(1 for c in choices if not c),
                   "refused_by_guard": sum(1 for c, p in zip(choices, picked) if c and p is None)}
    return out, out_reasons
