"""Multilingual caption sets for the Flickr30k 1k test images (Multi30K), and tokenizer coverage checks.

Datasets (records in vlbench.datasets.specs, loaded like every built-in):

* ``flickr30k-de``: 5 German descriptions per image, written independently of the English ones
  (Multi30K task 2, Elliott et al. 2016);
* ``flickr30k-multi30k-{en,de,fr,cs}``: one caption per image; ``en`` is the English caption that was
  translated into German (Elliott et al. 2016), French (Elliott et al. 2017) and Czech (Barrault et al.
  2018), so the four sets ask the same queries in four languages.

All come from github.com/multi30k/dataset at a pinned commit (download recipe ``multi30k``: line i of a caption
file is a caption of image i, HTML entities unescaped) and share the images of ``flickr30k``.
:func:`tokenizer_coverage` says what a model's tokenizer does with a language: unknown tokens, folded
diacritics, tokens per word and truncation.
"""

from __future__ import annotations

import unicodedata

from .specs import MULTILINGUAL  # noqa: F401  (the records: flickr30k-de, flickr30k-multi30k-*)

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
