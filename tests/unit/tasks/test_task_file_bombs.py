"""Bombs in task files: a line far longer than any released file holds, and an ARO box far larger than any image;
each is a clear DataError naming the file and the line (or the item), not a process killed for memory or a PIL
traceback."""

from __future__ import annotations

import json
import tracemalloc

import pytest
from support.aro_mmvp import aro_row

import vlbench.tasks.sources as sources
from vlbench.errors import DataError
from vlbench.tasks.sets.aro_vg import read_aro_file
from vlbench.tasks.sets.colorswap import read_colorswap_json
from vlbench.tasks.sets.mmvp import read_mmvp_file
from vlbench.tasks.sets.sugarcrepe_pp import read_scpp_file
from vlbench.tasks.sets.whatsup import read_whatsup_file
from vlbench.tasks.sets.winoground import read_winoground_file
from vlbench.tasks.sources import read_sugarcrepe_file, read_task_text

SMALL = 4096  # the bound the reader tests use (the real one is 64 MiB; one test below uses it)


def _long_line_file(path, lines_before: int = 2):
    """A file of short lines, then one line longer than SMALL bytes, then a short one."""
    path.write_bytes(b"{}\n" * lines_before + b"[" + b"1," * SMALL + b"1]\n{}\n")
    return path


READERS = [
    ("Winoground file", "examples.jsonl", read_winoground_file),
    ("SugarCrepe file", "swap_obj.json", read_sugarcrepe_file),
    ("SugarCrepe++ file", "swap_obj.json", lambda p: read_scpp_file(p, "swap_obj")),
    ("What'sUp file", "controlled_images_dataset.json", lambda p: read_whatsup_file(p, "controlled_a")),
    ("ARO file", "visual_genome_relation.json", lambda p: read_aro_file(p, "vg_relation")),
    ("ColorSwap file", "test.json", read_colorswap_json),
    ("MMVP-VLM file", "Questions.csv", read_mmvp_file),
]


@pytest.mark.parametrize("what, name, read", READERS, ids=[r[0] for r in READERS])
def test_every_task_file_reader_refuses_an_overlong_line_naming_the_file_and_line(tmp_path, monkeypatch, what, name,
                                                                                  read):
    monkeypatch.setattr(sources, "MAX_LINE_BYTES", SMALL)
    path = _long_line_file(tmp_path / name)
    with pytest.raises(DataError) as err:
        read(path)
    assert err.value.message.startswith(f"{what} {path} line 3 is longer than {SMALL:,} bytes")
    assert err.value.hint


def test_a_line_at_the_bound_is_read_whole(tmp_path, monkeypatch):
    monkeypatch.setattr(sources, "MAX_LINE_BYTES", SMALL)
    path = tmp_path / "f.jsonl"
    line = b"x" * (SMALL - 1) + b"\n"  # SMALL bytes with its newline
    path.write_bytes(line + line[:-1])  # the last line without a newline
    assert read_task_text(path, "task file", "fix") == (line + line[:-1]).decode()


def test_a_240_mb_line_is_refused_holding_no_more_than_the_bound_in_memory(tmp_path):
    path = tmp_path / "examples.jsonl"
    with open(path, "wb") as f:
        f.write(b'{"id": 0, "caption_0": "')
        block = b"a" * (16 << 20)
        for _ in range(15):  # 240 MiB on one line
            f.write(block)
        f.write(b'"}\n')
    tracemalloc.start()
    try:
        with pytest.raises(DataError) as err:
            read_winoground_file(path)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert f"{path} line 1 is longer than {sources.MAX_LINE_BYTES:,} bytes" in err.value.message
    # at most the bound and the reader's buffer (136 MB measured), never the 240 MiB line (it was: 2.7 GB, an abort)
    assert peak < 3 * sources.MAX_LINE_BYTES < 240 << 20


def test_a_non_utf8_task_file_names_the_byte_and_offset(tmp_path):
    path = tmp_path / "examples.jsonl"
    path.write_bytes(b'{"caption_0": "caf\xe9"}\n')
    with pytest.raises(DataError) as err:
        read_winoground_file(path)
    assert err.value.message == f"Winoground file {path} is not UTF-8 text (byte 0xe9 at offset 18)"


def test_an_aro_box_of_200000_by_200000_pixels_is_refused_naming_the_item(tmp_path):
    rows = [aro_row("1.jpg", (0, 0, 4, 4), "a b", "b a", "on"), aro_row("2.jpg", (0, 0, 200_000, 200_000), "a b",
                                                                        "b a", "on")]
    path = tmp_path / "visual_genome_relation.json"
    path.write_text(json.dumps(rows))
    with pytest.raises(DataError) as err:
        read_aro_file(path, "vg_relation")
    assert err.value.message.startswith(f"ARO file {path} item 1: its box is 200000 x 200000 pixels")
    assert "MAX_IMAGE_PIXELS" in err.value.message and "bbox_w" in err.value.hint


def test_an_aro_box_under_the_decoding_limit_is_accepted(tmp_path):
    path = tmp_path / "visual_genome_relation.json"
    path.write_text(json.dumps([aro_row("1.jpg", (5, 5, 9000, 9000), "a b", "b a", "on")]))  # 81 Mpx < 89.5 Mpx
    assert [it.box for it in read_aro_file(path, "vg_relation")] == [(5, 5, 9000, 9000)]
