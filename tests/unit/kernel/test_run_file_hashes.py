"""vlbench.runfolder's file hashes: a run file is handed to a reader only when it is the one
the run wrote, by its sha256 and size in results.json ``files``; every other case is refused by name."""

from __future__ import annotations

import os

import pytest

from vlbench.errors import VlbenchError
from vlbench.runfolder import FILES, FLIPS, PER_QUERY, RETRIEVED, file_manifest, per_query_file, run_file


@pytest.fixture
def folder(tmp_path):
    (tmp_path / PER_QUERY).write_bytes(b"per query values")
    (tmp_path / FLIPS).write_text("condition,direction\n")
    (tmp_path / "table.md").write_text("not hashed")
    return tmp_path


def test_the_manifest_lists_the_hashed_files_the_run_wrote(folder):
    import hashlib

    doc = {FILES: file_manifest(folder)}
    assert set(doc[FILES]) == {PER_QUERY, FLIPS}  # table.md is read by no command
    assert doc[FILES][PER_QUERY] == {"sha256": hashlib.sha256(b"per query values").hexdigest(), "bytes": 16}
    assert run_file(folder, doc, PER_QUERY) == folder / PER_QUERY
    assert run_file(folder, doc, RETRIEVED) is None  # not written, not there: none
    assert per_query_file(folder, {**doc, "per_query": PER_QUERY}) == folder / PER_QUERY


def test_every_file_that_is_not_the_runs_own_is_refused_by_name(folder, tmp_path_factory):
    doc = {FILES: file_manifest(folder)}
    (folder / PER_QUERY).write_bytes(b"per query VALUES")  # same size, other bytes
    with pytest.raises(VlbenchError, match=f"{PER_QUERY} is not the file run .* wrote: its sha256 differs"):
        run_file(folder, doc, PER_QUERY)
    (folder / RETRIEVED).write_bytes(b"copied in")
    with pytest.raises(VlbenchError, match=f"{RETRIEVED} is not a file run .* wrote .*copied in from elsewhere"):
        run_file(folder, doc, RETRIEVED)
    (folder / FLIPS).unlink()
    with pytest.raises(VlbenchError, match=f"has no {FLIPS} \\(its results.json lists it"):
        run_file(folder, doc, FLIPS)
    elsewhere = tmp_path_factory.mktemp("elsewhere") / FLIPS
    elsewhere.write_text("condition,direction\n")
    os.symlink(elsewhere, folder / FLIPS)  # same bytes, but a link out of the folder
    with pytest.raises(VlbenchError, match=f"{FLIPS} is a link, not the file run"):
        run_file(folder, doc, FLIPS)


@pytest.mark.parametrize("named", ["/etc/passwd", "../other/per_query.csv.gz", "sub/per_query.csv.gz", 5])
def test_a_per_query_name_is_never_followed_as_a_path(folder, named):
    with pytest.raises(VlbenchError, match="a run keeps it as per_query.csv.gz inside its own folder"):
        per_query_file(folder, {FILES: file_manifest(folder), "per_query": named})


@pytest.mark.parametrize("files, message", [
    (None, "has no file hashes in its results.json"),
    ([], "are malformed"),
    ({PER_QUERY: {"sha256": "../x", "bytes": 1}}, "are malformed"),
    ({"../results.json": {"sha256": "0" * 64, "bytes": 1}}, "are malformed"),
])
def test_runs_without_or_with_malformed_hashes_are_refused_with_the_rerun(folder, files, message):
    doc = {} if files is None else {FILES: files}
    with pytest.raises(VlbenchError, match=message) as e:
        run_file(folder, doc, PER_QUERY)
    assert "re-run the same 'vlbench run' command" in e.value.hint
