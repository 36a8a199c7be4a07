"""Many processes, one file: four processes (torchrun ranks, jobs on one shared folder) download the same file from
the local mirror (support/mirror.py) at the same moment, and two load a caption set that pins its file on first use.
The mirror sends the body slowly so the processes really overlap. One full download happens; every process gets the
right bytes; the pin is the digest of what the mirror served."""

from __future__ import annotations

import hashlib
import subprocess
import sys
import time

import pytest
from support.mirror import wait_for

URL = "https://raw.githubusercontent.com/org/repo/0123456789abcdef/data/shared.bin"

# each child: say it is ready, wait for the common start, download, print the sha256 of what it got
DOWNLOAD = """
import hashlib, os, sys, time
from pathlib import Path
from vlbench.util import fetch
url, dest, sha, ready, go = sys.argv[1:6]
Path(ready).touch()
while not os.path.exists(go):
    time.sleep(0.005)
out = fetch.download(url, dest, sha256=sha or None, settings=fetch.Settings(timeout=30, retries=1, backoff=0.05))
print(hashlib.sha256(out.read_bytes()).hexdigest())
"""

LOAD_DOCCI = """
import os, sys, time
from pathlib import Path
from vlbench.datasets.longcaptions import SETS, load_long_caption_set
data_dir, ready, go = sys.argv[1:4]
Path(ready).touch()
while not os.path.exists(go):
    time.sleep(0.005)
ds = load_long_caption_set(SETS["docci"], data_dir, require_images=False, download_missing=True)
print(ds.source["text"]["sha256"], ds.source["text"]["pin"], len(ds.captions))
"""


def _race(mirror, tmp_path, script: str, args_of, n: int) -> list[subprocess.CompletedProcess]:
    """Start ``n`` children, let them all reach the start line, then release them together."""
    go = tmp_path / "go"
    env = mirror.env()
    procs = []
    for i in range(n):
        ready = tmp_path / f"ready-{i}"
        procs.append((ready, subprocess.Popen([sys.executable, "-c", script, *args_of(i), str(ready), str(go)],
                                              env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)))
    assert wait_for(lambda: all(r.exists() for r, _ in procs), 120)
    go.touch()
    done = []
    for _, p in procs:
        out, err = p.communicate(timeout=180)
        done.append(subprocess.CompletedProcess(p.args, p.returncode, out, err))
    return done


def _blob(n: int) -> bytes:
    return b"".join(hashlib.sha256(i.to_bytes(4, "little")).digest() for i in range(n // 32))


@pytest.mark.parametrize("pinned", [True, False], ids=["pinned", "unpinned"])
def test_four_processes_downloading_one_file_fetch_it_once(mirror, tmp_path, pinned):
    data = _blob(4 << 20)
    digest = hashlib.sha256(data).hexdigest()
    mirror.add_file(URL, data)
    mirror.fault("shared.bin", "slow", seconds=2.0, times=10)  # every body takes 2 s: the four overlap for real
    dest = tmp_path / "data" / "shared.bin"
    start = time.monotonic()
    done = _race(mirror, tmp_path, DOWNLOAD, lambda i: (URL, str(dest), digest if pinned else ""), 4)
    for d in done:
        assert d.returncode == 0, d.stderr
        assert d.stdout.split() == [digest]  # every process returned the right bytes
    assert hashlib.sha256(dest.read_bytes()).hexdigest() == digest and dest.stat().st_size == len(data)
    full = mirror.full_gets("shared.bin")
    assert len(full) == 1 and full[0].sent == len(data)  # ONE full download; the others waited, then found it
    assert len(mirror.gets("shared.bin")) == 1
    assert any("waiting for another process" in d.stderr for d in done)  # the wait was real, and said so
    assert not (tmp_path / "data" / ".shared.bin.part").exists()
    assert time.monotonic() - start < 60


def test_two_processes_pinning_a_caption_file_on_first_use_pin_the_right_digest(mirror, tmp_path):
    from vlbench.datasets.longcaptions import SETS

    rows = [{"example_id": f"test_{i}", "split": "test", "image_file": f"test_{i:05d}.jpg",
             "description": f"A detailed description number {i} of a photo, " + "with many words " * 20}
            for i in range(3000)]
    body = "".join(__import__("json").dumps(r) + "\n" for r in rows).encode()
    text = SETS["docci"].text
    assert text is not None and text.url is not None and text.sha256 is None  # the set pins on first use
    mirror.add_file(text.url, body)
    mirror.fault("docci_descriptions", "slow", seconds=2.0, times=10)
    done = _race(mirror, tmp_path, LOAD_DOCCI, lambda i: (str(tmp_path / "data"),), 2)
    digest = hashlib.sha256(body).hexdigest()
    for d in done:
        assert d.returncode == 0, d.stderr
        assert d.stdout.split() == [digest, "pinned", "on", "first", "use", "3000"]
    pin = tmp_path / "data" / "docci" / "docci_descriptions.jsonlines.sha256"
    assert pin.read_text().strip() == digest and not pin.is_symlink()
    assert len(mirror.full_gets("docci_descriptions")) == 1


HOLD = """
import sys, time
from pathlib import Path
from vlbench.util import fetch
dest, ready = sys.argv[1:3]
with fetch.destination_lock(dest, "the test's file"):
    Path(ready).touch()
    time.sleep(600)
"""


def test_a_download_whose_lock_holder_is_stopped_says_who_and_gives_up_with_the_lock_path(tmp_path, monkeypatch,
                                                                                          capsys):
    """Issue 44: a download whose lock holder was stopped (SIGSTOP) waited silently and without end. The waiter
    names the holder (its pid, STOPPED), keeps saying it waits, and gives up after VLBENCH_LOCK_TIMEOUT seconds
    without progress with an error naming the lock file and the fix."""
    import os
    import signal

    from vlbench.util import fetch, locks

    dest, ready = tmp_path / "data" / "shared.bin", tmp_path / "ready"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(dest), str(ready)], stderr=subprocess.PIPE, text=True)
    try:
        assert wait_for(ready.exists, 60), "the holder did not take the lock"
        os.kill(holder.pid, signal.SIGSTOP)
        monkeypatch.setenv("VLBENCH_LOCK_TIMEOUT", "2.5")
        monkeypatch.setattr(locks, "NOTICE_S", 0.5)
        t0 = time.monotonic()
        with pytest.raises(locks.LockWaitError) as err:
            with fetch.destination_lock(dest, "shared.bin"):
                pytest.fail("the lock of a stopped holder was taken")
        waited = time.monotonic() - t0
        said = capsys.readouterr().err.splitlines()
    finally:
        os.kill(holder.pid, signal.SIGCONT)
        holder.kill()
        holder.wait()
    assert 2.5 <= waited < 30
    assert said[0].startswith("waiting for another process that is fetching shared.bin: ")
    assert f"process {holder.pid} on this machine" in said[0] and "STOPPED" in said[0]
    assert str(fetch.lock_path(dest)) in said[0]
    assert sum(line.startswith("still waiting") for line in said) >= 2  # it kept saying so
    assert str(fetch.lock_path(dest)) in err.value.message and "no progress" in err.value.message
    assert f"kill -CONT {holder.pid}" in err.value.hint and "VLBENCH_LOCK_TIMEOUT" in err.value.hint
    with fetch.destination_lock(dest, "shared.bin"):  # the holder has ended: the lock is free, the note replaced
        assert locks.read_owner(fetch.lock_path(dest))["pid"] == os.getpid()
    assert not locks.owner_path(fetch.lock_path(dest)).exists()


def test_a_hub_download_waiting_for_another_process_says_so(capsys):
    """The Hub client (image archives) waits for a blob's lock with a note logged at INFO every 10 s, never shown:
    while vlbench downloads through it, each note is a line naming what is downloaded and the lock file."""
    import logging

    from vlbench.util.locks import hub_lock_words

    log = logging.getLogger("huggingface_hub.utils._fixes")
    level, propagate = log.level, log.propagate
    with hub_lock_words("the flickr30k images"):
        log.info("Still waiting to acquire lock on /hf/.locks/x/abc.lock (elapsed: 10.0 seconds)")
    log.info("Still waiting to acquire lock on /hf/.locks/x/abc.lock (elapsed: 20.0 seconds)")  # after: not said
    err = capsys.readouterr().err.splitlines()
    assert err == ["still waiting (10.0 seconds) for another process that is downloading the flickr30k images through "
                   "the Hub client (lock /hf/.locks/x/abc.lock); if that process is stopped or hung, resume or end it"]
    assert (log.level, log.propagate) == (level, propagate)
