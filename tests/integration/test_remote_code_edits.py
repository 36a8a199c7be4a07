"""A `remote:` checkpoint whose code lives in another folder (auto_map ``FOLDER--module.Class``): a run records
that code (folder, content commit, files with their sha256), a second run reuses the cached vectors, and after
the code file is edited the next run has another model hash and encodes every image and caption again."""

from __future__ import annotations

import hashlib
import json

import pytest
from support.tiny_remote import move_code, save_remote

from vlbench import cli
from vlbench.results import RunRecord, UnreadableResults, record_hash


def _run(folder, manifest, out) -> dict:
    assert cli.main(["run", "--model", f"remote:{folder}", "--dataset", f"custom:{manifest}", "--quiet",
                     "--num-workers", "0", "--trust-remote-code", "--out", str(out)]) == 0
    doc = json.loads((out / "results.json").read_text())
    assert doc["record_hash"] == record_hash(doc) and RunRecord.load(out).sealed  # the identity is sealed in
    return doc


def test_editing_code_in_another_folder_re_encodes(tmp_path, manifest):
    folder, code = save_remote(tmp_path / "ckpt"), tmp_path / "code"
    move_code(folder, str(code), code)
    first = _run(folder, manifest, tmp_path / "r1")
    (src,) = first["model"]["identity"]["code_sources"]
    module = code / "modeling_tinydual.py"
    assert src["folder"] == str(code) and src["modules"] == ["configuration_tinydual.py", "modeling_tinydual.py"]
    assert src["files"]["modeling_tinydual.py"] == hashlib.sha256(module.read_bytes()).hexdigest()
    assert first["encoding"]["images_encoded"] == 12 and first["encoding"]["texts_encoded"] > 0

    warm = _run(folder, manifest, tmp_path / "r2")  # nothing changed: every vector from the cache
    assert warm["model"]["hash"] == first["model"]["hash"]
    assert warm["encoding"]["images_encoded"] == 0 and warm["encoding"]["texts_encoded"] == 0

    text = module.read_text()  # another version of the code: image features rotated, texts shifted
    module.write_text(text.replace("return self.pixels(pixel_values.flatten(1))",
                                   "return self.pixels(pixel_values.flatten(1)).flip(-1)")
                          .replace("return (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True)",
                                   "return (h * mask[..., None]).sum(1) / mask.sum(1, keepdim=True) + 0.01"))
    edited = _run(folder, manifest, tmp_path / "r3")
    assert edited["model"]["hash"] != first["model"]["hash"]
    assert edited["model"]["identity"]["code_sources"][0]["commit"] != src["commit"]
    assert edited["encoding"]["images_encoded"] == 12 and edited["encoding"]["texts_encoded"] > 0
    assert edited["encoding"]["images_cached"] == 0

    forged = dict(edited, model=dict(edited["model"], identity=first["model"]["identity"]))  # the old code's entry
    (tmp_path / "r3" / "results.json").write_text(json.dumps(forged))
    with pytest.raises(UnreadableResults, match="record_hash does not match"):
        RunRecord.load(tmp_path / "r3")
