"""The online path end to end against a local mirror (support/mirror.py): the Hub client (huggingface_hub, through
HF_ENDPOINT) and vlbench's own downloader (through VLBENCH_MIRROR) talk HTTP to a server on 127.0.0.1 holding tiny
models and dataset archives in the real repositories' layouts and the pinned GitHub files; every other host sits
behind a dead proxy, so nothing reaches huggingface.co. No download function is monkeypatched. Where a test
serves its own image archive it replaces the archive's pinned digest (data, not code) with the archive's own."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
from pathlib import Path

import pytest

from vlbench.errors import DataError

from support.data import ROOT, excerpt_rows, write_images
from support.mirror import caption_sources, image_archive

pytestmark = pytest.mark.slow  # subprocesses, model loads, a 50 MB transfer

FLICKR_REPO = "nlphuji/flickr_1k_test_image_text_retrieval"
FLICKR_ZIP = "images_flickr_1k_test.zip"

# runs vlbench's command line with the flickr30k archive's pin replaced by the digest the test serves
WITH_PIN = """
import sys, dataclasses
from vlbench.datasets import specs
specs.IMAGE_SOURCES["flickr30k"] = dataclasses.replace(specs.IMAGE_SOURCES["flickr30k"], sha256=sys.argv[1])
from vlbench.cli import main
sys.exit(main(sys.argv[2:]))
"""


def _vlbench(mirror, tmp_path, *args, pin: str | None = None, timeout: int = 600):
    env = mirror.env(hf_home=tmp_path / "hf-home")
    env["PYTHONPATH"] = f"{ROOT}{':' + env['PYTHONPATH'] if env.get('PYTHONPATH') else ''}"
    cmd = [sys.executable, "-c", WITH_PIN, pin, *args] if pin else [sys.executable, "-m", "vlbench", *args]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)


def _flickr_names(captions: Path) -> list[str]:
    return [json.loads(line)["image"] for line in (captions / "flickr30k_test.jsonl").read_text().splitlines()
            if line.strip()]


def _serve_flickr(mirror, captions: Path, pad_bytes: int = 0) -> bytes:
    for url, data in caption_sources(captions).items():
        mirror.add_file(url, data)
    archive = image_archive(_flickr_names(captions), "images_flickr_1k_test", pad_bytes=pad_bytes)
    mirror.add_dataset_repo(FLICKR_REPO, {FLICKR_ZIP: archive, "README.md": b"# test images\n"})
    return archive


def test_download_flickr30k_fetches_captions_and_images_from_the_mirror(mirror, shared_captions, tmp_path):
    archive = _serve_flickr(mirror, shared_captions)
    data = tmp_path / "data"
    done = _vlbench(mirror, tmp_path, "download", "flickr30k-fg", "--data-dir", str(data),
                    pin=hashlib.sha256(archive).hexdigest())
    assert done.returncode == 0, done.stderr
    for name in ("flickr30k_test.jsonl", "flickr30k_fg_test.jsonl"):
        assert (data / name).read_bytes() == (shared_captions / name).read_bytes()
    images = sorted(p.name for p in (data / "images" / "flickr30k").glob("*.jpg"))
    assert images == sorted(_flickr_names(shared_captions))
    assert mirror.gets(f"/datasets/{FLICKR_REPO}/resolve/main/{FLICKR_ZIP}")  # through the Hub client
    assert any(r.method == "HEAD" and FLICKR_ZIP in r.path for r in mirror.log)
    assert len(mirror.gets("raw.githubusercontent.com/multi30k")) == 6
    assert len(mirror.gets("raw.githubusercontent.com/cwj1412")) == 1
    # the archive sits in the Hub cache (HF_HOME), not in a scratch folder of vlbench's
    assert list((tmp_path / "hf-home" / "hub").glob(f"datasets--nlphuji--*/snapshots/*/{FLICKR_ZIP}"))
    before = len(mirror.gets())
    again = _vlbench(mirror, tmp_path, "download", "flickr30k-fg", "--data-dir", str(data),
                     pin=hashlib.sha256(archive).hexdigest())
    assert again.returncode == 0 and len(mirror.gets()) == before  # everything was there: nothing fetched


def test_an_archive_that_is_not_the_pinned_one_is_a_message_not_a_traceback(mirror, shared_captions, tmp_path):
    _serve_flickr(mirror, shared_captions)  # not the real archive: the built-in pin refuses it
    data = tmp_path / "data"
    done = _vlbench(mirror, tmp_path, "download", "flickr30k", "--data-dir", str(data))
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    assert "the image archive of 'flickr30k'" in done.stderr and "pinned b0fa9970cc1680a9" in done.stderr
    assert "nothing was unpacked" in done.stderr
    assert not list((data / "images" / "flickr30k").glob("*.jpg"))


def test_an_interrupted_50mb_archive_download_resumes(mirror, shared_captions, tmp_path, monkeypatch):
    """The connection drops at 35 of ~50 MB: the Hub client resumes with a Range request, and the mirror's log
    shows less than 60% of the file sent again."""
    import dataclasses

    from vlbench.datasets import specs
    from vlbench.datasets.builtin import download_dataset

    archive = _serve_flickr(mirror, shared_captions, pad_bytes=50_000_000)
    monkeypatch.setitem(specs.IMAGE_SOURCES, "flickr30k", dataclasses.replace(
        specs.IMAGE_SOURCES["flickr30k"], sha256=hashlib.sha256(archive).hexdigest()))
    mirror.fault(FLICKR_ZIP, "drop", after=35_000_000)
    download_dataset("flickr30k", tmp_path / "data")
    gets = mirror.gets(FLICKR_ZIP)
    assert [g.status for g in gets] == [200, 206] and gets[0].sent == 35_000_000
    # the client keeps what it wrote (whole 10 MiB chunks) and asks for the rest
    assert gets[1].headers["Range"] == f"bytes={gets[1].start}-" and gets[1].start >= 30 << 20
    assert gets[1].sent == len(archive) - gets[1].start and gets[1].sent < 0.6 * len(archive)
    assert len(list((tmp_path / "data" / "images" / "flickr30k").glob("*.jpg"))) == 1000


def _tiny_manifest(folder: Path, n: int = 6) -> Path:
    names = write_images(folder / "images", n)
    rows = [{"image": f"images/{name}", "captions": r["captions"]} for name, r in zip(names, excerpt_rows(n))]
    (folder / "m.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    return folder / "m.jsonl"


def test_preflight_is_online_through_hf_endpoint_and_the_run_downloads_the_model(mirror, tiny_models, tmp_path):
    """HF_ENDPOINT at the mirror, no route to huggingface.co (a dead proxy): preflight reports online and
    `vlbench run --model clip:ORG/NAME` resolves the model through huggingface_hub from the mirror."""
    commit = mirror.add_model_repo("testorg/tiny-clip", tiny_models("clip"))
    manifest = _tiny_manifest(tmp_path / "d")
    done = _vlbench(mirror, tmp_path, "run", "--model", "clip:testorg/tiny-clip", "--dataset", f"custom:{manifest}",
                    "--out", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 0, done.stderr
    asked = {r.path for r in mirror.gets("/testorg/tiny-clip/resolve/")}
    assert mirror.gets("/api/models/testorg/tiny-clip")  # the revision is resolved through the Hub API
    assert {f"/testorg/tiny-clip/resolve/{commit}/{f}" for f in ("config.json", "model.safetensors")} <= asked
    snapshot = tmp_path / "hf-home" / "hub" / "models--testorg--tiny-clip" / "snapshots" / commit
    assert (snapshot / "model.safetensors").is_file()
    record = json.loads((tmp_path / "run" / "results.json").read_text())
    assert "testorg/tiny-clip" in json.dumps(record["model"])


def test_preflight_reports_online_when_only_the_configured_endpoint_answers(mirror, monkeypatch):
    from vlbench.models import hub

    hub.network_reachable.cache_clear()
    try:
        assert hub.probe_address() == ("127.0.0.1", int(mirror.url.rsplit(":", 1)[1]))
        assert hub.network_reachable() is True
        assert hub.hub_problem("testorg/not-cached", "--model clip:/path") is None
        monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
        assert hub.network_reachable() is False
        problem = hub.hub_problem("testorg/not-cached", "--model clip:/path")
        assert problem is not None and "127.0.0.1:9 does not answer" in problem.message
    finally:
        hub.network_reachable.cache_clear()


def _save_st(folder: Path) -> Path:
    import warnings

    from sentence_transformers import SentenceTransformer

    from support import tiny_models as T

    clip = T.save_clip(folder.parent / f"{folder.name}-clip", seed=3)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # its CLIPModel module is deprecated in favour of Transformer
        from sentence_transformers.models import CLIPModel

        SentenceTransformer(modules=[CLIPModel(str(clip))], device="cpu").save(str(folder))
    return folder


def _save_siglip(folder: Path) -> Path:
    from support.tiny_siglip import save_siglip

    return save_siglip(folder)


def _save_openclip(folder: Path) -> Path:
    from support.tiny_models import save_openclip

    return save_openclip(folder)


@pytest.mark.parametrize("spec, save, weights", [
    ("openclip:hf-hub:testorg/tiny-openclip", _save_openclip, "open_clip_pytorch_model.bin"),
    ("siglip:testorg/tiny-siglip", _save_siglip, "model.safetensors"),
    ("st:testorg/tiny-st", _save_st, "model.safetensors"),
])
def test_each_hub_family_is_resolved_through_the_mirror(mirror, tmp_path, spec, save, weights):
    repo = spec.split(":")[-1]
    mirror.add_model_repo(repo, save(tmp_path / "src" / repo.split("/")[1]))
    manifest = _tiny_manifest(tmp_path / "d")
    done = _vlbench(mirror, tmp_path, "run", "--model", spec, "--dataset", f"custom:{manifest}",
                    "--out", str(tmp_path / "run"), "--quiet")
    assert done.returncode == 0, done.stderr
    assert any(r.path.endswith(f"/{weights}") and r.status == 200 for r in mirror.gets(f"/{repo}/resolve/"))
    assert json.loads((tmp_path / "run" / "results.json").read_text())["results"]


def test_the_first_run_downloads_captions_images_and_model_from_the_mirror(mirror, shared_captions, tiny_models,
                                                                           tmp_path):
    archive = _serve_flickr(mirror, shared_captions)
    mirror.add_model_repo("testorg/tiny-clip", tiny_models("clip"))
    data = tmp_path / "data"
    done = _vlbench(mirror, tmp_path, "run", "--model", "clip:testorg/tiny-clip", "--dataset", "flickr30k",
                    "--data-dir", str(data), "--out", str(tmp_path / "run"), "--quiet",
                    pin=hashlib.sha256(archive).hexdigest())
    assert done.returncode == 0, done.stderr
    record = json.loads((tmp_path / "run" / "results.json").read_text())
    assert record["dataset"]["n_images"] == 1000
    assert mirror.gets(FLICKR_ZIP) and mirror.gets("multi30k") and mirror.gets("/testorg/tiny-clip/resolve/")


def _nltk_zip(folder: Path) -> bytes:
    import io
    import zipfile

    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for p in sorted(folder.rglob("*")):
            if p.is_file():
                zf.write(p, p.relative_to(folder.parent).as_posix())
    return buf.getvalue()


def test_setup_language_data_online_installs_nltk_data_from_the_mirror(mirror, tmp_path):
    """NLTK's index and package archives come through VLBENCH_MIRROR (nltk.download's own client refuses a
    mirror on a loopback or private address), checked against the index's checksums, installed as by --from."""
    from support.data import SHARED_NLTK
    from vlbench.langsetup import NLTK_INDEX

    if not (SHARED_NLTK / "tokenizers" / "punkt_tab").is_dir():
        pytest.skip(f"no NLTK tokenizer/tagger copy at {SHARED_NLTK}")
    base = NLTK_INDEX.rsplit("/", 1)[0] + "/packages"
    entries = []
    for sub, name in (("tokenizers", "punkt_tab"), ("taggers", "averaged_perceptron_tagger_eng")):
        data = _nltk_zip(SHARED_NLTK / sub / name)
        mirror.add_file(f"{base}/{sub}/{name}.zip", data)
        entries.append(f'<package id="{name}" name="{name}" subdir="{sub}" url="{base}/{sub}/{name}.zip" '
                       f'checksum="{hashlib.md5(data).hexdigest()}" sha256_checksum="{hashlib.sha256(data).hexdigest()}" '
                       f'size="{len(data)}" unzipped_size="0" unzip="1"/>')
    mirror.add_file(NLTK_INDEX, f"<?xml version='1.0'?><nltk_data><packages>{''.join(entries)}</packages>"
                                "<collections/></nltk_data>".encode())
    env_home = tmp_path / "home"
    env_home.mkdir()
    cache = tmp_path / "cache"
    env = mirror.env(hf_home=tmp_path / "hf-home")
    env.update({"HOME": str(env_home), "NLTK_DATA": "", "VLBENCH_CACHE_DIR": str(cache),
                "PYTHONPATH": f"{ROOT}{':' + env['PYTHONPATH'] if env.get('PYTHONPATH') else ''}"})
    done = subprocess.run([sys.executable, "-m", "vlbench", "setup-language-data"], env=env, capture_output=True,
                          text=True, timeout=600, cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert "downloaded into" in done.stdout
    store = cache / "nltk_data"
    assert (store / "tokenizers/punkt_tab/english/ortho_context.tab").read_bytes() == (
        SHARED_NLTK / "tokenizers/punkt_tab/english/ortho_context.tab").read_bytes()
    provenance = json.loads((store / "vlbench-language-data.json").read_text())
    assert provenance["punkt_tab"]["source"] == f"NLTK data index {mirror.url}/{NLTK_INDEX.split('://')[1]}"
    assert [r.path.rsplit("/", 1)[1] for r in mirror.gets()] == [
        "index.xml", "punkt_tab.zip", "averaged_perceptron_tagger_eng.zip"]


def test_sugarcrepe_and_sugarcrepe_pp_files_come_from_the_mirror(mirror, tmp_path):
    from support.data import SHARED_DATA
    from vlbench.tasks.sets import sugarcrepe as SC
    from vlbench.tasks.sets import sugarcrepe_pp as SCPP

    shared = SHARED_DATA / "sugarcrepe"
    if not (shared / "swap_obj.json").is_file():
        pytest.skip(f"no SugarCrepe copy at {shared}")
    body = (shared / "swap_obj.json").read_bytes()
    mirror.add_file(f"{SC.SUGARCREPE_RAW}/swap_obj.json", body)
    assert SC.sugarcrepe_root(tmp_path, ["swap_obj"]) == tmp_path / "sugarcrepe"
    assert (tmp_path / "sugarcrepe" / "swap_obj.json").read_bytes() == body
    mirror.add_file(f"{SC.SUGARCREPE_RAW}/swap_att.json", b'{"0": "changed upstream"}')
    with pytest.raises(DataError, match="pinned 7a7ce04e5c4c8041"):
        SC.sugarcrepe_root(tmp_path, ["swap_att"])
    assert not (tmp_path / "sugarcrepe" / "swap_att.json").exists()
    scpp = (ROOT / "tests" / "fixtures" / "sugarcrepe_pp" / "swap_obj.json").read_bytes()
    mirror.add_file(f"{SCPP.SCPP_RAW}/swap_obj.json", scpp)  # the fixture, not the pinned file: refused
    with pytest.raises(DataError, match="pinned 5f33cae824de431a"):
        SCPP.scpp_root(tmp_path, ["swap_obj"])
    assert not (tmp_path / "sugarcrepe_pp" / "swap_obj.json").exists()
    mirror.fault("replace_att.json", "status", code=404)
    with pytest.raises(DataError) as info:
        SCPP.scpp_root(tmp_path, ["replace_att"])
    assert "HTTP 404" in info.value.message
    assert [r.path for r in mirror.gets()] == [
        "/" + f"{SC.SUGARCREPE_RAW}/swap_obj.json".split("://")[1],
        "/" + f"{SC.SUGARCREPE_RAW}/swap_att.json".split("://")[1],
        "/" + f"{SCPP.SCPP_RAW}/swap_obj.json".split("://")[1],
        "/" + f"{SCPP.SCPP_RAW}/replace_att.json".split("://")[1]]
