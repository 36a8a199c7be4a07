"""Multilingual caption sets for the Flickr30k 1k test images (Multi30K), and tokenizer coverage checks.

Datasets (registered with the other built-ins by vlbench.benchmark.datasets):

* ``flickr30k-de``: 5 German descriptions per image, written independently of the English ones
  (Multi30K task 2, Elliott et al. 2016);
* ``flickr30k-multi30k-{en,de,fr,cs}``: one caption per image; ``en`` is the English caption that was
  translated into German (Elliott et al. 2016), French (Elliott et al. 2017) and Czech (Barrault et al.
  2018), so the four sets ask the same queries in four languages.

All come from github.com/multi30k/dataset at a pinned commit and share the images of ``flickr30k``.
:func:`tokenizer_coverage` says what a model's tokenizer does with a language: unknown tokens, folded
diacritics, tokens per word and truncation.
"""

from __future__ import annotations

import gzip
import html
import json
import unicodedata

MULTI30K_COMMIT = "a3d2e0d26b56f3846f66a952536ffed4e401d05a"
MULTI30K_RAW = f"https://raw.githubusercontent.com/multi30k/dataset/{MULTI30K_COMMIT}/data"

_LANG_NAMES = {"en": "English", "de": "German", "fr": "French", "cs": "Czech"}

MULTILINGUAL = {
    "flickr30k-de": dict(
        captions="multi30k/flickr30k_de_test.jsonl",
        sha256="3fb810bcce8cd292cef631741da62b08b1322dbb561428fbcf7de2e5525273b7",
        images="flickr30k", language="de",
        recipe=dict(images="task2/image_splits/test_2016_images.txt",
                    captions=[f"task2/raw/test_2016.{j}.de.gz" for j in range(1, 6)]),
        description="Flickr30k 1k test with 5 independent German descriptions per image (Multi30K task 2)"),
}
_SHA = {"en": "8473738b6f82e37fb7d1bae6e3a19c68f16a5b2c050280d442cb6713ded16e31",
        "de": "21f818960f450752b6f9f2464e4e23625ec2a6dc71f5a76ac6ddbce612d345b2",
        "fr": "88cabd6b2714502448b5df3332a08c9c117030b7004bd9d046efd2695d92dd5b",
        "cs": "f6682b9b34bcbc1fe8044e8df993cbd7df85f4240bb106649a1acd8f0efb3a56"}
for _lang, _sha in _SHA.items():
    MULTILINGUAL[f"flickr30k-multi30k-{_lang}"] = dict(
        captions=f"multi30k/flickr30k_multi30k_{_lang}_test.jsonl", sha256=_sha, images="flickr30k", language=_lang,
        recipe=dict(images="task1/image_splits/test_2016_flickr.txt",
                    captions=[f"task1/raw/test_2016_flickr.{_lang}.gz"]),
        description=(f"Flickr30k 1k test, 1 caption per image: "
                     + ("the English caption Multi30K translated" if _lang == "en"
                        else f"its {_LANG_NAMES[_lang]} translation") + " (Multi30K task 1)"))


def build_captions(name: str, get) -> bytes:
    """The normalized JSONL of ``name`` from the raw Multi30K files; ``get(url) -> bytes`` downloads.

    Same conversion as the pack in the project's shared data: line i of caption file j is caption j of
    image i; surrounding whitespace stripped; ``html.unescape`` (the raw files escape & and <)."""
    recipe = MULTILINGUAL[name]["recipe"]
    names = [x.strip() for x in get(f"{MULTI30K_RAW}/{recipe['images']}").decode("utf-8").splitlines() if x.strip()]
    cols = []
    for path in recipe["captions"]:
        lines = gzip.decompress(get(f"{MULTI30K_RAW}/{path}")).decode("utf-8").splitlines()
        cols.append([html.unescape(x.strip()) for x in lines])
    from ..errors import DataError

    if any(len(c) != len(names) for c in cols):
        raise DataError(f"the Multi30K files of {name!r} do not have one caption per image "
                        f"({len(names)} images, {[len(c) for c in cols]} lines)", "report it to vlbench")
    rows = ({"image": n, "captions": [c[i] for c in cols]} for i, n in enumerate(names))
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


# ----------------------------------------------------------------------------------------------
# tokenizer coverage

def _fold(text: str) -> str:
    """Lower-cased, diacritics removed (NFD, combining marks dropped)."""
    return "".join(ch for ch in unicodedata.normalize("NFD", text.lower()) if not unicodedata.combining(ch))


def _unk_id(tokenizer):
    """The unknown-token id, or None when there is none to count (CLIP's unk token is its end token:
    a byte-level BPE never needs it)."""
    unk = getattr(tokenizer, "unk_token_id", None)
    if not isinstance(unk, int):
        return None
    specials = {getattr(tokenizer, f"{k}_token_id", None) for k in ("eos", "bos", "pad", "cls", "sep")}
    return None if unk in specials else unk


def _ids(adapter, texts: list[str]) -> list[list[int]]:
    """Token ids as the model sees them (truncated), from the adapter's de-duplication keys."""
    return [[int(x) for x in key.split()] for key in adapter.text_keys(list(texts))]


def tokenizer_coverage(adapter, texts: list[str]) -> dict:
    """What ``adapter``'s tokenizer keeps of ``texts`` (e.g. one language's captions):

    * ``unk_rate``: share of tokens that are the unknown token (0 for byte-level BPE such as CLIP's);
    * ``folds_diacritics``: share of texts with diacritics that the model cannot tell from the same text
      without them (same token ids: e.g. BERT-uncased tokenizers strip accents);
    * ``tokens_per_word``: mean tokens (specials included) per whitespace word, before truncation;
    * ``truncated``: share of texts cut at the model's token limit (``max_tokens``).
    """
    texts = list(texts)
    if not texts:
        return {"n_texts": 0}
    ids = _ids(adapter, texts)
    unk = _unk_id(getattr(adapter, "tokenizer", None))
    n_tok = sum(len(x) for x in ids)
    with_marks = [t for t in texts if _fold(t) != t.lower()]
    folded = 0
    if with_marks:
        a, b = _ids(adapter, with_marks), _ids(adapter, [_fold(t) for t in with_marks])
        folded = sum(x == y for x, y in zip(a, b))
    limit = getattr(adapter, "max_length", None) or getattr(adapter, "context_length", None)
    full = _full_lengths(adapter, texts)
    words = sum(len(t.split()) for t in texts)
    return {
        "n_texts": len(texts),
        "unk_rate": (sum(x.count(unk) for x in ids) / n_tok) if unk is not None and n_tok else 0.0,
        "texts_with_diacritics": len(with_marks),
        "folds_diacritics": folded / len(with_marks) if with_marks else None,
        "tokens_per_word": (sum(full) / words) if words and full else None,
        "max_tokens": limit,
        "truncated": (sum(n > limit for n in full) / len(texts)) if limit and full else None,
    }


def _full_lengths(adapter, texts: list[str]) -> list[int] | None:
    """Token counts before truncation, where the tokenizer can say."""
    tok = getattr(adapter, "tokenizer", None)
    if tok is None:
        return None
    if callable(getattr(tok, "encode", None)) and hasattr(tok, "unk_token_id"):  # transformers tokenizers
        return [len(x) for x in tok(list(texts), truncation=False)["input_ids"]]
    if callable(getattr(tok, "encode", None)):  # open_clip SimpleTokenizer: BPE ids without sot/eot
        return [len(tok.encode(t)) + 2 for t in texts]
    return None
