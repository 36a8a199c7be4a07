"""Make meaning-changing probes of captions grouped by image (see the package text for each probe).

:func:`make_probes` parses every caption once (the spaCy tagging the meaning-preserving perturbations use,
:func:`vlbench.perturbations.engine.parse`), builds the object vocabulary and each image's mentioned words
(:mod:`.words`), then asks each probe for each caption. A probe draws from a :class:`CaptionRNG` private to
(seed, probe name, caption id), so a caption's probe does not depend on the other images or the order.
"""

from __future__ import annotations

from collections.abc import Sequence

from ...errors import VlbenchError
from ..base import CaptionRNG, usable_text
from .absence import HalfTruthAttribute, HalfTruthObject, NegationAbsent, NegationPresent
from .changes import AntonymAttribute, ReplaceAttribute, ReplaceObject, ReplaceRelation
from .probe import ProbeSet, _Probe
from .swaps import Count, SwapAttribute, SwapObject
from .words import COCO_OBJECTS, ImageWords, object_vocabulary

#: probes whose "absent" needs the other captions of the image (refused on one caption per image)
NEEDS_ABSENCE = frozenset({"negation-absent", "half-truth-object", "half-truth-attribute", "replace-object",
                           "replace-attribute", "replace-relation", "count", "antonym-attribute"})

PROBES: dict[str, type[_Probe]] = {p.name: p for p in (
    NegationAbsent, NegationPresent, HalfTruthObject, HalfTruthAttribute, ReplaceObject, ReplaceAttribute,
    ReplaceRelation, SwapObject, SwapAttribute, Count, AntonymAttribute)}


def _group(images: Sequence[str]) -> dict[str, list[int]]:
    by: dict[str, list[int]] = {}
    for i, img in enumerate(images):
        by.setdefault(str(img), []).append(i)
    return by


def check_absence_possible(names: Sequence[str], images: Sequence[str], unverified: bool) -> None:
    """Refuse an absence-based probe when an image has one caption only (unless ``unverified``)."""
    asked = [n for n in names if n in NEEDS_ABSENCE]
    if not asked or unverified:
        return
    by = _group(images)
    single = [img for img, idx in by.items() if len(idx) < 2]
    if single:
        raise VlbenchError(
            f"{', '.join(asked)}: {len(single)} of {len(by)} images have one caption only (e.g. {single[0]!r}), so "
            f"'absent from every caption of the image' cannot be checked",
            "use a caption set with several captions per image, or pass unverified=True to make the probes "
            "labelled unverified (absence checked against the one caption); negation-present needs no other "
            "captions")


def _check_input(names, captions, caption_ids, images) -> list:
    """The probe names asked (a list or a comma-separated string), after checking them and the inputs' lengths
    and ids."""
    if isinstance(names, str):
        names = [n.strip() for n in names.split(",") if n.strip()]
    unknown = [n for n in names if n not in PROBES]
    if unknown:
        raise VlbenchError(f"unknown probe {unknown[0]!r}", f"use one of {', '.join(PROBES)}")
    if not len(captions) == len(caption_ids) == len(images):
        raise VlbenchError(f"{len(captions)} captions, {len(caption_ids)} ids and {len(images)} images",
                           "pass one id and one image name per caption")
    if len({str(c) for c in caption_ids}) != len(caption_ids):
        raise VlbenchError("caption ids are not unique", "caption ids seed the probes and must be unique")
    return list(names)


def make_probes(captions: Sequence[str], caption_ids: Sequence[str], images: Sequence[str],
                names: Sequence[str] | str = tuple(PROBES), *, seed: int = 0, params: dict | None = None,
                vocabulary: Sequence[str] | None = None, vocabulary_size: int = 300, unverified: bool = False,
                parsed: dict | None = None, batch_size: int = 512) -> dict[str, ProbeSet]:
    """Each named probe of each caption; ``images[i]`` names caption i's image (its other captions decide
    what is absent). ``vocabulary``: the objects that may be denied or added (default: the caption set's own,
    :func:`.words.object_vocabulary`). ``unverified``: allow images with one caption (their probes are
    labelled ``verified=False``) instead of refusing. Returns name -> :class:`ProbeSet`."""
    from ..engine import parse  # lazy: spaCy

    names = _check_input(names, captions, caption_ids, images)
    captions, caption_ids, images = list(captions), [str(c) for c in caption_ids], [str(i) for i in images]
    check_absence_possible(names, images, unverified)
    params = dict(params or {})
    objs = [PROBES[n](**params.get(n, {})) for n in names]
    usable = [usable_text(c) for c in captions]
    if parsed is None:
        parsed = parse([c for c, u in zip(captions, usable) if u], batch_size=batch_size)
    by = _group(images)
    texts_by_image = {img: [captions[i] for i in idx if usable[i]] for img, idx in by.items()}
    vocab = tuple(vocabulary) if vocabulary is not None else \
        object_vocabulary(texts_by_image.values(), parsed, vocabulary_size)
    words = {img: ImageWords(t, parsed) for img, t in texts_by_image.items()}
    image_words = [words[img] for img in images]  # each caption's image, looked up once
    several = [w.n_captions >= 2 for w in image_words]  # where "absent" was checked against other captions
    context = {"texts_by_image": list(texts_by_image.values()), "parsed": parsed, "vocabulary": vocab,
               "given_vocabulary": vocabulary is not None}
    out: dict[str, ProbeSet] = {}
    for obj in objs:
        obj.prepare(context)
        texts: list[str] = []
        applicable: list[bool] = []
        meta: list[dict | None] = []
        for text, cid, image, ok in zip(captions, caption_ids, image_words, usable):
            made = None
            if ok:
                rng = CaptionRNG.for_caption(seed, obj.name, cid)
                made = obj.make(text, parsed.get(text, ()), image, vocab, rng)
            if made is None or made[0] == text:
                texts.append(text if isinstance(text, str) else "")
                applicable.append(False)
                meta.append(None)
            else:
                texts.append(made[0])
                applicable.append(True)
                meta.append(made[1])
        verified = [True] * len(captions) if obj.name not in NEEDS_ABSENCE else list(several)
        out[obj.name] = ProbeSet(name=obj.name, family=obj.family, version=obj.version, params=dict(obj.params),
                                 kind=obj.kind,
                                 seed=seed, caption_ids=list(caption_ids), texts=texts, applicable=applicable,
                                 n_empty_input=sum(1 for u in usable if not u), meta=meta, verified=verified,
                                 resources={"vocabulary": f"{len(vocab)} objects" if vocabulary is None
                                            else f"{len(vocab)} given objects"})
    return out


def probe_text(text: str, names: Sequence[str] | str = tuple(PROBES), *, seed: int = 0,
               params: dict | None = None) -> dict[str, ProbeSet]:
    """Probes of one caption alone (``vlbench perturb --text``): the vocabulary is :data:`.words.COCO_OBJECTS`
    and absence is checked against this caption only, so every absence-based probe is ``verified=False``."""
    return make_probes([text], ["text#0"], ["text"], names, seed=seed, params=params, vocabulary=COCO_OBJECTS,
                       unverified=True)
