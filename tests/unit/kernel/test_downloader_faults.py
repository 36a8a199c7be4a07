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


# -- writes outside the folder, bounds, local errors, settings ------------------------------------------------------

@pytest.mark.parametrize("link", [".f.bin.part", ".f.bin.part.json"])
def test_part_file_symlink_is_never_followed(mirror, tmp_path, link):
    data = _blob(300_000, 5)
    mirror.add_file(URL, data)
    outside = tmp_path / "outside.txt"
    outside.write_bytes(b"a user's file")
    folder = tmp_path / "data"
    folder.mkdir()
    (folder / link).symlink_to(outside)
    out = fetch.download(URL, folder / "f.bin", sha256=hashlib.sha256(data).hexdigest(), settings=FAST)
    assert outside.read_bytes() == b"a user's file"  # not written through the link
    assert not out.is_symlink() and out.read_bytes() == data  # installed as a plain file, not as the link
    assert not (folder / link).is_symlink()


def test_a_resume_whose_content_range_starts_elsewhere_restarts_from_zero(mirror, tmp_path):
    data = _blob(1_000_000, 6)
    mirror.add_file(URL, data)
    mirror.fault("file.bin", "drop", after=400_000)
    with pytest.raises(fetch.DownloadError):
        fetch.download(URL, tmp_path / "f.bin", settings=fetch.Settings(1.0, 0, 0.0))
    mirror.fault("file.bin", "shift", after=1000)  # 206 from byte 399,000 for a Range asking from 400,000
    fetch.download(URL, tmp_path / "f.bin", settings=FAST)
    assert (tmp_path / "f.bin").read_bytes() == data
    shifted, fresh = mirror.gets("file.bin")[1:]
    assert shifted.status == 206 and shifted.start == 399_000
    assert fresh.status == 200 and "Range" not in fresh.headers  # the bytes held were dropped, not appended to


def test_an_endless_body_for_a_pinned_size_stops_at_the_size_and_deletes_the_partial_file(mirror, tmp_path):
    data = _blob(100_000, 7)
    mirror.add_file(URL, data)
    mirror.fault("file.bin", "endless", after=64 << 20, times=10)
    with pytest.raises(fetch.DownloadError) as info:
        fetch.download(URL, tmp_path / "f.bin", sha256=hashlib.sha256(data).hexdigest(), size=len(data),
                       settings=FAST)
    assert "100,000" in info.value.reason and "nothing was installed" in info.value.reason
    assert [p.name for p in tmp_path.iterdir()] == [".f.bin.lock"]  # no partial file kept "to resume"
    assert len(mirror.gets("file.bin")) == 1  # refused at once: an endless body is not retried


def test_an_endless_body_without_a_pinned_size_stops_at_the_cap(mirror, tmp_path, monkeypatch):
    mirror.add_file(URL, _blob(10_000, 8))
    mirror.fault("file.bin", "endless", after=64 << 20)
    monkeypatch.setenv("VLBENCH_DOWNLOAD_MAX_BYTES", "2000000")
    with pytest.raises(fetch.DownloadError) as info:
        fetch.download(URL, tmp_path / "f.bin")
    assert "VLBENCH_DOWNLOAD_MAX_BYTES" in info.value.hint
    assert not (tmp_path / ".f.bin.part").exists() and not (tmp_path / "f.bin").exists()


def test_a_partial_file_larger_than_the_pinned_size_is_deleted_not_resumed(mirror, tmp_path):
    data = _blob(50_000, 9)
    mirror.add_file(URL, data)
    (tmp_path / ".f.bin.part").write_bytes(b"z" * 80_000)
    fetch.download(URL, tmp_path / "f.bin", sha256=hashlib.sha256(data).hexdigest(), size=len(data), settings=FAST)
    assert (tmp_path / "f.bin").read_bytes() == data and "Range" not in mirror.gets("file.bin")[0].headers


def test_a_local_write_problem_is_reported_as_local_not_as_the_network(mirror, tmp_path):
    mirror.add_file(URL, b"data")
    (tmp_path / ".f.bin.part").mkdir()  # something local in the way of the partial file
    with pytest.raises(fetch.LocalWriteError) as info:
        fetch.download(URL, tmp_path / "f.bin", settings=FAST)
    assert "network" not in info.value.message and "locally" in info.value.message


def test_an_html_page_served_for_a_text_file_is_refused(mirror, tmp_path):
    mirror.add_file(URL, b"\n<!DOCTYPE html>\n<html><head><title>Sign in</title></head><body>login</body></html>\n")
    with pytest.raises(fetch.DownloadError) as info:
        fetch.download(URL, tmp_path / "f.bin", settings=FAST, text=True)
    assert "HTML" in info.value.reason and "proxy" in info.value.hint
    assert not (tmp_path / "f.bin").exists() and not (tmp_path / ".f.bin.part").exists()
    mirror.add_file(URL, b'{"image": "a.jpg"}\n')
    assert fetch.download(URL, tmp_path / "f.bin", settings=FAST, text=True).read_bytes() == b'{"image": "a.jpg"}\n'


def test_a_file_installed_by_another_process_meanwhile_is_checked_not_fetched_again(mirror, tmp_path):
    data = b"already here"
    mirror.add_file(URL, data)
    (tmp_path / "f.bin").write_bytes(data)
    fetch.download(URL, tmp_path / "f.bin", sha256=hashlib.sha256(data).hexdigest(), settings=FAST)
    assert mirror.gets("file.bin") == []
    (tmp_path / "f.bin").write_bytes(b"a wrong file")  # installed, but not what is pinned: fetched again
    fetch.download(URL, tmp_path / "f.bin", sha256=hashlib.sha256(data).hexdigest(), settings=FAST)
    assert (tmp_path / "f.bin").read_bytes() == data and len(mirror.gets("file.bin")) == 1


@pytest.mark.parametrize("var, raw", [("VLBENCH_DOWNLOAD_TIMEOUT", "nan"), ("VLBENCH_DOWNLOAD_TIMEOUT", "inf"),
                                      ("VLBENCH_DOWNLOAD_TIMEOUT", "-1"), ("VLBENCH_DOWNLOAD_TIMEOUT", "0"),
                                      ("VLBENCH_DOWNLOAD_BACKOFF", "nan"), ("VLBENCH_DOWNLOAD_RETRIES", "1e400"),
                                      ("VLBENCH_DOWNLOAD_RETRIES", "2.5"), ("VLBENCH_DOWNLOAD_MAX_BYTES", "0")])
def test_download_settings_that_are_not_usable_numbers_are_refused_naming_the_variable(monkeypatch, var, raw):
    monkeypatch.setenv(var, raw)
    with pytest.raises(DataError) as info:
        fetch.Settings.from_env()
    assert var in info.value.message


def test_the_backoff_of_thousands_of_retries_is_capped(monkeypatch):
    monkeypatch.setenv("VLBENCH_DOWNLOAD_RETRIES", "5000")
    monkeypatch.setenv("VLBENCH_DOWNLOAD_BACKOFF", "0")
    settings = fetch.Settings.from_env()
    assert settings.retries == 5000 and [fetch._backoff(settings, a) for a in (1, 1025, 5000)] == [0.0, 0.0, 0.0]
    slow = fetch.Settings(backoff=1.0, retries=5000)
    assert fetch._backoff(slow, 5000) == fetch.MAX_BACKOFF and fetch._backoff(slow, 3) == 4.0


@pytest.mark.parametrize("raw", ["http://[::1", "http://[::zz]/files", "http://host:99999/", "http://:80/"])
def test_a_malformed_mirror_url_is_an_error_naming_the_entry(monkeypatch, raw):
    monkeypatch.setenv("VLBENCH_MIRROR", raw)
    with pytest.raises(DataError) as info:
        fetch.mirrored(URL)
    assert repr(raw) in info.value.message and "VLBENCH_MIRROR" in info.value.message


@pytest.mark.parametrize("errno_name, words, fix", [("ENOSPC", "the disk is full", "free space"),
                                                     ("EACCES", "Permission denied", "writable")])
def test_a_full_disk_or_a_folder_without_permission_is_a_local_error(mirror, tmp_path, monkeypatch, errno_name,
                                                                    words, fix):
    import errno

    mirror.add_file(URL, _blob(200_000, 10))
    real_open = os.open

    def local_fault(path, flags, *args, **kw):  # the OS boundary: the partial file's disk is full / not ours
        if str(path).endswith(".part"):
            if errno_name == "EACCES":
                raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
            return real_open("/dev/full", os.O_WRONLY)  # every write fails with ENOSPC
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", local_fault)
    with pytest.raises(fetch.LocalWriteError) as info:
        fetch.download(URL, tmp_path / "f.bin", settings=FAST)
    assert words in info.value.message and fix in info.value.hint
    assert "network" not in info.value.message + info.value.hint and not (tmp_path / "f.bin").exists()
    assert len(mirror.gets("file.bin")) == 1  # a local problem is not retried as if the connection had failed
