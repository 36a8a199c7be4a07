"""Reading a W&B offline run back: the records of its ``run-*.wandb`` file, parsed with wandb's own protobuf
schema (``wandb.proto.wandb_internal_pb2.Record``).

wandb 0.31 writes these files from its Go core and no longer ships the Python reader (the former
``wandb.sdk.internal.datastore``), so the container framing is read here: a 7-byte header (``:W&B``, magic
0xBEE1, version 0), then 32 KiB blocks of chunks, each ``<crc32:u32><length:u16><type:u8>`` followed by its
bytes (type 1: a whole record, 2/3/4: its first, middle and last parts), as in LevelDB's log format.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

_BLOCK = 32768
_HEADER = 7


def records(path: Path) -> list:
    """Every Record of one ``.wandb`` file, in order."""
    from wandb.proto import wandb_internal_pb2 as pb

    data = Path(path).read_bytes()
    ident, magic, version = struct.unpack("<4sHB", data[:_HEADER])
    assert (ident, magic, version) == (b":W&B", 0xBEE1, 0), (ident, magic, version)
    out, pos, parts = [], _HEADER, b""
    while pos + _HEADER <= len(data):
        left = _BLOCK - pos % _BLOCK
        if left < _HEADER:  # a block's tail too short for a chunk header is padding
            pos += left
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos:pos + _HEADER])
        if length == 0 and kind == 0:  # zero fill at the end of a block or the file
            pos += left
            continue
        chunk = data[pos + _HEADER:pos + _HEADER + length]
        pos += _HEADER + length
        parts = chunk if kind in (1, 2) else parts + chunk
        if kind in (1, 4):
            rec = pb.Record()
            rec.ParseFromString(parts)
            out.append(rec)
            parts = b""
    return out


def _finished(path: Path, timeout: float = 30.0) -> list:
    """The records once the run's exit record is in the file: wandb's core writes the file in the background, and
    ``run.finish()`` can return before the last records reach it (the process's exit waits for them)."""
    import time

    end = time.monotonic() + timeout
    while True:
        recs = records(path)
        if any(r.WhichOneof("record_type") == "exit" for r in recs) or time.monotonic() > end:
            return recs
        time.sleep(0.05)


def offline_run(wandb_dir: Path) -> dict:
    """{"history": [{key: value} per logged row], "config": {key: value}, "summary": {key: value},
    "run": the run record, "artifacts": [names]} of the one offline run under ``wandb_dir``."""
    files = sorted(Path(wandb_dir).rglob("run-*.wandb"))
    assert len(files) == 1, files
    out: dict = {"history": [], "config": {}, "summary": {}, "run": None, "artifacts": []}
    for rec in _finished(files[0]):
        kind = rec.WhichOneof("record_type")
        if kind == "history":
            out["history"].append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in rec.history.item})
        elif kind == "config":
            out["config"].update({i.key: json.loads(i.value_json) for i in rec.config.update})
        elif kind == "summary":
            out["summary"].update({i.key or "/".join(i.nested_key): json.loads(i.value_json)
                                   for i in rec.summary.update})
        elif kind == "run":
            out["run"] = rec.run
            out["config"].update({i.key: json.loads(i.value_json) for i in rec.run.config.update})
        elif kind == "artifact":
            out["artifacts"].append(rec.artifact.name)
    return out
