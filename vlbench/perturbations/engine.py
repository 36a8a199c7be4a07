"""Apply perturbations to captions: instantiate, parse once, run, collect :class:`PerturbedSet`s."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from ..errors import UnknownNameError, VlbenchError
from ..registry import close_matches
from ..registry import perturbations as REGISTRY
from . import variants
from .base import CaptionRNG, PerturbedSet, Token, usable_text

_REQUIRED = ("name", "family", "version", "params", "needs_parse", "apply")


# name -> (target, family, version, one-line description); order = canonical order of "all"
BUILTINS: dict[str, tuple[str, str, str, str]] = {
    "char-swap": ("vlbench.perturbations.typos:CharSwap", "typos", "1.0",
                  "swap two adjacent letters of one word"),
    "missing-char": ("vlbench.perturbations.typos:MissingChar", "typos", "1.0",
                     "delete one letter of one word"),
    "extra-char": ("vlbench.perturbations.typos:ExtraChar", "typos", "1.0",
                   "insert one random letter into one word"),
    "nearby-char": ("vlbench.perturbations.typos:NearbyChar", "typos", "1.0",
                    "replace one letter by a QWERTY keyboard neighbour"),
    "synonym-noun": ("vlbench.perturbations.lexical:SynonymNoun", "lexical", "2.2",
                     "replace the first noun by its most common same-sense WordNet synonym"),
    "synonym-adjective": ("vlbench.perturbations.lexical:SynonymAdjective", "lexical", "2.2",
                          "replace the first adjective by its most common same-sense WordNet synonym"),
    "distraction-true": ("vlbench.perturbations.distraction:DistractionTrue", "distraction", "1.0",
                         "add 'and true is true' before the final punctuation"),
    "distraction-false": ("vlbench.perturbations.distraction:DistractionFalse", "distraction", "1.0",
                          "add 'and false is false' before the final punctuation"),
    "shuffle-nouns-adjectives": ("vlbench.perturbations.word_order:ShuffleNounsAdjectives", "word-order", "1.0",
                                 "shuffle nouns among noun slots and adjectives among adjective slots"),
    "shuffle-all-words": ("vlbench.perturbations.word_order:ShuffleAllWords", "word-order", "1.0",
                          "shuffle all words (punctuation stays in place)"),
    "shuffle-all-but-nouns-adjectives": ("vlbench.perturbations.word_order:ShuffleAllButNounsAdjectives",
                                         "word-order", "1.0",
                                         "shuffle every word except nouns and adjectives"),
    "shuffle-within-trigrams": ("vlbench.perturbations.word_order:ShuffleWithinTrigrams", "word-order", "1.0",
                                "shuffle the words inside each consecutive trigram"),
    "shuffle-trigrams": ("vlbench.perturbations.word_order:ShuffleTrigrams", "word-order", "1.0",
                         "shuffle the order of the consecutive trigrams"),
}

FAMILIES: dict[str, list[str]] = {}
for _name, (_target, _family, _version, _desc) in BUILTINS.items():
    FAMILIES.setdefault(_family, []).append(_name)
    if _name not in REGISTRY._entries:  # re-import safe (importlib.reload in tests)
        REGISTRY.register(_name, _target, description=_desc, family=_family, version=_version)
del _name, _target, _family, _version, _desc


def resolve(spec: str | list[str] | tuple[str, ...]) -> list[str]:
    """Perturbation names for ``spec``: "all" (the 13 built-ins), a family name, a perturbation name
    (built-in or plug-in), a comma-separated mix of these, or a Python list / tuple of such items; order
    kept, duplicates dropped.

    "all" and family names expand to the built-ins only, so that a spec means the same thing whatever
    plug-ins are installed; select plug-ins by name.
    """
    if isinstance(spec, (list, tuple)):
        bad = [s for s in spec if not isinstance(s, str)]
        if bad or not spec:
            raise VlbenchError(f"perturbation list {list(spec)!r} " + ("is empty" if not spec else
                               f"holds {bad[0]!r}, which is not a name"),
                               "pass names or families as strings, e.g. ['typos', 'shuffle-all-words']")
        spec = ",".join(spec)
    if not isinstance(spec, str) or not spec.strip():
        raise VlbenchError("empty perturbation spec", "use 'all', a family (" + ", ".join(FAMILIES) +
                           ") or comma-separated perturbation names")
    out: list[str] = []
    for item in (s.strip() for s in spec.split(",")):
        if not item:
            continue
        if item == "all":
            out.extend(BUILTINS)
        elif item in FAMILIES:
            out.extend(FAMILIES[item])
        elif item in REGISTRY:
            out.append(item)
        else:
            _refuse_probe(item)
            choices = ["all", *FAMILIES, *REGISTRY.names()]
            matches = close_matches(item, choices)
            hint = (f"did you mean {', '.join(repr(m) for m in matches)}?" if matches else
                    "use 'all', a family (" + ", ".join(FAMILIES) + ") or one of: " + ", ".join(REGISTRY.names()))
            raise UnknownNameError(f"unknown perturbation {item!r}", hint)
    if not out:
        raise VlbenchError(f"perturbation spec {spec!r} names nothing", "use e.g. 'all' or 'typos,shuffle-all-words'")
    return list(dict.fromkeys(out))


#: the names, families and kind of the meaning-changing probes (vlbench.perturbations.probes, which imports this
#: module: the names are repeated here, and a test keeps the two equal)
PROBE_NAMES = frozenset({"negation-absent", "negation-present", "half-truth-object", "half-truth-attribute",
                         "replace-object", "replace-attribute", "replace-relation", "swap-object", "swap-attribute",
                         "count", "antonym-attribute",
                         "negation", "half-truth", "replace", "swap", "antonym", "sensitivity"})


def _refuse_probe(item: str) -> None:
    """A meaning-changing probe's name (vlbench.perturbations.probes) is not a perturbation: say so."""
    if item in PROBE_NAMES:
        raise VlbenchError(f"{item!r} is a meaning-changing probe (kind sensitivity), not a meaning-preserving "
                           "perturbation",
                           f"in a run ask for it with --probes {item} (scored apart from the perturbations); see its "
                           f"probes with 'vlbench perturb --dataset NAME --perturb {item}'")


def instantiate(name: str, params: dict | None = None, variant: str | None = None):
    """The perturbation object registered under ``name``, built with ``params``.

    ``variant=NAME`` (or ``params={"variant": NAME}``) gives a registered variant's implementation of the
    perturbation (vlbench/perturbations/variants.py); ``None`` / ``"standard"`` the registered one.
    """
    params = dict(params or {})
    variant = params.pop("variant", variant)
    if not variants.is_standard(variant):
        record = variants.get(variant)
        if params:
            raise VlbenchError(f"perturbation {name!r}: the {variant} variant takes no parameters, got {params}",
                               "drop the other parameters; the variant fixes them")
        return record.make(name)
    entry = REGISTRY.entry(name)
    target = REGISTRY.get(name)
    is_factory = isinstance(target, type) or (callable(target) and not hasattr(target, "apply"))
    try:
        obj = target(**(params or {})) if is_factory else target
    except VlbenchError:
        raise
    except TypeError as exc:
        raise VlbenchError(f"perturbation {name!r} ({entry.source}) rejected its parameters {params or {}}: {exc}",
                           "check the parameter names in docs/perturbations.md or the plug-in's documentation") \
            from exc
    if obj is target and params:
        raise VlbenchError(f"perturbation {name!r} ({entry.source}) is a fixed object and takes no parameters",
                           "register a class or factory to accept parameters")
    missing = [a for a in _REQUIRED if not hasattr(obj, a)]
    if missing:
        raise VlbenchError(f"perturbation {name!r} ({entry.source}) lacks {', '.join(missing)}",
                           "a perturbation needs name, family, version, params, needs_parse and "
                           "apply(text, *, rng, tokens=None) (see docs/perturbations.md)")
    if obj.name != name:
        raise VlbenchError(f"perturbation registered as {name!r} calls itself {obj.name!r}",
                           "make the entry-point name and the object's name agree")
    return obj


def _parse_pipeline():
    """spaCy pipeline, the components to skip, and a Penn tag -> UPOS table.

    Only the Penn tags are used: the parser (about 40 % of the time) and anything else not needed are
    skipped. The attribute ruler (a third of the remaining time) only maps tags to coarse POS / morphology
    in the English models; when none of its patterns sets TAG it is skipped too and ``Token.pos`` comes
    from its plain tag -> POS table.
    """
    from ..lang import nlp, spacy_model_name  # lazy: vlbench --help imports this module; keep it light

    _import_spacy_without_torch(spacy_model_name())
    pipe = nlp()
    disable = [p for p in pipe.pipe_names if p in ("parser", "ner", "lemmatizer", "senter", "textcat")]
    pos_map: dict[str, str] = {}
    if "attribute_ruler" in pipe.pipe_names:
        patterns = pipe.get_pipe("attribute_ruler").patterns
        if not any("TAG" in p.get("attrs", {}) for p in patterns):
            for p in patterns:
                pats = p.get("patterns") or []
                if (len(pats) == 1 and len(pats[0]) == 1 and set(pats[0][0]) == {"TAG"}
                        and isinstance(pats[0][0]["TAG"], str) and "POS" in p.get("attrs", {})):
                    pos_map[pats[0][0]["TAG"]] = p["attrs"]["POS"]
            disable.append("attribute_ruler")
    return pipe, disable, pos_map


def _import_spacy_without_torch(model: str) -> None:
    """Import spaCy without PyTorch when torch is not loaded yet and the model is not a transformer one.

    thinc (spaCy's layer library) imports torch at import time whenever it is installed, which costs
    seconds (most of ``vlbench perturb --text``); the statistical English models tag with NumPy only. torch
    is hidden during the import alone, so a later ``import torch`` (a model, the MiniLM guard) works as usual.
    """
    if "spacy" in sys.modules or "torch" in sys.modules or model.endswith("_trf"):
        return
    sys.modules["torch"] = None  # type: ignore[assignment]  # makes "import torch" raise ImportError
    try:
        import spacy  # noqa: F401 -- imported for its side effect: loaded while torch is hidden
    finally:
        if sys.modules.get("torch", 0) is None:
            del sys.modules["torch"]


def parse(texts: Sequence[str], *, batch_size: int = 512, progress: bool = False) -> dict[str, tuple[Token, ...]]:
    """Tag each distinct text once with spaCy; returns text -> tokens."""
    unique = list(dict.fromkeys(t for t in texts if t))
    if not unique:
        return {}
    pipe, disable, pos_map = _parse_pipeline()
    docs = pipe.pipe(unique, batch_size=batch_size, disable=disable)
    if progress:
        docs = _progress(docs, total=len(unique), desc="tagging captions")
    out = {}
    for text, doc in zip(unique, docs):
        out[text] = tuple(Token(t.text, t.idx, t.tag_, pos_map.get(t.tag_) or t.pos_, t.whitespace_) for t in doc)
    return out


def _progress(it, total: int, desc: str):
    try:
        from tqdm import tqdm
    except ImportError:  # pragma: no cover
        return it
    return tqdm(it, total=total, desc=desc, file=sys.stderr, leave=False)


class _Bar:
    """One bar over every (perturbation, caption) output, moving as each caption is perturbed; its total is what
    the "perturbing N captions x M perturbations" line announces. No tqdm, or progress off: counts silently."""

    def __init__(self, total: int, desc: str, show: bool):
        self.n = 0
        self._bar = _progress(None, total=total, desc=desc) if show else None

    def stage(self, text: str) -> None:
        if self._bar is not None and hasattr(self._bar, "set_postfix_str"):
            self._bar.set_postfix_str(text)

    def update(self, n: int = 1) -> None:
        self.n += n
        if self._bar is not None and hasattr(self._bar, "update"):
            self._bar.update(n)

    def close(self) -> None:
        if self._bar is not None and hasattr(self._bar, "close"):
            self._bar.close()


def resources(kinds: Sequence[str], tokenizer: str | None = None) -> dict[str, str]:
    """Versions of the language resources a perturbation's output depends on (``tokenizer``: how a variant's
    own word tokenizer is described, for kind ``nltk``)."""
    out = {}
    if "spacy" in kinds:
        import spacy

        from ..lang import nlp  # lazy: vlbench --help imports this module; keep it light

        meta = nlp().meta
        out["spacy"] = f"{meta.get('lang', 'en')}_{meta.get('name', '?')} {meta.get('version', '?')} " \
                       f"(spaCy {spacy.__version__})"
    if "wordnet" in kinds:
        import nltk

        from ..lang import wordnet  # lazy: vlbench --help imports this module; keep it light

        out["wordnet"] = f"WordNet {wordnet().get_version()} (NLTK {nltk.__version__})"
    if "nltk" in kinds:  # a variant's word tokenizer (its record's ``tokenizer``)
        import nltk

        out["nltk"] = f"{tokenizer or 'nltk.word_tokenize'} (installed NLTK {nltk.__version__})"
    return out


def _check_inputs(captions: list, caption_ids: list, names: list, seed, params: dict) -> None:
    if len(captions) != len(caption_ids):
        raise VlbenchError(f"{len(captions)} captions but {len(caption_ids)} caption ids",
                           "pass one id per caption")
    if len(set(caption_ids)) != len(caption_ids):
        dup = next(c for i, c in enumerate(caption_ids) if c in caption_ids[:i])
        raise VlbenchError(f"caption id {dup!r} occurs more than once",
                           "caption ids seed the perturbations and must be unique")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise VlbenchError(f"seed {seed!r} is not an integer", "pass an integer seed")
    stray = [k for k in params if k not in names]
    if stray:
        raise VlbenchError(f"parameters given for {', '.join(stray)}, which {'is' if len(stray) == 1 else 'are'} "
                           f"not selected", f"select {', '.join(stray)} or drop those parameters")


def _apply_one(obj, captions: list, caption_ids: list, usable: list, parsed: dict, seed: int,
               bar: _Bar) -> tuple[list, list, int, int, dict]:
    """One perturbation over every caption: texts, applicability, empty inputs, rejected outputs and (guarded
    synonyms) why captions were left unchanged."""
    texts, applicable = [], []
    n_empty = n_rejected = 0
    guarded = None
    reasons: dict = {}
    if getattr(obj, "guarded", False):  # semantic guard: all captions' candidates in a few batches
        from .guard import guarded_outputs  # lazy: vlbench --help imports this module; keep it light

        bar.stage(f"{obj.name}: semantic guard (MiniLM)")
        guarded, reasons = guarded_outputs(obj, captions, caption_ids, usable, parsed, seed, CaptionRNG.for_caption)
    bar.stage(obj.name)
    for i, (text, cid, ok) in enumerate(zip(captions, caption_ids, usable)):
        bar.update()
        if not ok:
            texts.append(text if isinstance(text, str) else "")
            applicable.append(False)
            n_empty += 1
            continue
        rng = CaptionRNG.for_caption(seed, obj.name, cid)
        new = guarded[i] if guarded is not None else \
            obj.apply(text, rng=rng, tokens=parsed.get(text) if obj.needs_parse else None)
        if new is None or new == text:
            texts.append(text)
            applicable.append(False)
        elif not isinstance(new, str) or not new.strip():
            texts.append(text)
            applicable.append(False)
            n_rejected += 1
        else:
            texts.append(new)
            applicable.append(True)
    return texts, applicable, n_empty, n_rejected, reasons


def perturb_captions(captions: list[str], caption_ids: list[str], names: list[str] | str, *, seed: int = 0,
                     params: dict[str, dict] | None = None, progress: bool = False,
                     batch_size: int = 512) -> dict[str, PerturbedSet]:
    """Apply each named perturbation to every caption.

    ``names``: what ``vlbench perturb --perturb`` takes, as a list or a comma-separated string: perturbation
    names, family names ("typos") or "all".

    Deterministic given (seed, perturbation name, caption id): the result for a caption does not depend
    on the other captions, their order or the batch size. ``params`` maps a perturbation name to its
    parameters (defaults otherwise). Captions that need part-of-speech tags are tagged by spaCy once,
    whatever the number of perturbations. Returns name -> :class:`PerturbedSet` (texts in input order).
    """
    # names may be families or "all" as on the command line ("typos"), and a string or a list
    if isinstance(names, str) or any(n not in REGISTRY for n in names if isinstance(n, str)):
        names = resolve(names)
    captions = list(captions)
    caption_ids = [str(c) for c in caption_ids]
    params = dict(params or {})
    names = list(dict.fromkeys(names))
    _check_inputs(captions, caption_ids, names, seed, params)
    objs = [instantiate(n, params.get(n)) for n in names]

    usable = [usable_text(c) for c in captions]
    parsed: dict[str, tuple[Token, ...]] = {}
    if any(o.needs_parse for o in objs):
        parsed = parse([c for c, u in zip(captions, usable) if u], batch_size=batch_size, progress=progress)

    out: dict[str, PerturbedSet] = {}
    bar = _Bar(len(captions) * len(objs), f"perturbing {len(captions):,} captions x {len(objs)}", progress)
    for obj in objs:
        texts, applicable, n_empty, n_rejected, reasons = _apply_one(obj, captions, caption_ids, usable, parsed,
                                                                     seed, bar)
        entry = REGISTRY.entry(obj.name)
        ps = PerturbedSet(name=obj.name, family=obj.family, version=str(obj.version), params=dict(obj.params),
                          seed=seed, caption_ids=list(caption_ids), texts=texts, applicable=applicable,
                          source=entry.source, n_empty_input=n_empty, n_rejected=n_rejected,
                          not_applicable_reasons=reasons)
        kinds = getattr(obj, "resources", ())
        if kinds:
            ps.resources = resources(kinds, getattr(obj, "tokenizer", None))
        out[obj.name] = ps
    bar.close()
    return out
