"""Every folder vlbench keeps on disk, under one cache root: the one owner of that root.

The root is ``--cache-dir`` when a run gives one, else ``$VLBENCH_CACHE_DIR``, else
``$XDG_CACHE_HOME/vlbench`` (``~/.cache/vlbench``). Each store is one sub-folder of it, declared in
:data:`STORES`; a module that keeps files asks :func:`path` for its folder and never builds one itself,
so ``vlbench cache ls`` (:func:`usage`) and ``vlbench cache clear`` (:func:`clear`) know every store.

Caches hold what vlbench can compute again (``cache clear`` empties them); downloads hold inputs
fetched from the network (datasets, language data), listed but kept unless asked for.

Code that runs inside a model loader (the file digests of a local checkpoint) has no ``--cache-dir`` to
hand: :func:`using` makes a root the current one for the duration of a ``with`` block, and :func:`root`
returns it when no folder is given.
"""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path

from .errors import VlbenchError
from .util.paths import cache_root


@dataclass(frozen=True)
class Store:
    name: str  # what users and modules call it
    folder: str  # its sub-folder of the root
    owner: str  # the module that reads and writes it
    what: str  # one line for `vlbench cache ls`
    kind: str = "cache"  # "cache": recomputable, cleared by `cache clear`; "download": kept unless asked
    legacy: tuple = ()  # files an older vlbench kept directly under the root for this store


STORES: dict[str, Store] = {s.name: s for s in (
    Store("embeddings", "embeddings", "vlbench.encoding.cache", "image and text vectors, per model hash"),
    Store("pixels", "pixels", "vlbench.encoding.pixels", "preprocessed image pixels, per preprocessing spec"),
    Store("token-vectors", "token-vectors", "vlbench.encoding.multivector", "multi-vector models' token vectors, "
          "per model hash"),
    Store("perturbations", "perturbations", "vlbench.perturbations.cache", "perturbed captions of a dataset"),
    Store("model-identity", "models", "vlbench.models.lazy", "model identity and hash per model fingerprint"),
    Store("text-keys", "text-keys", "vlbench.models.lazy", "the model's key of every caption, per text list"),
    Store("file-digests", "file-digests", "vlbench.models.adapter", "content digests of local checkpoint files",
          legacy=("file-digests.json",)),
    Store("minilm-vectors", "minilm-vectors", "vlbench.perturbations.guard", "MiniLM vectors (guard, validity)"),
    Store("validity-drift", "validity-drift", "vlbench.perturbations.guard", "semantic-drift summaries"),
    Store("run-timings", "run-timings", "vlbench.sweep.history", "stage times of finished runs (sweep cost "
          "estimates)"),
    Store("digits", "mnist", "vlbench.shortcuts", "MNIST digit bank of the shortcut probes"),
    Store("datasets", "data", "vlbench.datasets.builtin", "downloaded datasets (default --data-dir)",
          kind="download"),
    Store("language-data", "nltk_data", "vlbench.lang", "WordNet and other NLTK data", kind="download"),
    Store("coco-images", "coco", "vlbench.tasks.sources", "COCO val2017 images of --task sugarcrepe",
          kind="download"),
)}


def declare(store: Store) -> Store:
    """Add a store a module above this one declares (a choice set's, in its ChoiceTask ``stores``; the sets are
    loaded by ``vlbench cache`` before it lists or clears); declaring the same store again is a no-op, another
    store under a taken name or folder is an error."""
    have = STORES.get(store.name)
    if have == store:
        return have
    taken = [s.name for s in STORES.values() if s.name == store.name or s.folder == store.folder]
    if taken:
        raise VlbenchError(f"the store {store.name!r} ({store.folder}/) clashes with the store {taken[0]!r}",
                           "give the new store its own name and folder")
    STORES[store.name] = store
    return store

_current: ContextVar[Path | None] = ContextVar("vlbench_cache_root", default=None)
_disk: ContextVar[bool] = ContextVar("vlbench_cache_disk", default=True)


def root(cache_dir: str | os.PathLike | None = None) -> Path:
    """The cache root: ``cache_dir`` if given, else the one made current by :func:`using`, else the default."""
    if cache_dir:
        return Path(cache_dir).expanduser()
    return _current.get() or cache_root()


def path(name: str, cache_dir: str | os.PathLike | None = None) -> Path:
    """The folder of store ``name`` under :func:`root` (not created: writers create it when they write)."""
    return root(cache_dir) / _store(name).folder


@contextmanager
def using(cache_dir: str | os.PathLike | None, *, disk: bool = True):
    """Make ``cache_dir`` the current root inside the block (None: leave the current one as it is).
    ``disk=False`` (a --no-cache run): code inside the block keeps nothing on disk (:func:`on_disk`)."""
    token = _current.set(Path(cache_dir).expanduser()) if cache_dir else None
    disk_token = _disk.set(False) if not disk else None
    try:
        yield root()
    finally:
        if disk_token is not None:
            _disk.reset(disk_token)
        if token is not None:
            _current.reset(token)


def on_disk() -> bool:
    """False inside ``using(..., disk=False)``: memos (a checkpoint's file digests) are neither read nor written."""
    return _disk.get()


def checked_root(cache_dir: str | os.PathLike | None = None) -> Path:
    """:func:`root` for ``vlbench cache``: a path that exists and is not a folder is an error."""
    r = root(cache_dir)
    if r.exists() and not r.is_dir():
        raise VlbenchError(f"--cache-dir {str(r)!r} is not a folder", "give the cache folder (or leave --cache-dir "
                           "out for the default); `vlbench cache ls` shows what it holds")
    return r


def usage(cache_dir: str | os.PathLike | None = None) -> list[dict]:
    """One row per declared store: name, folder, kind, what, files and bytes on disk now."""
    r = checked_root(cache_dir)
    rows = []
    for s in STORES.values():
        files = _files(r, s)
        rows.append({"name": s.name, "folder": s.folder, "kind": s.kind, "what": s.what, "files": len(files),
                     "bytes": sum(p.stat().st_size for p in files)})
    return rows


def clear(cache_dir: str | os.PathLike | None = None, *, downloads: bool = False) -> dict[str, int]:
    """Empty every cache store (and, with ``downloads``, the downloads too); returns files removed per store.
    Only declared folders are touched: anything else a user keeps under the root stays."""
    r = checked_root(cache_dir)
    removed = {}
    for s in STORES.values():
        if s.kind != "cache" and not downloads:
            continue
        removed[s.name] = len(_files(r, s))
        folder = r / s.folder
        if folder.is_dir():
            shutil.rmtree(folder)
        for name in s.legacy:
            (r / name).unlink(missing_ok=True)
    return removed


def _store(name: str) -> Store:
    try:
        return STORES[name]
    except KeyError:
        raise VlbenchError(f"no on-disk store is called {name!r}",
                           f"declare it in vlbench/stores.py STORES, or in a choice set's ChoiceTask stores "
                           f"(known: {', '.join(STORES)})") from None


def _files(r: Path, s: Store) -> list[Path]:
    folder = r / s.folder
    found = [p for p in folder.rglob("*") if p.is_file()] if folder.is_dir() else []
    return found + [r / n for n in s.legacy if (r / n).is_file()]
