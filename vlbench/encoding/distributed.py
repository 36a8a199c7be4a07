"""torchrun support for the runner: the shard of a rank, failure-aware encoding phases, gathering on rank 0,
and the claim on ``--out`` that keeps two runs out of one folder."""

from __future__ import annotations

import dataclasses
import os
import sys
from typing import Any, ClassVar, Protocol, TypeVar

from ..errors import VlbenchError
from ..runfolder import claim_out  # noqa: F401  re-exported: the run folder owns its claim
from .encode import SINGLE, Shard, stack


class _RunSettings(Protocol):
    """What distributed() reads of the run's settings (the pipeline's RunConfig, a dataclass); named by shape
    because the pipeline is a layer above encoding."""

    __dataclass_fields__: ClassVar[dict[str, Any]]
    device: str | None


_Settings = TypeVar("_Settings", bound=_RunSettings)


def distributed(cfg: _Settings) -> tuple[_Settings, Shard, Any, bool]:
    """(the rank's config, Shard, dist module or None, whether we initialized it) for torchrun launches;
    under torchrun with CUDA the rank's config names its own GPU (``device="cuda:<LOCAL_RANK>"``)."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return cfg, SINGLE, None, False
    import torch
    import torch.distributed as dist

    use_cuda = torch.cuda.is_available() and (cfg.device in (None, "auto") or str(cfg.device).startswith("cuda"))
    if use_cuda:
        local = int(os.environ.get("LOCAL_RANK", "0"))
        torch.cuda.set_device(local)
        cfg = dataclasses.replace(cfg, device=f"cuda:{local}")
    inited = False
    if not dist.is_initialized():
        dist.init_process_group("nccl" if use_cuda else "gloo")
        inited = True
    def agree(obj):
        box = [obj]
        dist.broadcast_object_list(box, src=0)
        return box[0]

    return cfg, Shard(dist.get_rank(), dist.get_world_size(), agree), dist, inited


def phase(dist, shard, work):
    """Run one encoding phase; under torchrun, every rank learns whether another rank failed before
    the next collective operation, so a rank that fails (a bad image only it decodes, an OOM) never
    leaves the others waiting."""
    if dist is None:
        return work()
    failure, out = None, None
    try:
        out = work()
    except Exception as exc:
        failure = exc
    statuses = [None] * shard.world
    dist.all_gather_object(statuses, None if failure is None else f"{type(failure).__name__}: {failure}")
    if failure is not None:
        raise failure
    bad = [(r, s) for r, s in enumerate(statuses) if s is not None]
    if bad:
        raise VlbenchError(f"rank {bad[0][0]} failed while encoding: {bad[0][1]}",
                           "fix the problem it names and run the same command again (finished batches are cached)")
    return out


def gather(dist, shard, local: dict, n: int, what: str, everywhere: bool = False):
    """Every rank's share of the embeddings stacked in order, on rank 0 (None elsewhere), or on every rank
    with ``everywhere`` (the ranks then score together: metrics/sharded.py)."""
    if dist is None:
        return stack(local, n, what)
    if everywhere:
        every: list[Any] = [None] * shard.world
        dist.all_gather_object(every, local)
        parts: list[Any] | None = every
    else:
        parts = [None] * shard.world if shard.rank == 0 else None
        dist.gather_object(local, parts, dst=0)
    if parts is None:  # not rank 0
        return None
    merged: dict = {}
    for part in parts:
        merged.update(part)
    return stack(merged, n, what)


def share(dist, shard, obj):
    """Rank 0's ``obj`` on every rank (what only rank 0 computed: image conditions, relevance, distractors)."""
    if dist is None or shard.world == 1:
        return obj
    box = [obj if shard.rank == 0 else None]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def silence_library_progress() -> None:
    """--quiet: no progress bars from the hub client or transformers (weight loading) either. Both read
    HF_HUB_DISABLE_PROGRESS_BARS when imported; an already imported transformers is told directly."""
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    if "transformers" in sys.modules:
        sys.modules["transformers"].utils.logging.disable_progress_bar()
    if "huggingface_hub" in sys.modules:
        from huggingface_hub.utils import disable_progress_bars

        disable_progress_bars()
