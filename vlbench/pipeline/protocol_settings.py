"""Evaluation protocols of a run: ``standard`` (vlbench's) and ``hendriksen2024`` (the chapter authors' code).

A protocol is a named bundle of settings; every setting is also a run option of its own:

================  ======================  ==========================================================
setting           standard                hendriksen2024
================  ======================  ==========================================================
gallery           test (--gallery)        folder: every image in the image folder is a t2i candidate
i2t_recall        hit                     fraction: hits / min(#relevant, k) (metrics.compute.evaluate)
relevance         self                    a fixed relevance model for DCG gains (RELEVANCE_MODEL)
perturb_side      both                    t2i: perturbed captions are t2i queries only; i2t ranks clean ones
truncate_chars    none                    330 characters before encoding
perturb_variant   standard                hendriksen2024: the authors-compatible perturbations (compat.py)
dcg               DCG_CM@p and nDCG       the same; the chapter reports the unnormalized DCG_CM@p column
================  ======================  ==========================================================

:func:`resolve` fills the settings a protocol implies where the option was left out (None; an option given
explicitly wins, even when it equals the standard value: ``--gallery test``, ``--relevance self``) and names
the result: a run whose settings equal a named protocol carries that name, otherwise ``<base>+<changed,...>``;
a folder gallery smaller than the protocol's (``--allow-partial-gallery``) adds ``[gallery=N]``. The resolved
protocol is recorded in results.json (``settings.protocol``, with the NLTK version and data provenance when
the authors-compatible synonyms or trigram shuffles ran) and shown in every table.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from ..errors import OptionError, VlbenchError
from ..metrics.compute import I2T_RECALLS

#: sentence-transformers ``clip-ViT-B-32`` wraps these weights (openai/clip-vit-base-patch32)
RELEVANCE_MODEL = "clip:openai/clip-vit-base-patch32"
#: the authors' relevance encoder itself (models/st.py), for ``--relevance``: the same weights through
#: sentence-transformers' own encode (an explicit --relevance wins; the label records it)
AUTHORS_RELEVANCE_MODEL = "st:clip-ViT-B-32"

PROTOCOLS = {
    "standard": {"gallery": "test", "i2t_recall": "hit", "relevance": "self", "perturb_side": "both",
                 "truncate_chars": None, "perturb_variant": "standard"},
    "hendriksen2024": {"gallery": "folder", "i2t_recall": "fraction", "relevance": RELEVANCE_MODEL,
                       "perturb_side": "t2i", "truncate_chars": 330, "perturb_variant": "hendriksen2024"},
}
SETTINGS = tuple(PROTOCOLS["standard"])
PERTURB_SIDES = ("both", "t2i")
PERTURB_VARIANTS = ("standard", "hendriksen2024")
#: the folder gallery the chapter's numbers were measured with, per built-in image folder (datasets' ``images``)
FOLDER_GALLERY_SIZE = {"flickr30k": 31783, "coco": 40504}
FOLDER_GALLERY_NAME = {"flickr30k": "flickr30k-images", "coco": "MS-COCO val2014"}


def resolve(cfg):
    """A copy of ``cfg`` with the protocol's settings filled in where the option was left unset (None); an
    option given explicitly wins (``--protocol hendriksen2024 --gallery test`` keeps the test gallery, and the
    label records the deviation: ``hendriksen2024+gallery=test``)."""
    if cfg.protocol not in PROTOCOLS:
        raise VlbenchError(f"unknown protocol {cfg.protocol!r}", f"use --protocol {' or '.join(PROTOCOLS)}")
    base = PROTOCOLS[cfg.protocol]
    changes = {name: base[name] for name in SETTINGS if getattr(cfg, name) is None}
    if cfg.truncate_chars == 0:  # --truncate-chars 0: no truncation, whatever the protocol
        changes["truncate_chars"] = None
    out = dataclasses.replace(cfg, **changes)
    if out.perturb_variant != "standard" and out.perturb:
        from .. import perturbations as P

        params = {n: dict(v) for n, v in (out.perturb_params or {}).items()}
        for name in P.resolve(out.perturb):
            params.setdefault(name, {}).setdefault("variant", out.perturb_variant)
        out = dataclasses.replace(out, perturb_params=params)
    return out


def settings_of(cfg) -> dict:
    return {name: getattr(cfg, name) for name in SETTINGS}


def label(cfg, ds=None) -> str:
    """The protocol's name, or ``<base>+<changed settings>`` when options moved away from it; a folder gallery
    smaller than the protocol's (``--allow-partial-gallery``) adds its size: ``hendriksen2024[gallery=5000]``."""
    mine = settings_of(cfg)
    partial = partial_gallery(cfg, ds)
    tail = f"[gallery={partial[0]}]" if partial else ""
    for name, values in PROTOCOLS.items():
        if mine == values:
            return name + tail
    base = PROTOCOLS[cfg.protocol]
    return cfg.protocol + "+" + ",".join(f"{k}={mine[k]}" for k in SETTINGS if mine[k] != base[k]) + tail


def describe(cfg, ds=None) -> dict:
    """What results.json records under ``settings.protocol`` (``ds``: the run's dataset, gallery applied)."""
    out = {"name": label(cfg, ds), "base": cfg.protocol, **settings_of(cfg),
           "dcg": "DCG_CM@p unnormalized (dcg_cm) and normalized (ndcg_cm) are both reported"}
    partial = partial_gallery(cfg, ds)
    if partial:
        out["gallery_size"], out["gallery_expected"] = partial
    if ds is not None and cfg.perturb_variant == "hendriksen2024" and cfg.perturb:
        from .. import langdata
        from .. import perturbations as P

        from .. import stores

        needs = langdata.needed_by(P.resolve(cfg.perturb), cfg.perturb_params, cfg.perturb_variant)
        if needs:  # the compatible synonyms / trigram shuffles depend on NLTK and its data: where they came from
            with stores.using(cfg.cache_dir):
                out["language_data"] = langdata.provenance(tuple(needs))
    return out


def expected_gallery(cfg) -> int | None:
    """The folder gallery size the protocol assumes for ``cfg.dataset`` (built-in datasets only), or None."""
    from ..datasets.builtin import BUILTIN

    spec = BUILTIN.get(cfg.dataset) if isinstance(cfg.dataset, str) else None
    return FOLDER_GALLERY_SIZE.get(spec.images) if spec is not None else None


def partial_gallery(cfg, ds) -> tuple[int, int] | None:
    """(size, expected) when ``ds``'s folder gallery is smaller than the protocol's, else None."""
    expected = expected_gallery(cfg) if cfg.gallery == "folder" and ds is not None else None
    if expected is None:
        return None
    n = len(ds.gallery_images)
    return (n, expected) if n < expected else None


def gallery_problem(cfg, ds) -> tuple[str, str] | None:
    """(what, fix) when the folder gallery is smaller than the protocol's and --allow-partial-gallery was not
    given; None otherwise. Counts the image files of the test images' folder (no image is read)."""
    expected = expected_gallery(cfg) if cfg.gallery == "folder" and ds is not None else None
    if expected is None or cfg.allow_partial_gallery:
        return None
    try:
        folder, names = _gallery_names(ds)
    except VlbenchError:
        return None  # the image check reports the folder itself
    if len(names) >= expected:
        return None
    from ..datasets.builtin import BUILTIN

    what = FOLDER_GALLERY_NAME.get(getattr(BUILTIN.get(cfg.dataset), "images", None), "image")
    return (f"--gallery folder: {folder} holds {len(names):,} images, the protocol's t2i gallery is the whole "
            f"{what} folder ({expected:,} images); a comparison with the published t2i numbers would be invalid",
            f"put all {expected:,} images of {what} into {folder} (the test images stay where they are), or pass "
            f"--allow-partial-gallery to run on {len(names):,} (the protocol label then says [gallery={len(names)}]), "
            f"or --gallery test")


def check(cfg) -> None:
    """Option checks for validate()."""
    for name, choices in (("i2t_recall", I2T_RECALLS), ("perturb_side", PERTURB_SIDES),
                          ("perturb_variant", PERTURB_VARIANTS)):
        value = getattr(cfg, name)
        if value is not None and value not in choices:
            raise OptionError(name, f"unknown {{opt}} {value!r}", f"use one of: {', '.join(choices)}")
    if cfg.truncate_chars is not None and cfg.truncate_chars < 0:
        raise OptionError("truncate_chars", f"{{opt}} must be >= 0, got {cfg.truncate_chars}",
                          "0: no truncation", example=330)
    if cfg.relevance not in (None, "self"):
        from ..registry import models
        from ..models.adapter import parse_model_spec

        name = parse_model_spec(cfg.relevance)[0]
        if name not in models:
            raise OptionError("relevance", f"{{opt}} {cfg.relevance!r}: no model family {name!r}",
                              f"use self or a model spec (the authors' encoder: {AUTHORS_RELEVANCE_MODEL})",
                              example=RELEVANCE_MODEL)


def dataset_gallery(cfg) -> str:
    """The gallery to ask the dataset loader for (the folder gallery is applied afterwards)."""
    return "test" if cfg.gallery in ("folder", None) else cfg.gallery


def apply_gallery(ds, cfg):
    """With ``--gallery folder``: every other image of the test images' folder becomes a t2i distractor."""
    if cfg.gallery != "folder":
        return ds
    problem = gallery_problem(cfg, ds)
    if problem:
        raise VlbenchError(*problem)
    folder, names = _gallery_names(ds)
    sub = folder.relative_to(ds.image_root).as_posix()
    prefix = "" if sub in ("", ".") else sub + "/"
    return dataclasses.replace(ds, distractors=[prefix + n for n in names[ds.n_images:]],
                               distractor_root=ds.image_root, gallery="folder")


def _gallery_names(ds) -> tuple[Path, list[str]]:
    """The test images' folder and every image file name in it (test images first, then the rest by name)."""
    from ..metrics.protocols import folder_gallery

    if ds.image_root is None:
        raise VlbenchError(f"--gallery folder: dataset {ds.name!r} has no image folder", "pass --data-dir")
    parents = {str(Path(p).parent) for p in ds.images}
    if len(parents) != 1:
        raise VlbenchError(f"--gallery folder: the images of {ds.name} lie in {len(parents)} folders "
                           f"(e.g. {sorted(parents)[:2]})", "put the test images into one image folder")
    folder = ds.image_root / parents.pop()
    return folder, folder_gallery(folder, [Path(p).name for p in ds.images])


def truncate(cfg, texts: list[str]) -> list[str]:
    return list(texts) if not cfg.truncate_chars else [t[:cfg.truncate_chars] for t in texts]


def encode_relevance(cfg, ds, paths: list, *, stats=None, texts: list[str] | None = None):
    """(image, caption) embeddings of the fixed relevance model, or None for ``relevance=self``.

    ``texts``: every caption as evaluated (runner.Plan.texts(): clean, then each condition's own captions;
    default: the clean captions). The relevance model scores the query as evaluated (the perturbed caption
    of a perturbed query, chapter Eq. 5.1, as the authors' code does), each distinct (truncated) text once.
    """
    if cfg.relevance in (None, "self"):
        return None
    from ..encoding.session import EncodingSession

    session = EncodingSession.open(cfg.relevance, cache_dir=cfg.cache_dir, no_cache=cfg.no_cache,
                                   restart=cfg.restart, device=cfg.device, precision=cfg.precision,
                                   trust_remote_code=cfg.trust_remote_code, stats=stats)
    texts = truncate(cfg, ds.captions if texts is None else texts)
    img = session.images(paths, batch_size=cfg.batch_size, num_workers=cfg.num_workers, progress=not cfg.quiet)
    txt = session.texts(texts, batch_size=cfg.text_batch_size or max(cfg.batch_size, 256), progress=not cfg.quiet)
    return (np.stack([img[i] for i in range(len(paths))]), np.stack([txt[i] for i in range(len(texts))]))


def adjust_evaluations(cfg, plan, enc, evals: dict) -> dict:
    """The i2t side under ``--perturb-side t2i``: perturbed conditions get new evaluations with the clean i2t
    side (perturbed captions are t2i queries only). The fraction recall (``--i2t-recall fraction``) is an
    input of the scoring pass itself (metrics.compute.evaluate(i2t_recall=...)); nothing is edited in place."""
    if cfg.perturb_side != "t2i":
        return evals
    return {cond: [dataclasses.replace(ev, i2t=clean.i2t) for ev, clean in zip(evs, evals["clean"])]
            if cond in plan.perturbed else evs for cond, evs in evals.items()}
