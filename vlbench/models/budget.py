"""Captions cut to a token budget by the model's own tokenizer (``--token-budget``).

A budget of B tokens counts everything the text tower reads, its special tokens included (CLIP: start and end
token, so B - 2 caption tokens): the cut caption is the text whose tokenization is the first B - n_special
tokens of the caption's tokenization, followed by the end token, as the model's own truncation would give at a
context length of B. It is made by decoding those tokens and checked by tokenizing the result again: when a
decoded text would not give back exactly that prefix (a byte-level token split inside a character), one token
fewer is tried, so the model never reads more than B tokens and always reads the end token. A caption that fits
the budget is returned unchanged, character for character, so the run encodes it once for every budget and
clean alike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

#: the largest budget accepted (far above any text tower's context length)
MAX_BUDGET = 100_000


def cut_to_budget(texts: Sequence[str], budgets: Sequence[int], encode: Callable[[str], list[int]],
                  decode: Callable[[list[int]], str], n_special: int,
                  prefix: Callable[[str, int], str | None] | None = None) -> tuple[dict[int, list[str]], list[int]]:
    """({budget: cut texts}, token count of each original text with its special tokens): each text is tokenized
    once for all budgets. ``prefix(text, k)``, when the tokenizer can tell, is the text's own characters up to
    the end of its k-th token (the caption as written, not its decoded form); otherwise the first k tokens are
    decoded."""
    out: dict[int, list[str]] = {int(b): [] for b in budgets}
    lengths = []
    for text in texts:
        ids = list(encode(text))
        lengths.append(len(ids) + n_special)
        for budget, cut in out.items():
            keep = max(0, budget - n_special)
            cut.append(text if len(ids) <= keep else _cut(text, ids, keep, encode, decode, prefix))
    return out, lengths


def _cut(text, ids, keep, encode, decode, prefix) -> str:
    for k in range(keep, 0, -1):
        for candidate in ((prefix(text, k) if prefix else None), decode(ids[:k]).strip()):
            if candidate is not None and list(encode(candidate)) == ids[:k]:
                return candidate
    return ""


def hf_cutter(tokenizer) -> tuple[Callable, Callable, int, Callable | None]:
    """encode, decode, the number of special tokens and (fast tokenizers) the prefix by character offsets of a
    transformers tokenizer."""

    def encode(text: str) -> list[int]:
        return tokenizer(text, add_special_tokens=False, verbose=False)["input_ids"]

    def decode(ids: list[int]) -> str:
        return tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)

    def prefix(text: str, k: int) -> str | None:
        spans = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True, verbose=False)["offset_mapping"]
        return text[:spans[k - 1][1]].rstrip() if 0 < k <= len(spans) else None

    n_special = len(tokenizer("", add_special_tokens=True)["input_ids"])
    return encode, decode, n_special, (prefix if getattr(tokenizer, "is_fast", False) else None)


def openclip_cutter(tokenizer) -> tuple[Callable, Callable, int, Callable | None]:
    """open_clip's own BPE tokenizer (start + end token; no character offsets), or the transformers tokenizer
    it wraps."""
    inner = getattr(tokenizer, "tokenizer", None)
    if inner is not None and callable(inner):  # open_clip.tokenizer.HFTokenizer
        return hf_cutter(inner)
    return tokenizer.encode, tokenizer.decode, 2, None
