"""`vlbench setup-language-data --from ARCHIVE` and the bounded extraction under it (vlbench/util/archive.py):
hostile archives, each refused with a message that names the archive (and the limit), not a traceback."""

from __future__ import annotations

import io
import os
import stat
import struct
import tarfile
import zipfile

import pytest

from vlbench import langsetup
from vlbench.cli import main
from vlbench.errors import DataError
from vlbench.util import archive as A


def _zip_declaring(path, declared: int, real: bytes = b"x" * 1000):
    """A small zip whose one member's headers declare ``declared`` uncompressed bytes."""
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("nltk_data/tokenizers/big.bin", real)
    raw = bytearray(path.read_bytes())
    local = raw.index(b"PK\x03\x04")
    struct.pack_into("<I", raw, local + 22, declared)
    central = raw.index(b"PK\x01\x02")
    struct.pack_into("<I", raw, central + 24, declared)
    path.write_bytes(bytes(raw))
    return path


def test_a_small_zip_declaring_1_gib_is_refused_naming_the_limit(tmp_path, capsys):
    bomb = _zip_declaring(tmp_path / "nltk_data.zip", 1 << 30)
    assert bomb.stat().st_size < 1_500_000
    with pytest.raises(DataError) as info:
        langsetup.install_from(bomb)
    assert f"more than {langsetup.MAX_LANGUAGE_DATA_BYTES:,} bytes" in info.value.message
    assert "punkt_tab" in info.value.hint  # which folders to archive instead
    assert main(["setup-language-data", "--from", str(bomb), "--cache-dir", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err and "more than 536,870,912 bytes" in err


def test_bytes_actually_extracted_are_counted_not_only_the_declared_sizes(tmp_path):
    src = tmp_path / "a.tar.gz"
    with tarfile.open(src, "w:gz") as tf:
        for i in range(3):
            data = bytes(600)
            info = tarfile.TarInfo(f"d/f{i}")
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    with pytest.raises(DataError, match="more than 1,000 bytes"):
        A.extract(src, tmp_path / "out", max_bytes=1000)
    A.extract(src, tmp_path / "ok", max_bytes=1800)
    assert sorted(p.name for p in (tmp_path / "ok" / "d").iterdir()) == ["f0", "f1", "f2"]


@pytest.mark.parametrize("name", ["nltk_data.zip", "nltk_data"])
def test_a_fifo_is_refused_without_blocking(tmp_path, name):
    fifo = tmp_path / name
    os.mkfifo(fifo)
    with pytest.raises(DataError, match="not a regular file"):
        langsetup.install_from(fifo)


def test_a_symlink_entry_is_a_clear_error(tmp_path):
    z = tmp_path / "links.zip"
    with zipfile.ZipFile(z, "w") as zf:
        info = zipfile.ZipInfo("nltk_data/tokenizers/punkt_tab")
        info.external_attr = (stat.S_IFLNK | 0o777) << 16
        zf.writestr(info, "/etc")
    with pytest.raises(DataError, match="holds a symbolic link 'nltk_data/tokenizers/punkt_tab'"):
        langsetup.install_from(z)
    t = tmp_path / "links.tar.gz"
    with tarfile.open(t, "w:gz") as tf:
        info = tarfile.TarInfo("nltk_data/taggers")
        info.type, info.linkname = tarfile.SYMTYPE, "/etc"
        tf.addfile(info)
    with pytest.raises(DataError, match="holds a symbolic link 'nltk_data/taggers'"):
        langsetup.install_from(t)


def test_a_damaged_member_is_named_not_a_traceback(tmp_path, capsys):
    z = tmp_path / "damaged.zip"
    payload = os.urandom(20_000).hex().encode()  # compressible, so the damage lands inside a deflate stream
    with zipfile.ZipFile(z, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("nltk_data/tokenizers/punkt_tab/english/collocations.tab", payload)
    raw = bytearray(z.read_bytes())
    start = raw.index(b"collocations.tab") + len("collocations.tab")
    for i in range(start + 200, start + 260):
        raw[i] ^= 0xFF
    z.write_bytes(bytes(raw))
    with pytest.raises(DataError) as info:
        langsetup.install_from(z)
    assert "damaged member 'nltk_data/tokenizers/punkt_tab/english/collocations.tab'" in info.value.message
    assert main(["setup-language-data", "--from", str(z), "--cache-dir", str(tmp_path / "c")]) == 2
    assert "Traceback" not in capsys.readouterr().err


def test_a_tar_device_entry_and_too_many_entries_are_refused(tmp_path):
    t = tmp_path / "dev.tar"
    with tarfile.open(t, "w") as tf:
        info = tarfile.TarInfo("nltk_data/zero")
        info.type = tarfile.CHRTYPE
        tf.addfile(info)
    with pytest.raises(DataError, match="not a regular file"):
        A.extract(t, tmp_path / "out")
    z = tmp_path / "many.zip"
    with zipfile.ZipFile(z, "w") as zf:
        for i in range(5):
            zf.writestr(f"f{i}", b"")
    with pytest.raises(DataError, match="5 entries, over the limit of 4"):
        A.extract(z, tmp_path / "out2", max_members=4)
