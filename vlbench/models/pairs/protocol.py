"""The pair-scorer protocol: what vlbench asks of a model that scores (image, text) pairs, and its loader.

The shape, and why:

* ``preprocess(image)`` (a decoded RGB PIL image -> one model input) and ``collate(items)`` are the image side's
  entry, as for a dual encoder, so the same data loading feeds both kinds.
* ``encode_images(batch)`` turns a collated batch into an *image state*, one row per image: whatever the model
  can compute from the image alone (BLIP's ITM head cross-attends to the vision tower's patch embeddings, so its
  state is those embeddings). A reranked run computes it once per image and condition and reuses it for every
  caption paired with that image. A model that cannot split its forward keeps the default: the state is the pixel
  batch itself. The state is indexed with an integer array (``state[idx]``, a torch tensor or a NumPy array) to
  gather the rows of a batch of pairs.
* ``score_pairs(images, texts)`` scores *aligned* pairs: row ``i`` of ``images`` (an image state) with
  ``texts[i]``, giving a float32 array of shape ``(n,)``, higher meaning a better match. Aligned pairs rather
  than an image x text grid, because a rerank scores K chosen candidates per query (a grid would cost every
  image with every caption), and a grid is one gather away (``images[np.repeat(...)]``). A score must not
  depend on the other pairs of the call (their number, order or padding), so any batching gives the same
  scores; vlbench.testing.check_pair_scorer checks this.
* ``text_keys(texts)``: one string per text naming what the model reads (texts with one key get one score with
  one image): a cache key.
* ``identity()``: plain JSON of everything that changes a score (checkpoint, resolved revision, precision,
  preprocessing, the head and how its output becomes a score); ``model_hash()`` hashes it with
  :data:`PAIR_CODE_VERSION`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ... import registry
from ...errors import ModelError, VlbenchError
from ..adapter import pick_device, torch_dtype
from ..identity import ModelIdentity
from .blip_options import split_query

#: bump when vlbench's pair-scoring code changes what a score is (part of every pair scorer's hash)
PAIR_CODE_VERSION = "1"


class PairScorer:
    """Base class of pair scorers; subclasses implement ``identity``, ``preprocess`` and ``score_pairs`` (and
    ``encode_images`` when the model can encode an image once for all its pairs)."""

    name: str = "pair-scorer"
    device: str = "cpu"

    def identity(self) -> dict:
        """Plain JSON: everything that changes a score."""
        raise NotImplementedError

    def preprocess(self, image) -> Any:  # PIL.Image (RGB) -> one model input
        raise NotImplementedError

    def collate(self, items: Sequence[Any]) -> Any:
        import torch

        return torch.stack(list(items))

    def encode_images(self, batch) -> Any:
        """A collated batch -> the image state, one row per image (default: the batch itself)."""
        return batch

    def score_pairs(self, images, texts: Sequence[str]):
        """Rows of an image state aligned with ``texts`` -> float32 scores of shape (len(texts),)."""
        raise NotImplementedError

    def text_keys(self, texts: Sequence[str]) -> list[str]:
        return [str(t) for t in texts]

    def model_identity(self) -> ModelIdentity:
        return ModelIdentity.from_dict(self.identity())

    def model_hash(self) -> str:
        return self.model_identity().hash("pair-" + PAIR_CODE_VERSION)


REQUIRED = ("identity", "preprocess", "collate", "encode_images", "score_pairs", "text_keys", "model_hash")


def parse_spec(spec: str) -> tuple[str, str | None]:
    """``NAME[:CHECKPOINT][?OPTIONS]`` -> (name, checkpoint or None); the options: :func:`spec_options`."""
    name, sep, ckpt = str(spec).partition("?")[0].partition(":")
    return name.strip(), (ckpt.strip() or None) if sep else None


def spec_options(spec: str) -> dict[str, str]:
    """The ``?key=value&key=value`` options of a pair scorer spec (the scorer's own: blip_options.py for BLIP)."""
    return split_query(spec)[1]


def load_pair_scorer(spec: str, *, device: str | None = None, precision: str = "fp32", revision: str | None = None,
                     trust_remote_code: bool = False) -> PairScorer:
    """Load ``NAME[:CHECKPOINT][?OPTIONS]`` from the ``pair_scorers`` registry (built-ins and plug-ins of the
    entry-point group ``vlbench.pair_scorers``): a registered loader called as ``loader(checkpoint, device=,
    precision=, trust_remote_code=[, revision=][, options=])`` (the checkpoint None: the loader's default;
    ``options``, a dict of strings, only when the spec has some)."""
    name, ckpt = parse_spec(spec)
    options = spec_options(spec)
    loader = registry.pair_scorers.get(name)  # unknown name -> did you mean
    device = pick_device(device)
    torch_dtype(precision)
    if precision == "fp16" and device == "cpu":
        raise VlbenchError("fp16 is not supported on the CPU by many kernels",
                           "use --precision fp32 or bf16 on the CPU (fp16 on CUDA)")
    kwargs: dict[str, Any] = dict(device=device, precision=precision, trust_remote_code=trust_remote_code)
    if revision:
        kwargs["revision"] = revision
    if options:
        kwargs["options"] = options
    try:
        scorer = loader(ckpt, **kwargs)
    except VlbenchError:
        raise
    except Exception as exc:
        raise ModelError(f"pair scorer {spec!r} failed to load: {type(exc).__name__}: {exc}",
                         "check the checkpoint name or path; run 'vlbench ls pair-scorers' for the names") from exc
    missing = [m for m in REQUIRED if not callable(getattr(scorer, m, None))]
    if missing:
        raise ModelError(f"pair scorer {name!r} returned a {type(scorer).__name__} without {', '.join(missing)}",
                         "subclass vlbench.models.pairs.PairScorer")
    scorer.spec = spec
    return scorer
