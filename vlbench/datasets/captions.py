"""What every dataset source accepts as one caption: a string of at most :data:`MAX_CAPTION_CHARS` characters.

Checked centrally when a dataset is built (``core._build``: custom manifests, the built-in sets, ``hf:`` datasets,
the long-caption sets) and on a plug-in's Dataset, and early by readers that can name a row or column
(``parquet/``). This module imports only vlbench's errors, so any reader may call it.

Why a length bound: a caption is tokenized whole before the model's tokenizer truncates it, and the Rust
tokenizers allocate per character: one 22 MB caption aborted the process ("memory allocation of 345600000 bytes
failed", exit 134) with no message. The longest caption of the real sets vlbench reads is 3,152 characters (a DCI
description; DOCCI's longest is 2,898, ImageInWords' IIW-400 2,489, COCO and Flickr30k under 400), and a text
encoder reads at most a few hundred tokens (CLIP: 77), so 20,000 characters refuses nothing real and keeps a
caption's tokenization to a few MB.
"""

from __future__ import annotations

from ..errors import DataError

#: the longest caption accepted from any dataset source (characters)
MAX_CAPTION_CHARS = 20_000

LENGTH_HINT = (f"captions may be at most {MAX_CAPTION_CHARS:,} characters (the longest real long-caption "
               "descriptions, DCI's and DOCCI's, are about 3,000; a text encoder reads a few hundred tokens of it): "
               "shorten or split the caption, or remove it")


def shown_value(value, width: int = 60) -> str:
    """A short quotation of a value that is not a caption (its type and the start of its repr)."""
    text = repr(value)
    return f"{type(value).__name__} {text[:width]}{'...' if len(text) > width else ''}"


def caption_refusal(value) -> str | None:
    """Why ``value`` cannot be a caption at all (an error, unlike an empty caption, which is kept and reported):
    not a string, or longer than :data:`MAX_CAPTION_CHARS`; None when it is usable."""
    if not isinstance(value, str):
        what = "null" if value is None else shown_value(value)
        return f"is {what}, not a string"
    if len(value) > MAX_CAPTION_CHARS:
        return f"is {len(value):,} characters long, over the limit of {MAX_CAPTION_CHARS:,} characters per caption"
    return None


def refused_caption(name: str, where: str, image, j: int, cap, refused: str) -> DataError:
    """The error for a caption that no dataset source may hold (:func:`caption_refusal`)."""
    hint = LENGTH_HINT if isinstance(cap, str) else \
        "every caption must be a string of text: fix or remove it (a non-text caption scored as \"\" would add a " \
        "query nobody wrote)"
    return DataError(f"{name}: {where} (image {str(image)[:120]!r}): caption {j} {refused}", hint)


def check_captions(ds) -> None:
    """Refuse a vlbench Dataset (e.g. a plug-in's) holding a caption that is not a string or is over
    :data:`MAX_CAPTION_CHARS` characters, naming the caption's id."""
    for cid, cap in zip(ds.caption_ids, ds.captions):
        refused = caption_refusal(cap)
        if refused:
            image, _, j = str(cid).rpartition("#")
            raise refused_caption(ds.name, f"caption id {cid!r}", image or cid, int(j) if j.isdigit() else 0,
                                   cap, refused)
