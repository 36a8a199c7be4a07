"""Perturbation variants: other implementations of registered perturbations under the same names.

A variant (``--perturb-variant NAME``, or ``params={"variant": NAME}`` for one perturbation) replaces the
implementation of the perturbations it covers, e.g. to match another code base token for token, while the
condition names stay those of the standard perturbations so tables line up. A variant is a
:class:`PerturbationVariant` registered in ``vlbench.registry.perturbation_variants`` (a study registers its
own; docs/studies.md). Its record says what it needs beyond the standard perturbations, so the preflight
can check it before any work: NLTK data packages (``vlbench.langdata``) and Python modules.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeGuard

from ..errors import VlbenchError
from ..registry import perturbation_variants as REGISTRY

STANDARD = "standard"


@dataclass(frozen=True)
class PerturbationVariant:
    name: str
    #: perturbation name -> the perturbation object of this variant (takes no parameters)
    factory: Callable[[str], Any]
    #: the perturbations it implements
    names: tuple[str, ...]
    #: perturbation -> the NLTK data packages it reads (names of vlbench.langdata.PACKAGES)
    nltk_data: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    #: perturbation -> the Python module it imports, with the pip requirement that installs it
    modules: Mapping[str, tuple[str, str]] = field(default_factory=dict)
    #: the perturbations of this variant that work on captions in any language
    language_free: frozenset = frozenset()
    #: how the word tokenizer it uses is described in results (resource kind "nltk")
    tokenizer: str | None = None
    description: str = ""

    def make(self, name: str):
        if name not in self.names:
            raise VlbenchError(f"perturbation {name!r} has no {self.name} variant",
                               f"the variant exists for: {', '.join(self.names)}")
        return self.factory(name)


def is_standard(variant: str | None) -> bool:
    return variant in (None, STANDARD)


def is_named(variant: str | None) -> TypeGuard[str]:
    """A variant other than the standard implementations (None and "standard" are the standard ones)."""
    return not is_standard(variant)


def get(variant: str) -> PerturbationVariant:
    """The registered variant ``variant`` (an unknown one: an error naming the registered ones)."""
    if variant not in REGISTRY:
        raise VlbenchError(f"unknown perturbation variant {variant!r}",
                           f"use variant={STANDARD}" + "".join(f" or variant={n}" for n in REGISTRY.names()))
    return REGISTRY.get(variant)


def variant_of(name: str, params: dict | None, variant: str | None) -> str | None:
    """The variant perturbation ``name`` runs under: its own ``params[name]['variant']``, else ``variant``."""
    return ((params or {}).get(name) or {}).get("variant") or variant


def records_of(names, params: dict | None, variant: str | None):
    """(perturbation, variant name, its record) for each of ``names`` that runs under a registered variant."""
    for name in names:
        v = variant_of(name, params, variant)
        if is_named(v) and v in REGISTRY:
            yield name, v, REGISTRY.get(v)


def nltk_needs(names, params: dict | None = None, variant: str | None = None) -> dict[str, list[str]]:
    """NLTK data package (vlbench.langdata) -> the perturbations of ``names`` that read it, as the records of
    the variants they run under say (``nltk_data``)."""
    out: dict[str, list[str]] = {}
    for name, _, record in records_of(names, params, variant):
        for package in record.nltk_data.get(name, ()):
            out.setdefault(package, []).append(name)
    return out
