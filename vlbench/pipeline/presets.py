"""Evaluation protocols as data: a :class:`Protocol` is a named preset of run-option values.

Every setting of a protocol is also a run option of its own; the parts a setting names are registered
parts of the kernel (a gallery provider: ``--gallery``, a recall convention: ``--i2t-recall``, a relevance
source: ``--relevance``, a perturbation variant: ``--perturb-variant``). vlbench's own protocol is
``standard``; a study adds another by registering a ``Protocol`` in ``vlbench.registry.protocols`` (from its
``vlbench.studies`` entry point; docs/studies.md shows one).

:func:`resolve` fills the settings a protocol implies where the option was left out (None; an option given
explicitly wins, even when it equals the standard value) and :func:`label` names the result: a run whose
settings equal a registered protocol carries that name, otherwise ``<base>+<changed,...>``; a folder gallery
smaller than the dataset's image folder should be (``--allow-partial-gallery``) adds ``[gallery=N]``. The
resolved protocol is recorded in results.json (``settings.protocol``) and shown in every table.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .. import langdata, perturbations, registry, stores
from ..errors import OptionError, VlbenchError
from ..metrics.compute import I2T_RECALLS
from ..models.adapter import parse_model_spec
from ..perturbations import variants
from . import galleries

#: the settings a protocol fixes, in the order labels name them
SETTINGS = ("gallery", "i2t_recall", "relevance", "perturb_side", "truncate_chars", "perturb_variant")
PERTURB_SIDES = ("both", "t2i")
#: what results.json says about DCG under every protocol
DCG_NOTE = ("nDCG@p with relevance gains clipped at 0 (ndcg, in [0, 1]) and the original DCG_CM@p unnormalized "
            "(dcg_cm) and normalized (ndcg_cm) are all reported")


@dataclass(frozen=True)
class Protocol:
    """A named preset: ``settings`` gives a value to every name of :data:`SETTINGS`."""
    name: str
    settings: dict
    description: str = ""
    #: the model a protocol's fixed relevance (``settings["relevance"]``) stands for, for messages
    relevance_alternative: str | None = None
    reference: str = ""  # where the protocol is defined (a paper, a repository)
    #: metrics kept out of the default printed table (``Metric.printed`` False) that this protocol prints too
    printed_metrics: tuple = ()

    def __post_init__(self):
        missing = [s for s in SETTINGS if s not in self.settings]
        if missing:
            raise VlbenchError(f"protocol {self.name!r} gives no value for {', '.join(missing)}",
                               f"a Protocol's settings name every one of: {', '.join(SETTINGS)}")


STANDARD = Protocol("standard", {"gallery": "test", "i2t_recall": "hit", "relevance": "self", "perturb_side": "both",
                                 "truncate_chars": None, "perturb_variant": variants.STANDARD},
                    description="vlbench's protocol: the test gallery, hit recall, the evaluated model's own "
                                "similarity as DCG relevance, perturbed captions on both sides, no caption cut")
registry.protocols.register("standard", STANDARD, description=STANDARD.description)


def _check_known(protocol: str) -> None:
    if protocol not in registry.protocols:
        raise OptionError("protocol", f"unknown {{opt}} {protocol!r}", f"use one of: {', '.join(names())}")


def get(name: str) -> Protocol:
    return registry.protocols.get(name)


def names() -> list[str]:
    return registry.protocols.names()


#: the choices of --perturb-variant: standard, then the registered variants (read when used)
PERTURB_VARIANTS = registry.Names(registry.perturbation_variants, first=(variants.STANDARD,))


def resolve(cfg):
    """A copy of ``cfg`` with the protocol's settings filled in where the option was left unset (None); an
    option given explicitly wins (the label then records the deviation: ``<protocol>+gallery=test``)."""
    _check_known(cfg.protocol)
    base = get(cfg.protocol).settings
    changes = {name: base[name] for name in SETTINGS if getattr(cfg, name) is None}
    if cfg.truncate_chars == 0:  # --truncate-chars 0: no truncation, whatever the protocol
        changes["truncate_chars"] = None
    out = dataclasses.replace(cfg, **changes)
    if not variants.is_standard(out.perturb_variant) and out.perturb:
        params = {n: dict(v) for n, v in (out.perturb_params or {}).items()}
        for name in perturbations.resolve(out.perturb):
            params.setdefault(name, {}).setdefault("variant", out.perturb_variant)
        out = dataclasses.replace(out, perturb_params=params)
    return out


def settings_of(cfg) -> dict:
    return {name: getattr(cfg, name) for name in SETTINGS}


def label(cfg, ds=None) -> str:
    """The protocol's name, or ``<base>+<changed settings>`` when options moved away from it; a folder gallery
    smaller than the dataset's image folder (``--allow-partial-gallery``) adds its size: ``...[gallery=5000]``."""
    mine = settings_of(cfg)
    partial = galleries.partial_gallery(cfg, ds)
    tail = f"[gallery={partial[0]}]" if partial else ""
    for entry in registry.protocols.entries():
        if mine == entry.load().settings:
            return entry.name + tail
    base = get(cfg.protocol).settings
    return cfg.protocol + "+" + ",".join(f"{k}={mine[k]}" for k in SETTINGS if mine[k] != base[k]) + tail


def describe(cfg, ds=None) -> dict:
    """What results.json records under ``settings.protocol`` (``ds``: the run's dataset, gallery applied)."""
    out = {"name": label(cfg, ds), "base": cfg.protocol, **settings_of(cfg), "dcg": DCG_NOTE}
    partial = galleries.partial_gallery(cfg, ds)
    if partial:
        out["gallery_size"], out["gallery_expected"] = partial
    if ds is not None and not variants.is_standard(cfg.perturb_variant) and cfg.perturb:
        needs = variants.nltk_needs(perturbations.resolve(cfg.perturb), cfg.perturb_params, cfg.perturb_variant)
        if needs:  # a variant that depends on NLTK data: where the data came from
            with stores.using(cfg.cache_dir):
                out["language_data"] = langdata.provenance(tuple(needs))
    return out


def check(cfg) -> None:
    """Option checks for validate()."""
    for name, choices in (("i2t_recall", I2T_RECALLS), ("perturb_side", PERTURB_SIDES),
                          ("perturb_variant", PERTURB_VARIANTS), ("gallery", galleries.GALLERIES)):
        value = getattr(cfg, name)
        if value is not None and value not in choices:
            raise OptionError(name, f"unknown {{opt}} {value!r}", f"use one of: {', '.join(choices)}")
    _check_known(cfg.protocol)
    if cfg.truncate_chars is not None and cfg.truncate_chars < 0:
        raise OptionError("truncate_chars", f"{{opt}} must be >= 0, got {cfg.truncate_chars}",
                          "0: no truncation", example=330)
    if cfg.relevance not in (None, "self"):
        name = parse_model_spec(cfg.relevance)[0]
        if name not in registry.models:
            fixed = [p for p in map(registry.Entry.load, registry.protocols.entries())
                     if p.settings["relevance"] != "self"]
            also = [f"{p.name}'s: {p.relevance_alternative or p.settings['relevance']}" for p in fixed]
            raise OptionError("relevance", f"{{opt}} {cfg.relevance!r}: no model family {name!r}",
                              "use self or a model spec" + (f" (the protocols' encoders: {'; '.join(also)})"
                                                            if also else ""),
                              example=fixed[0].settings["relevance"] if fixed else "clip:openai/clip-vit-base-patch32")


def fixed_relevance_role(spec: str, protocol: str) -> str:
    """How a message names the relevance model ``spec``: the protocol's own, or the one --relevance gave."""
    if protocol in registry.protocols and protocol != "standard" and spec == get(protocol).settings["relevance"]:
        return f"the {protocol} protocol's fixed relevance model for DCG"
    return "the relevance model given by --relevance (DCG gains)"
