"""The options of the BLIP and BLIP-2 pair scorers: ``blip-itm[:CHECKPOINT]?score=...&max_text_tokens=...``.

Each option names one fact of a published protocol, so a run can reproduce it exactly; each one that differs
from the default enters the scorer's identity (so two protocols never share a cache entry), and a preset
(``protocol=``) is only a shorthand that resolves to the same options, hence the same identity and cache.

* ``score``: how the ITM head's output becomes the pair's score.
  ``match-prob`` (default): the softmax of the head's two logits at index 1, as the model cards show.
  ``itm-logit``: the raw "match" logit (index 1, no softmax); BLIP-2's is averaged over its query tokens (LAVIS
  ``compute_itm``: ``itm_logit[:, :, 1].mean(dim=1)``).
  ``itm-logit+itc``: that logit plus the same checkpoint's contrastive (ITC) cosine of the pair (normalised
  projections, no temperature; BLIP-2: the best of its query tokens), summed in float32: the score BLIP's and
  BLIP-2's own retrieval evaluations give each of the top K (salesforce/BLIP train_retrieval.py ``evaluation``,
  LAVIS blip2.py ``compute_sim_matrix``), and ARO's and What'sUp's BLIP rows.
* ``max_text_tokens``: the caption is cut to this many tokens (special tokens included), at most the text
  tower's positions (the default). BLIP's evaluation uses 35, LAVIS's BLIP-2 configs 32.
* ``itm_token`` (BLIP only): the token put in place of the first one ([CLS]) of the ITM head's input, a token
  string or an id. BLIP's code reads a pair through its ITM head with ``[ENC]`` first
  (``text_ids[:, 0] = tokenizer.enc_token_id``; the ITC side keeps [CLS]); the transformers model card passes
  [CLS] to both. BLIP's tokenizer is bert-base-uncased (30,522 tokens) plus [DEC] and [ENC], so [ENC] is 30523.
* ``pre_caption`` (BLIP only): BLIP's caption normalisation with this many words at most (its datasets'
  ``pre_caption``: lower case, each of ``.!"()*#:;~`` to a space, runs of white space to one, stripped, then the
  first N words; the retrieval sets use 30). ARO's BLIP rows do not apply it.
* ``protocol``: ``blip`` = score=itm-logit+itc, max_text_tokens=35, itm_token=[ENC] (what BLIP's evaluation and
  ARO's BLIP wrapper share; add pre_caption=30 for BLIP's own retrieval sets); ``blip2`` = score=itm-logit+itc,
  max_text_tokens=32. An option given beside a preset overrides it.
"""

from __future__ import annotations

import re

from ...errors import ModelError

SCORES = ("match-prob", "itm-logit", "itm-logit+itc")
DEFAULT_SCORE = "match-prob"
PROTOCOLS = {"blip": {"score": "itm-logit+itc", "max_text_tokens": "35", "itm_token": "[ENC]"},
             "blip2": {"score": "itm-logit+itc", "max_text_tokens": "32"}}
NAMES = ("score", "max_text_tokens", "itm_token", "pre_caption", "protocol")
#: what the identity says of each score (the default's wording is the one every earlier cache entry was made with)
SCORE_TEXT = {"match-prob": "itm softmax p(match), float32",
              "itm-logit": "itm logit at index 1 (match){mean}, float32",
              "itm-logit+itc": "itm logit at index 1 (match){mean} + itc cosine{best} (normalised projections, no "
                               "temperature), float32 sum"}


def split_query(spec: str) -> tuple[str, dict[str, str]]:
    """``NAME[:CHECKPOINT][?k=v&k=v]`` -> (``NAME[:CHECKPOINT]``, {k: v}); a key given twice is refused."""
    head, sep, query = str(spec).partition("?")
    opts: dict[str, str] = {}
    if not sep:
        return head, opts
    for part in filter(None, query.split("&")):
        key, eq, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not eq or not key or not value:
            raise ModelError(f"pair scorer option {part!r} in {spec!r} is not KEY=VALUE",
                             "write options as NAME?score=itm-logit+itc&max_text_tokens=35")
        if key in opts:
            raise ModelError(f"pair scorer option {key!r} is given twice in {spec!r}", "give each option once")
        opts[key] = value
    return head, opts


def resolve(family: str, options: dict | None) -> dict:
    """The options of ``family`` (``blip-itm`` or ``blip2-itm``) with the preset expanded and the values checked
    (names, choices; the numbers against the model come later): {score, max_text_tokens, itm_token,
    pre_caption}, a missing one None (its default)."""
    opts = dict(options or {})
    unknown = sorted(set(opts) - set(NAMES))
    if unknown:
        raise ModelError(f"{family}: unknown option(s) {', '.join(unknown)}", f"use {', '.join(NAMES)}")
    preset = opts.pop("protocol", None)
    if preset is not None:
        if preset not in PROTOCOLS:
            raise ModelError(f"{family}: unknown protocol {preset!r}", f"use one of {sorted(PROTOCOLS)}")
        want = "blip2-itm" if preset == "blip2" else "blip-itm"
        if want != family:
            raise ModelError(f"protocol={preset} is {want}'s protocol, not {family}'s",
                             f"use {want}?protocol={preset}, or {family}?protocol="
                             f"{'blip2' if family == 'blip2-itm' else 'blip'}")
        opts = {**PROTOCOLS[preset], **opts}
    score = opts.get("score", DEFAULT_SCORE)
    if score not in SCORES:
        raise ModelError(f"{family}: unknown score {score!r}", f"use score= one of {', '.join(SCORES)}")
    out: dict = {"score": score, "max_text_tokens": None, "itm_token": None, "pre_caption": None}
    for key in ("max_text_tokens", "pre_caption"):
        if key in opts:
            value = opts[key]
            if not value.isdigit() or int(value) < 1:
                raise ModelError(f"{family}: {key}={value!r} is not a positive integer", f"e.g. {key}=35")
            out[key] = int(value)
    if family == "blip2-itm":
        for key in ("itm_token", "pre_caption"):
            if key in opts:
                raise ModelError(f"blip2-itm takes no {key} option (it is BLIP's, not LAVIS BLIP-2's)",
                                 f"leave {key} out, or use blip-itm")
    out["itm_token"] = opts.get("itm_token")
    return out


def pre_caption(caption: str, max_words: int) -> str:
    """BLIP's caption normalisation (salesforce/BLIP data/utils.py ``pre_caption``), written from its rules."""
    text = re.sub(r"[.!\"()*#:;~]", " ", str(caption).lower())
    text = re.sub(r"\s{2,}", " ", text).rstrip("\n").strip(" ")
    words = text.split(" ")
    return " ".join(words[:max_words]) if len(words) > max_words else text


def token_id(tokenizer, value: str, vocab_size: int, checkpoint: str) -> int:
    """``itm_token``: a token string or an id -> an id the text tower has an embedding for."""
    if value.isdigit():
        tid = int(value)
    else:
        tid = tokenizer.convert_tokens_to_ids(value)
        unk = getattr(tokenizer, "unk_token_id", None)
        if tid is None or (tid == unk and value != getattr(tokenizer, "unk_token", None)):
            raise ModelError(f"itm_token={value}: the tokenizer of {checkpoint!r} has no token {value!r}",
                             "give its id instead (BLIP's [ENC] is 30523: bert-base-uncased's 30,522 tokens, then "
                             "[DEC], then [ENC]), e.g. itm_token=30523")
    if not 0 <= tid < vocab_size:
        raise ModelError(f"itm_token={value}: id {tid} is outside the text tower's {vocab_size} embeddings",
                         f"give an id below {vocab_size}")
    return int(tid)
