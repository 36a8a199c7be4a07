"""vlbench's downloader of non-Hub files (vlbench/util/fetch.py) against the local mirror (support/mirror.py), one
fault per test: the real HTTP client code talks to a real server; nothing is monkeypatched but the environment."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import time

import pytest

from vlbench.errors import DataError
from vlbench.util import fetch

URL = "https://raw.githubusercontent.com/org/repo/0123456789abcdef/data/file.bin"
FAST = fetch.Settings(timeout=1.0, retries=2, backoff=0.01)


def _blob(n: int, seed: int = 0) -> bytes:
    return hashlib.sha256(str(seed).encode()).digest() * (n // 32) + b"x" * (n % 32)


def test_a_connection_dropped_mid_file_is_resumed_not_restarted(mirror, tmp_path):
    data = _blob(3_000_000)
    mirror.add_file(URL, data)
    mirror.fault("file.bin", "drop", after=1_200_000)
    out = fetch.download(URL, tmp_path / "f.bin", sha256=hashlib.sha256(data).hexdigest(), settings=FAST)
    assert out.read_bytes() == data
    first, second = mirror.gets("file.bin")
    assert (first.status, first.sent) == (200, 1_200_000)
    assert second.status == 206 and second.headers["Range"] == "bytes=1200000-" and second.sent == 1_800_000
    # no partial file left behind (the lock file stays, as huggingface_hub's do: removing it would race a waiter)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".f.bin.lock", "f.bin"]


def test_a_partial_file_left_by_an_earlier_process_is_resumed(mirror, tmp_path):
    data = _blob(2_000_000, 1)
    mirror.add_file(URL, data)
    mirror.fault("file.bin", "drop", after=1_500_000)
    with pytest.raises(fetch.DownloadError):
        fetch.download(URL, tmp_path / "f.bin", settings=fetch.Settings(1.0, 0, 0.0))  # no retry: it gives up
    assert not (tmp_path / "f.bin").exists() and (tmp_path / ".f.bin.part").stat().st_size == 1_500_000
    fetch.download(URL, tmp_path / "f.bin", settings=FAST)
    assert (tmp_path / "f.bin").read_bytes() == data
    assert mirror.gets("file.bin")[-1].sent == 500_000  # only the rest came again


def test_a_partial_file_of_a_changed_upstream_file_is_not_appended_to(mirror, tmp_path):
    old, new = _blob(1_000_000, 2), _blob(1_000_000, 3)
    mirror.add_file(URL, old)
    mirror.fault("file.bin", "drop", after=400_000)
    with pytest.raises(fetch.DownloadError):
        fetch.download(URL, tmp_path / "f.bin", settings=fetch.Settings(1.0, 0, 0.0))
    mirror.add_file(URL, new)  # the server's validator changed: If-Range makes it answer the whole new file
    fetch.download(URL, tmp_path / "f.bin", settings=FAST)
    assert (tmp_path / "f.bin").read_bytes() == new and mirror.gets("file.bin")[-1].status == 200


def test_content_changed_upstream_is_refused_and_nothing_installed(mirror, tmp_path):
    pinned = hashlib.sha256(b"the pinned content").hexdigest()
    mirror.add_file(URL, b"something else")
    with pytest.raises(fetch.DownloadError) as info:
        fetch.download(URL, tmp_path / "f.bin", sha256=pinned, settings=FAST)
    assert "pinned" in info.value.reason and "nothing was installed" in info.value.reason
    assert [p.name for p in tmp_path.iterdir()] == [".f.bin.lock"]


@pytest.mark.parametrize("code, tries", [(404, 1), (500, 3)])
def test_http_errors_name_the_url(mirror, tmp_path, code, tries):
    mirror.add_file(URL, b"data")
    mirror.fault("file.bin", "status", code=code, times=10)
    with pytest.raises(fetch.DownloadError) as info:
        fetch.download(URL, tmp_path / "f.bin", settings=FAST)
    asked = mirror.url + "/raw.githubusercontent.com/org/repo/0123456789abcdef/data/file.bin"
    assert info.value.url == asked and asked in info.value.message and f"HTTP {code}" in info.value.reason
    assert len(mirror.gets("file.bin")) == tries  # a 404 is final; a 500 is retried
    assert not (tmp_path / "f.bin").exists()


def test_a_stalled_server_ends_in_a_timeout_message(mirror, tmp_path):
    mirror.add_file(URL, _blob(100_000))
    mirror.fault("file.bin", "stall", after=1000, seconds=20, times=10)
    start = time.monotonic()
    with pytest.raises(fetch.DownloadError) as info:
        fetch.download(URL, tmp_path / "f.bin", settings=fetch.Settings(timeout=0.5, retries=1, backoff=0.01))
    assert time.monotonic() - start < 10
    assert "timed out" in info.value.reason and "VLBENCH_DOWNLOAD_TIMEOUT" in info.value.hint


def test_the_mirror_setting_is_used_for_every_file(mirror, tmp_path, monkeypatch):
    other = "https://example.org/pub/other.txt"
    mirror.add_file(URL, b"one")
    mirror.add_file(other, b"two")
    assert fetch.fetch_bytes(URL) == b"one" and fetch.fetch_bytes(other) == b"two"
    assert [r.path for r in mirror.gets()] == ["/raw.githubusercontent.com/org/repo/0123456789abcdef/data/file.bin",
                                               "/example.org/pub/other.txt"]
    monkeypatch.setenv("VLBENCH_MIRROR", f"https://raw.githubusercontent.com/org/={mirror.url}/gh/")
    assert fetch.mirrored(URL) == f"{mirror.url}/gh/repo/0123456789abcdef/data/file.bin"
    assert fetch.mirrored(other) == other  # a prefix rule rewrites only what it names
    monkeypatch.setenv("VLBENCH_MIRROR", "not-a-url")
    with pytest.raises(DataError, match="VLBENCH_MIRROR entry 'not-a-url'"):
        fetch.mirrored(URL)


def test_offline_mode_asks_nothing(mirror, tmp_path, monkeypatch):
    monkeypatch.setenv("VLBENCH_OFFLINE", "1")
    with pytest.raises(fetch.DownloadError, match="offline mode is on"):
        fetch.download(URL, tmp_path / "f.bin")
    assert mirror.log == []


FULL_DISK = """
import resource, signal, sys
from vlbench.util import fetch
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # past the limit a write fails with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (300_000, 300_000))
try:
    fetch.download(sys.argv[1], sys.argv[2], settings=fetch.Settings(2.0, 0, 0.0))
except fetch.DataError as exc:
    print(exc.message)
    sys.exit(2)
"""


@pytest.mark.slow  # a subprocess (the file-size limit must not bind pytest itself)
def test_a_full_disk_leaves_nothing_half_installed(mirror, tmp_path):
    data = _blob(1_000_000, 4)
    mirror.add_file(URL, data)
    dest = tmp_path / "f.bin"
    done = subprocess.run([sys.executable, "-c", FULL_DISK, URL, str(dest)], capture_output=True, text=True,
                          env=dict(os.environ), timeout=120)
    assert done.returncode == 2, done.stderr
    assert "failed" in done.stdout and "nothing was installed" in done.stdout and "Traceback" not in done.stderr
    assert not dest.exists() and (tmp_path / ".f.bin.part").stat().st_size <= 300_000
    fetch.download(URL, dest, sha256=hashlib.sha256(data).hexdigest(), settings=FAST)  # space again: it resumes
    assert dest.read_bytes() == data and mirror.gets("file.bin")[-1].status == 206


def test_a_host_that_does_not_resolve_fails_at_once_naming_the_url(tmp_path, monkeypatch):
    import socket

    for var in ("VLBENCH_OFFLINE", "HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLBENCH_MIRROR", "https_proxy",
                "HTTPS_PROXY", "http_proxy", "HTTP_PROXY"):
        monkeypatch.delenv(var, raising=False)
    asked = []

    def no_dns(host, *args, **kwargs):  # the resolver, at the OS boundary: this machine has no DNS to ask
        asked.append(host)
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")

    monkeypatch.setattr(socket, "getaddrinfo", no_dns)
    url = "https://no-such-host.invalid/data/file.bin"
    with pytest.raises(fetch.DownloadError) as info:
        fetch.download(url, tmp_path / "f.bin", settings=fetch.Settings(timeout=5.0, retries=3, backoff=30.0))
    assert asked == ["no-such-host.invalid"]  # asked once: not retried with backoff
    assert info.value.url == url and "cannot be resolved" in info.value.reason
