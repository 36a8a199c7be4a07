"""Cache entries that two ranks or nodes write at once: each writer goes through a temporary file and one rename in
the entry's folder, so two processes writing the same entry leave one valid entry, and a reader that looks at it
meanwhile sees the old whole file or the new whole file, never a half-written one."""

from __future__ import annotations

import json
import subprocess
import sys

WRITE_SHARD = """
import sys
import numpy as np
from vlbench.encoding.cache import EmbeddingCache
root, rounds = sys.argv[1], int(sys.argv[2])
rng = np.random.default_rng(0)  # the same entry in both processes: identical keys and vectors
keys = [f"{i:064x}" for i in range(2000)]
vectors = rng.standard_normal((2000, 256)).astype(np.float32)
for _ in range(rounds):
    EmbeddingCache(root, "m" * 64, label="tiny").add("text", keys, vectors)
"""

WRITE_JSON = """
import json, sys
from vlbench.util.io import cache_write_bytes
path, who, rounds = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(rounds):
    cache_write_bytes(path, json.dumps({"writer": who, "round": i, "captions": ["a caption " * 50] * 2000}).encode())
"""

READ_JSON = """
import json, sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
end, seen, bad = time.monotonic() + seconds, 0, 0
while time.monotonic() < end:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except FileNotFoundError:
        continue
    seen += 1
    try:
        json.loads(data)
    except ValueError:
        bad += 1
print(seen, bad)
"""


def _run_all(*cmds) -> list[subprocess.CompletedProcess]:
    procs = [subprocess.Popen([sys.executable, "-c", *c], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for c in cmds]
    out = []
    for p in procs:
        o, e = p.communicate(timeout=300)
        out.append(subprocess.CompletedProcess(p.args, p.returncode, o, e))
    return out


def test_two_processes_writing_the_same_embedding_shard_leave_one_valid_shard(tmp_path):
    import numpy as np

    from vlbench.encoding.cache import EmbeddingCache

    root = tmp_path / "cache"
    for done in _run_all((WRITE_SHARD, str(root), "15"), (WRITE_SHARD, str(root), "15")):
        assert done.returncode == 0, done.stderr
    folder = next((root / "embeddings").iterdir()) / "text"
    assert [p.suffix for p in folder.iterdir()] == [".npz"]  # one entry, no temporary file left
    keys = [f"{i:064x}" for i in range(2000)]
    cache = EmbeddingCache(root, "m" * 64, warn=lambda line: (_ for _ in ()).throw(AssertionError(line)))
    found, vectors = cache.lookup("text", keys)
    expected = np.random.default_rng(0).standard_normal((2000, 256)).astype(np.float32)
    assert found.all() and vectors is not None and np.array_equal(vectors, expected)  # its checksum held too
    assert cache.stats["bad_shards"] == 0


def test_a_reader_never_sees_a_half_written_cache_file_while_two_processes_write_it(tmp_path):
    path = tmp_path / "cache" / "perturbations" / "entry.json"
    done = _run_all((WRITE_JSON, str(path), "a", "40"), (WRITE_JSON, str(path), "b", "40"),
                    (READ_JSON, str(path), "3"))
    for d in done:
        assert d.returncode == 0, d.stderr
    seen, bad = map(int, done[2].stdout.split())
    assert seen > 0 and bad == 0
    assert json.loads(path.read_text())["round"] == 39  # the last write of one of the two, whole
    assert [p.name for p in path.parent.iterdir()] == ["entry.json"]
