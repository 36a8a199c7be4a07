"""Caption perturbations: thirteen built-ins in four families, plus plug-ins.

Importing this package is cheap (no spaCy, NLTK, nlpaug or torch): the built-ins are registered in
:data:`vlbench.registry.perturbations` with lazy targets, and the heavy work happens in
:func:`perturb_captions`.

* :func:`resolve` turns a spec ("all", a family name, or comma-separated names/families) into names;
* :func:`perturb_captions` applies them, deterministically per (seed, perturbation name, caption id);
* :data:`FAMILIES` maps each family to its built-in perturbations.

See docs/perturbations.md for every definition, parameter and version.

What lives here: :mod:`.engine` (the built-in table, :func:`resolve`, :func:`perturb_captions`), one module
per family (:mod:`.typos`, :mod:`.lexical`, :mod:`.distraction`, :mod:`.word_order`) on :mod:`.base`, the
perturbed-caption cache (:mod:`.cache`), validity and drift (:mod:`.validity`, :mod:`.drift`,
:mod:`.guard`, :mod:`.synonym_audit`) and :mod:`.cli`. To add a perturbation: a class with ``name``,
``family``, ``version``, ``params``, ``needs_parse`` and ``apply`` (docs/extending.md), registered in
``vlbench.registry.perturbations`` (a built-in: one row of ``engine.BUILTINS``). This file holds no
logic: it re-exports the public names.
"""

from __future__ import annotations

from .base import CaptionRNG, PerturbedSet, Token
from .engine import BUILTINS, FAMILIES, perturb_captions, resolve

# languages: which perturbations need English resources (vlbench/perturbations/support/languages.py)
from .support.languages import LANGUAGE_FREE, check_language, dataset_language, language_problems, languages

__all__ = ["FAMILIES", "BUILTINS", "resolve", "perturb_captions", "PerturbedSet",
           "CaptionRNG", "Token", "languages", "dataset_language", "check_language", "LANGUAGE_FREE",
           "language_problems"]
