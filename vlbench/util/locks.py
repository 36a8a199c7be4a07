"""Waiting for a file lock held by another process, in words and within a bound.

A download (or a first-use pin) holds the lock of its destination (``.NAME.lock``, util/fetch.py) while it works.
A process that finds the lock held used to wait without a word and without end: a holder that was stopped
(SIGSTOP, Ctrl-Z) or hung kept every other run waiting silently. Here the holder writes who it is beside the lock
(``.NAME.lock.owner``: process id, host, start time, what it fetches), and a waiter

* says at once who holds the lock, and whether that process is stopped, gone or running (same host: from
  /proc), with the lock file's path;
* keeps saying it is waiting, every :data:`NOTICE_S` seconds, with the time waited and whether the holder's
  partial file grew;
* gives up after ``VLBENCH_LOCK_TIMEOUT`` seconds (default 600; a positive number) during which the holder made
  no progress (its partial file did not grow): a :class:`LockWaitError` naming the holder, the lock file and the
  fix (resume or end the holder: the kernel drops the lock of a process that ended, however it ended).
"""

from __future__ import annotations

import json
import logging
import os
import socket
import sys
import time
from contextlib import contextmanager
from pathlib import Path

from ..errors import DataError
from .io import atomic_write_text, read_regular_file

#: seconds between two "still waiting" lines
NOTICE_S = 30.0
DEFAULT_TIMEOUT_S = 600.0


class LockWaitError(DataError):
    """The lock of a download stayed held, with no progress, for longer than the wait allows."""


def owner_path(lock: Path) -> Path:
    return lock.with_name(lock.name + ".owner")


def wait_timeout() -> float:
    raw = os.environ.get("VLBENCH_LOCK_TIMEOUT")
    if raw is None or not raw.strip():
        return DEFAULT_TIMEOUT_S
    try:
        value = float(raw)
    except ValueError:
        value = -1.0
    if not (value > 0 and value != float("inf")):
        raise DataError(f"VLBENCH_LOCK_TIMEOUT={raw!r} is not a positive number of seconds",
                        "set it to how long to wait for another process's download, e.g. VLBENCH_LOCK_TIMEOUT=600")
    return value


def note_owner(lock: Path, what: str) -> None:
    """Say beside the lock who holds it now (this process); best effort: a lock is valid without it."""
    info = {"pid": os.getpid(), "host": socket.gethostname(), "since": time.time(), "what": what}
    try:
        atomic_write_text(owner_path(lock), json.dumps(info))
    except OSError:
        pass


def drop_owner(lock: Path) -> None:
    """Remove the owner note if it is this process's (another process may hold the lock by now)."""
    path = owner_path(lock)
    info = read_owner(lock)
    if info and info.get("pid") == os.getpid() and info.get("host") == socket.gethostname():
        try:
            path.unlink()
        except OSError:
            pass


def read_owner(lock: Path) -> dict | None:
    try:
        info = json.loads(read_regular_file(owner_path(lock), 4096))
    except (OSError, ValueError):
        return None
    return info if isinstance(info, dict) else None


def process_state(pid: int) -> str | None:
    """'running', 'stopped', 'gone' for a process of this host, or None where /proc cannot say."""
    try:
        with open(f"/proc/{int(pid)}/stat", encoding="ascii", errors="replace") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
    except FileNotFoundError:
        return "gone"
    except (OSError, ValueError, IndexError):
        return None
    return {"T": "stopped", "t": "stopped", "Z": "gone", "X": "gone"}.get(state, "running")


def describe_owner(lock: Path) -> tuple[str, str | None]:
    """(who holds ``lock``, in words; the holder's state on this host or None)."""
    info = read_owner(lock)
    if not info or not isinstance(info.get("pid"), int):
        return "another process (it did not say which)", None
    since = time.strftime("%H:%M:%S", time.localtime(float(info.get("since") or 0)))
    here = info.get("host") == socket.gethostname()
    state = process_state(info["pid"]) if here else None
    where = "this machine" if here else f"host {info.get('host')}"
    words = f"process {info['pid']} on {where} (since {since})"
    if state == "stopped":
        words += ", which is STOPPED (SIGSTOP or Ctrl-Z)"
    elif state == "gone":
        words += ", which has ended (the lock is freed as soon as the system notices)"
    return words, state


def _fix(lock: Path, owner: dict | None) -> str:
    pid, host = (owner or {}).get("pid"), (owner or {}).get("host")
    if pid and host == socket.gethostname():
        first = f"resume process {pid} (kill -CONT {pid}) or end it (kill {pid})"
    elif pid:
        first = f"resume or end process {pid} on host {host}"
    else:
        first = f"find the process that holds {lock} (fuser {lock}) and resume or end it"
    return (f"{first}, then run the same command again (the lock is freed when its holder ends; the lock file "
            "itself can stay); to wait longer, set VLBENCH_LOCK_TIMEOUT (seconds)")


def acquire(lock, path: Path, what: str, progress: Path | None = None, *, say=None) -> None:
    """Acquire ``lock`` (a filelock lock on ``path``), saying who holds it and how long this waits; bounded.
    ``progress``: the holder's partial file, whose growth counts as progress (resets the bound)."""
    from filelock import Timeout  # lazy: only a download or a pin needs it

    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    try:
        lock.acquire(timeout=1.0)
        return
    except Timeout:
        pass
    bound, started = wait_timeout(), time.monotonic()
    last_progress, last_size = started, _size(progress)
    who, _ = describe_owner(path)
    say(f"waiting for another process that is fetching {what}: {who} holds its lock {path} (giving up after "
        f"{bound:g} s without progress: VLBENCH_LOCK_TIMEOUT)")
    while True:
        step = min(NOTICE_S, max(0.1, bound - (time.monotonic() - last_progress)))
        try:
            lock.acquire(timeout=step)
            return
        except Timeout:
            pass
        now, size = time.monotonic(), _size(progress)
        grew = size is not None and size != last_size
        if grew:
            last_progress, last_size = now, size
        who, _ = describe_owner(path)
        if now - last_progress >= bound:
            raise LockWaitError(f"gave up waiting for {what}: its lock {path} has been held by {who} for "
                                f"{now - started:.0f} s with no progress (limit VLBENCH_LOCK_TIMEOUT={bound:g} s)",
                                _fix(path, read_owner(path)))
        growth = f", its partial file at {size:,} bytes" + (" and growing" if grew else "") if size else ""
        say(f"still waiting ({now - started:.0f} s) for {who} to finish fetching {what}{growth} (lock {path})")


def _size(path: Path | None) -> int | None:
    if path is None:
        return None
    try:
        return path.lstat().st_size
    except OSError:
        return None


@contextmanager
def hub_lock_words(what: str, say=None):
    """While huggingface_hub downloads ``what``: its "still waiting to acquire lock" notes (logged at INFO every 10
    s when another process holds the blob's lock, so never shown) printed as a line each, with the lock file, so a
    Hub download that waits for a stopped or hung process says so. The Hub client's own wait has no bound."""
    say = say or (lambda line: print(line, file=sys.stderr, flush=True))
    log = logging.getLogger("huggingface_hub.utils._fixes")

    class _Say(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            text = record.getMessage()
            if text.startswith("Still waiting to acquire lock on "):
                lock = text.removeprefix("Still waiting to acquire lock on ").split(" (elapsed")[0]
                elapsed = text.rpartition("(elapsed: ")[2].rstrip(")")
                say(f"still waiting ({elapsed}) for another process that is downloading {what} through the Hub "
                    f"client (lock {lock}); if that process is stopped or hung, resume or end it")

    handler, before = _Say(logging.INFO), (log.level, log.propagate)
    log.addHandler(handler)
    log.setLevel(logging.INFO)
    log.propagate = False  # the note once, as this line, not again through the Hub client's own handler
    try:
        yield
    finally:
        log.removeHandler(handler)
        log.setLevel(before[0])
        log.propagate = before[1]
