"""The prompt formats of the instruction-conditioned embedders on Qwen2-VL, and their ``?key=value`` options.

Facts from each model's own code and card (the format is the model's, the code that applies it is vlbench's):

* ``vlm2vec`` (TIGER-Lab/VLM2Vec-Qwen2VL-2B / -7B; VLM2Vec's ``Qwen2_VL_process_fn`` and its Qwen2-VL demo): no
  chat template. An image is the text ``<|image_pad|> INSTRUCTION`` (the processor expands the one placeholder
  to the image's tokens), a caption ``INSTRUCTION CAPTION``; the MMEB text-to-image instructions are "Find me an
  everyday image that matches the given caption:" (query) and "Represent the given image." (candidate image).
  Pooling: the last non-padding token (``pooling='last'``), L2-normalised; padding on the right; bf16.
* ``gme`` (Alibaba-NLP/gme-Qwen2-VL-2B-Instruct / -7B; its ``gme_inference.py``): the chat markup written out,
  ``<|im_start|>system\\nINSTRUCTION<|im_end|>\\n<|im_start|>user\\nCONTENT<|im_end|>\\n<|im_start|>assistant\\n
  <|endoftext|>``, CONTENT the caption or ``<|vision_start|><|image_pad|><|vision_end|>``; a document (is_query
  False) always gets "You are a helpful assistant.", the card's text-to-image query instruction is "Find an image
  that matches the given text.". Pooling: the last token, L2-normalised; padding on the left; images between
  256 and 1280 visual tokens (min_pixels 256*28*28, max_pixels 1280*28*28); bf16; at most 1800 tokens.

vlbench makes one vector per image and one per caption and ranks both directions with them (as for the dual
encoders), so an instruction belongs to a modality: ``text_instruction`` (every caption) and
``image_instruction`` (every image). The defaults are the cards' text-to-image setting: the caption is the
query, the image the document.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from urllib.parse import unquote

from ...errors import ModelError
from ...util.query import QueryProblem, query_pairs
from ..families import BUILTIN

__all__ = ["PromptFormat", "FORMATS", "IMAGE_TOKEN", "split_options", "OPTION_KEYS", "MAX_TEXT_TOKENS",
           "instruction_refusal"]

IMAGE_TOKEN = "<|image_pad|>"
#: the most caption tokens vlbench reads by default (GME's own cap); ``max_text_tokens=N`` changes it
MAX_TEXT_TOKENS = 1800
_GME_MARKUP = "<|im_start|>system\n{instruction}<|im_end|>\n<|im_start|>user\n{content}<|im_end|>\n" \
              "<|im_start|>assistant\n<|endoftext|>"


@dataclass(frozen=True)
class PromptFormat:
    """How one family writes an input: ``{instruction}`` and ``{content}`` are filled per item."""

    family: str
    default_checkpoint: str
    text_template: str
    image_template: str
    image_content: str  # what stands for the image inside the template's {content}
    text_instruction: str
    image_instruction: str
    pooling: str = "last"
    padding: str = "right"
    min_pixels: int | None = None  # None: the checkpoint's image processor decides
    max_pixels: int | None = None
    max_text_tokens: int = MAX_TEXT_TOKENS
    card_precision: str = "bf16"

    def text_prompt(self, caption: str, instruction: str) -> str:
        return _fill(self.text_template, instruction, caption)

    def image_prompt(self, instruction: str) -> str:
        return _fill(self.image_template, instruction, self.image_content)


def _fill(template: str, instruction: str, content: str) -> str:
    if not instruction:  # no instruction: no separating space either
        template = template.replace("{instruction} ", "").replace(" {instruction}", "")
    return template.format(instruction=instruction, content=content)  # one pass: braces in a caption stay as written


FORMATS = {f.family: f for f in (
    PromptFormat("vlm2vec", "TIGER-Lab/VLM2Vec-Qwen2VL-2B", text_template="{instruction} {content}",
                 image_template="{content} {instruction}", image_content=IMAGE_TOKEN,
                 text_instruction="Find me an everyday image that matches the given caption:",
                 image_instruction="Represent the given image.", pooling="last", padding="right"),
    PromptFormat("gme", "Alibaba-NLP/gme-Qwen2-VL-2B-Instruct", text_template=_GME_MARKUP, image_template=_GME_MARKUP,
                 image_content=f"<|vision_start|>{IMAGE_TOKEN}<|vision_end|>",
                 text_instruction="Find an image that matches the given text.",
                 image_instruction="You are a helpful assistant.", pooling="last", padding="left",
                 min_pixels=256 * 28 * 28, max_pixels=1280 * 28 * 28),
)}

#: option -> allowed values (None: any text, or a positive integer for the *_pixels and max_text_tokens keys)
OPTION_KEYS: dict[str, tuple[str, ...] | None] = {
    "text_instruction": None, "image_instruction": None, "pooling": ("last", "mean"),
    "padding": ("right", "left"), "min_pixels": None, "max_pixels": None, "max_text_tokens": None}
_INTEGER_KEYS = ("min_pixels", "max_pixels", "max_text_tokens")


def split_options(checkpoint: str | None, family: str) -> tuple[str, PromptFormat]:
    """``CKPT?key=value&...`` -> (CKPT or the family's default, the family's format with the options applied).
    Values are URL-decoded (``%26`` for ``&``), so an instruction may hold any character."""
    fmt = FORMATS[family]
    base, _, query = (checkpoint or "").partition("?")
    example = f"{family}:{fmt.default_checkpoint}?text_instruction=Find an image of this caption:"
    try:
        pairs = query_pairs(query)
    except QueryProblem as exc:
        raise ModelError(f"{family}: {exc} in {checkpoint!r}", f"e.g. {example}") from None
    changes: dict = {}
    for key, raw in pairs:
        value = unquote(raw)
        if key not in OPTION_KEYS:
            raise ModelError(f"{family}: unknown option {key!r} in {checkpoint!r}",
                             f"use {', '.join(OPTION_KEYS)}; e.g. {example}")
        allowed = OPTION_KEYS[key]
        if allowed is not None and value not in allowed:
            raise ModelError(f"{family}: option {key}={value!r} is not one of {', '.join(allowed)}",
                             f"write {key}={allowed[0]} or {key}={allowed[1]}")
        if key in _INTEGER_KEYS:
            if not value.isdigit() or int(value) < 1:
                raise ModelError(f"{family}: option {key}={value!r} is not a positive whole number",
                                 f"e.g. {key}={fmt.max_text_tokens if key == 'max_text_tokens' else 200704}")
            changes[key] = int(value)
        else:
            changes[key] = value
    out = replace(fmt, **changes)
    if out.min_pixels and out.max_pixels and out.min_pixels > out.max_pixels:
        raise ModelError(f"{family}: min_pixels={out.min_pixels} is above max_pixels={out.max_pixels}",
                         "give min_pixels <= max_pixels (Qwen2-VL: multiples of 28*28 = 784)")
    return base.strip() or fmt.default_checkpoint, out


#: the option names that mean an instruction, in any family's spec
_INSTRUCTION_KEYS = ("text_instruction", "image_instruction", "instruction", "query_instruction",
                     "doc_instruction", "document_instruction")


def instruction_refusal(family: str, checkpoint: str | None) -> ModelError | None:
    """The error for an instruction option given to a built-in family that takes none (e.g.
    ``clip:CKPT?instruction=...``), or None. The MLLM embedders (vlm2vec, gme) are the built-ins that take one; a
    plug-in family reads its own options (it may take an instruction of its own)."""
    if family in FORMATS or family not in BUILTIN or not checkpoint or "?" not in checkpoint:
        return None
    try:
        keys = [k for k, _ in query_pairs(checkpoint.partition("?")[2])]
    except QueryProblem:
        return None
    given = [k for k in keys if k in _INSTRUCTION_KEYS]
    if not given:
        return None
    return ModelError(f"model family {family!r} takes no instruction, but {given[0]}= was given in {checkpoint!r}",
                      f"drop ?{given[0]}=... (a dual encoder reads the caption as it is), or use an instruction-"
                      f"conditioned embedder: --model {' or '.join(f + ':CKPT?text_instruction=...' for f in FORMATS)}")
