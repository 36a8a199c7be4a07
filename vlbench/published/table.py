"""The shipped table of published zero-shot retrieval numbers (package data in ``vlbench/published/data``).

Two sources, read into one list of :class:`PublishedRow`:

* ``openclip_retrieval_results.csv``: open_clip's measured table (121 pretrained models, Flickr30k 1k and
  MS-COCO 5k Karpathy test, both directions, R@1/5/10 as fractions), copied unchanged from
  ``mlfoundations/open_clip`` (``docs/openclip_retrieval_results.csv``, MIT; ``data/SOURCES.md``). Each row
  maps to ``openclip:ARCH/TAG``, and the OpenAI and SigLIP checkpoints also to the transformers spec of the
  same weights (:data:`SAME_WEIGHTS`).
* ``papers.json``: the numbers the papers (or model cards) of the built-in HF families report, each with its
  citation, table, protocol facts and the public pages that confirm it; families whose paper reports none,
  or whose numbers could not be confirmed, are listed under ``not_shipped`` with the reason.

Every row carries the protocol facts it was measured under (:data:`FACTS`), which ``check`` compares with a
run's. Values are in percent (the CSV's fractions x 100).
"""

from __future__ import annotations

import csv
import functools
import json
from dataclasses import dataclass, field
from importlib import resources

from ..models.families import BUILTIN
from ..models.pairs.blip import DEFAULTS as PAIR_DEFAULTS
from ..models.pairs.blip_options import resolve, split_query

#: the protocol facts known to move published retrieval numbers, in the order they are reported
FACTS = ("weights", "recall", "split", "gallery", "truncation", "preprocessing", "precision", "lowercase",
         "image_set")

#: what each fact means, one line each (printed under a check that is off)
FACT_LABELS = {
    "weights": "the weights (the released checkpoint from the Hub or its library, vs a local folder or file)",
    "recall": "recall convention (hit: any positive in the top k; fraction: share of the positives)",
    "split": "test split (Flickr30k 1k, COCO 5k, or COCO 1k = mean of five 1k folds)",
    "gallery": "gallery (the test images only, or enlarged with distractors / extra positives)",
    "truncation": "caption truncation (the model's token limit; vlbench --truncate-chars cuts characters first)",
    "preprocessing": "image decode and preprocessing path (open_clip transform vs transformers image processor)",
    "precision": "numeric precision (fp32 vs fp16 / AMP autocast)",
    "lowercase": "lower-casing of captions before tokenizing",
    "image_set": "the image files (original JPEGs vs a downscaled or re-encoded copy)",
}

#: open_clip ARCH/TAG -> transformers specs of the same weights
SAME_WEIGHTS = {
    "ViT-B-32/openai": ("clip:openai/clip-vit-base-patch32", "st:clip-ViT-B-32"),
    "ViT-B-16/openai": ("clip:openai/clip-vit-base-patch16",),
    "ViT-L-14/openai": ("clip:openai/clip-vit-large-patch14",),
    "ViT-L-14-336/openai": ("clip:openai/clip-vit-large-patch14-336",),
    "ViT-B-16-SigLIP/webli": ("siglip:google/siglip-base-patch16-224",),
}

_OPENCLIP_PROTOCOL = {
    "recall": "hit", "split": None, "gallery": "test images only",
    "truncation": "77 tokens (open_clip tokenizer)", "preprocessing": "open_clip transform",
    "precision": "amp", "lowercase": "tokenizer's own", "prompt": "none",
    "image_set": "original JPEGs",
}
_OPENCLIP_SOURCE = {
    "kind": "measured table", "citation": "open_clip (Ilharco et al., 2021), docs/openclip_retrieval_results.csv, "
                                          "measured with CLIP_benchmark (Cherti, Beaumont et al.)",
    "table": "the row of this model", "url": "https://github.com/mlfoundations/open_clip/blob/"
                                                      "29b90b8dde9125c479c0ddbab477310f665a0435/docs/"
                                                      "openclip_retrieval_results.csv",
}
_CSV_DATASETS = {"Flickr": "flickr30k", "MSCOCO": "coco"}
_CSV_DIRECTIONS = {"image retr.": "t2i", "text retr.": "i2t"}
_SPLITS = {"flickr30k": "flickr30k 1k test (Karpathy)", "coco": "coco 5k test (Karpathy)"}


@dataclass(frozen=True)
class PublishedRow:
    """One model's published numbers on one dataset: ``values[(direction, k)]`` in percent."""

    id: str
    model: str  # as the source names it
    specs: tuple  # vlbench model specs of the same weights (empty: none released / none known)
    dataset: str  # "flickr30k" or "coco" (the built-in dataset names)
    values: dict
    source: dict  # kind, citation, table, url, confirmed_by
    protocol: dict = field(default_factory=dict)
    note: str = ""
    #: a two-stage row's second stage: {"model": pair scorer spec, "k": K, "first_stage": what ranked the gallery};
    #: empty for a single-stage row (the specs' own similarity ranks everything)
    rerank: dict = field(default_factory=dict)

    def citation(self) -> str:
        return f"{self.source['citation']}, {self.source['table']}"


def _data(name: str) -> str:
    return resources.files("vlbench.published").joinpath("data").joinpath(name).read_text(encoding="utf-8")


def _csv_rows() -> list[PublishedRow]:
    rows = []
    for rec in csv.DictReader(_data("openclip_retrieval_results.csv").splitlines()):
        name = f"{rec['name']}/{rec['pretrained']}"
        for prefix, dataset in _CSV_DATASETS.items():
            values = {}
            for label, direction in _CSV_DIRECTIONS.items():
                for k in (1, 5, 10):
                    cell = rec.get(f"{prefix} {label} R@{k}", "")
                    if cell.strip():
                        values[(direction, k)] = round(100.0 * float(cell), 6)
            if values:
                rows.append(PublishedRow(
                    f"openclip:{name}:{dataset}", name, (f"openclip:{name}",) + SAME_WEIGHTS.get(name, ()),
                    dataset, values, dict(_OPENCLIP_SOURCE),
                    {**_OPENCLIP_PROTOCOL, "split": _SPLITS[dataset]},
                    "open_clip's own implementation and tokenizer" if name in SAME_WEIGHTS else ""))
    return rows


def _paper_rows(doc: dict) -> list[PublishedRow]:
    rows = []
    for r in doc["rows"]:
        values = {(d, int(k)): float(v) for d, by_k in r["values"].items() for k, v in by_k.items()}
        rows.append(PublishedRow(r["id"], r["model"], tuple(r["specs"]), r["dataset"], values, r["source"],
                                 {"gallery": "test images only", **r["protocol"]}, r.get("note", ""),
                                 dict(r.get("rerank") or {})))
    return rows


@functools.cache
def papers_document() -> dict:
    """papers.json as shipped (its ``rows`` and ``not_shipped`` lists)."""
    return json.loads(_data("papers.json"))


@functools.cache
def published_rows() -> tuple[PublishedRow, ...]:
    """Every shipped row: open_clip's table first, then the papers' rows."""
    return tuple(_csv_rows() + _paper_rows(papers_document()))


def not_shipped() -> list[dict]:
    """``[{family, reason}]``: built-in families whose papers' numbers are not shipped, and why."""
    return list(papers_document()["not_shipped"])


def normalize_spec(spec: str) -> str:
    """``family:checkpoint`` with the family's default checkpoint filled in and any ``@revision`` or
    ``?options`` dropped (``clip`` -> ``clip:openai/clip-vit-base-patch32``)."""
    family, _, ck = spec.split("?", 1)[0].partition(":")
    ck = ck.split("@", 1)[0].strip()
    if not ck and family in BUILTIN:
        ck = BUILTIN[family].default_checkpoint or ""
    if not ck and family in PAIR_DEFAULTS:  # a pair scorer (--rerank blip-itm): its default checkpoint
        ck = PAIR_DEFAULTS[family][1]
    return f"{family}:{ck}"


def same_stages(row: PublishedRow, rerank: str | None, rerank_k: int | None) -> bool:
    """True when a run's stages are the row's: no rerank for a single-stage row; for a two-stage row the same pair
    scorer (its spec, default checkpoint filled in) re-scoring the same K (the first stage is the row's specs)."""
    if not row.rerank:
        return not rerank
    if not rerank or rerank_k is None:
        return False
    model = str(row.rerank["model"])
    return normalize_spec(rerank) == normalize_spec(model) and int(rerank_k) == int(row.rerank["k"]) \
        and pair_options(rerank) == pair_options(model)


def spec_key(spec: str) -> str:
    """What a published entry's spec must share with a run's: :func:`normalize_spec`, and for a built-in pair
    scorer (``blip-itm``, ``blip2-itm``) its resolved score options too (a dual encoder's ``?options`` are
    dropped, as before)."""
    name = str(spec).split("?", 1)[0].partition(":")[0].strip()
    base = normalize_spec(spec)
    if name not in PAIR_DEFAULTS:
        return base
    return base + "?" + json.dumps(pair_options(spec), sort_keys=True)


def pair_options(spec: str) -> dict:
    """A pair scorer spec's options as they decide its scores: BLIP's and BLIP-2's resolved (a ``protocol=``
    preset equals its options; the default score is ``match-prob``), a plug-in's as written. So a row measured
    with ``score=itm-logit+itc`` never matches a run scored by p(match), nor the reverse."""
    name = str(spec).split("?", 1)[0].partition(":")[0].strip()
    opts = split_query(spec)[1]
    return resolve(name, opts) if name in PAIR_DEFAULTS else opts


def rows_for(spec: str, dataset: str, rerank: str | None = None, rerank_k: int | None = None,
             *, any_stages: bool = False) -> list[PublishedRow]:
    """The shipped rows of model ``spec`` on built-in dataset ``dataset`` (``coco-1k`` reads COCO's 5k rows:
    the check then names the split as a difference) measured with the run's stages: a run reranked by pair scorer
    ``rerank`` over its top ``rerank_k`` matches only the two-stage rows of that scorer and K, a run without
    ``rerank`` only the single-stage rows (``any_stages``: every row of the model and dataset)."""
    want = normalize_spec(spec)
    base = "coco" if dataset == "coco-1k" else dataset
    return [r for r in published_rows() if r.dataset == base and want in {normalize_spec(s) for s in r.specs}
            and (any_stages or same_stages(r, rerank, rerank_k))]


def stages_text(rerank: str | None, rerank_k: int | None) -> str:
    """How a run or row ranked, in words: "one stage" or "reranked by SPEC over the top K"."""
    return f"reranked by {normalize_spec(rerank)} over the top {rerank_k}" if rerank else "one stage"


@dataclass(frozen=True)
class FactCheck:
    """One protocol fact of a published entry beside the run's: ``status`` is "same", "differs" or "unknown"
    (the retrieval rows' check and the task entries' check report facts alike)."""

    fact: str
    published: str
    run: str
    status: str
