"""Model loading: identity, hashing, errors, truncation by tokens, plug-ins."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import numpy as np
import pytest
from support.data import ROOT

from vlbench.errors import ModelError, UnknownNameError, VlbenchError
from vlbench.models.adapter import load_model


def test_unknown_model_name_has_close_matches():
    with pytest.raises(UnknownNameError) as err:
        load_model("clipp")
    assert "'clip'" in str(err.value)


def test_uncached_hub_id_offline_fails_fast_with_instructions(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    t = time.time()
    with pytest.raises(ModelError) as err:
        load_model("clip:openai/clip-vit-base-patch32", device="cpu")
    assert time.time() - t < 20
    msg = str(err.value)
    assert "openai/clip-vit-base-patch32" in msg and "not in the local Hugging Face cache" in msg
    assert "hf download" in msg or "local folder" in msg


def test_unknown_openclip_arch_has_close_matches():
    with pytest.raises(ModelError, match="ViT-B-32"):
        load_model("openclip:ViT-B-33/openai", device="cpu")


@pytest.mark.slow  # builds a second tiny CLIP and loads one in bf16 (~1.5 s CPU)
def test_checkpoint_and_precision_change_the_model_hash(tiny_models):
    a = load_model(f"clip:{tiny_models('clip', 0)}", device="cpu")
    b = load_model(f"clip:{tiny_models('clip', 1)}", device="cpu")
    c = load_model(f"clip:{tiny_models('clip', 0)}", device="cpu", precision="bf16")
    assert len({a.model_hash(), b.model_hash(), c.model_hash()}) == 3
    assert a.model_hash() == load_model(f"clip:{tiny_models('clip', 0)}", device="cpu").model_hash()


def test_fp16_on_cpu_is_refused_with_a_fix():
    with pytest.raises(VlbenchError, match="bf16"):
        load_model("clip", device="cpu", precision="fp16")


# building the tiny GroupViT costs ~1.2 s of CPU, the others ~0.2 s: GroupViT's case runs in the full suite
@pytest.mark.parametrize("family", ["clip", "align", "altclip", pytest.param("groupvit", marks=pytest.mark.slow),
                                    "openclip"])
def test_long_captions_are_truncated_by_tokens(tiny_models, family):
    m = load_model(f"{family}:{tiny_models(family)}", device="cpu")
    long = "a dog runs across the green field " * 100
    longer = long + "and a cat"
    emb = m.encode_texts([long, longer])
    # same first N tokens -> same model input -> same vector; the key records the truncated input
    assert m.text_keys([long]) == m.text_keys([longer])
    assert np.allclose(np.asarray(emb[0].detach()), np.asarray(emb[1].detach()), atol=1e-5)


@pytest.mark.slow  # pip-installs the plug-in package, runs a subprocess
def test_plugin_installed_for_real_is_discovered(plugin_env, tmp_path, manifest):
    """The example plug-in package, pip-installed for real, found through its entry point."""
    env = plugin_env
    ls = subprocess.run([sys.executable, "-m", "vlbench", "ls", "models"], capture_output=True, text=True, env=env,
                        cwd=tmp_path, timeout=120)
    assert ls.returncode == 0, ls.stderr
    assert "counting" in ls.stdout and "vlbench-counting-plugin 0.3.0" in ls.stdout
    out = tmp_path / "run"
    run = subprocess.run([sys.executable, "-m", "vlbench", "run", "--model", "counting:dim=16", "--dataset",
                          f"custom:{manifest}", "--out", str(out), "--quiet", "--num-workers", "0"],
                         capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
    assert run.returncode == 0, run.stderr
    import json

    res = json.loads((out / "results.json").read_text())
    assert res["environment"]["plugins"]["models/counting"] == "vlbench-counting-plugin 0.3.0"
    # autoloading can be switched off
    off = subprocess.run([sys.executable, "-m", "vlbench", "ls", "models"], capture_output=True, text=True,
                         env=dict(env, VLBENCH_DISABLE_PLUGIN_AUTOLOAD="1"), cwd=tmp_path, timeout=120)
    assert "counting" not in off.stdout


def test_broken_plugin_fails_only_when_selected(monkeypatch):
    from vlbench import registry

    reg = registry.Registry("models")
    reg.register("good", lambda *a, **k: None)
    reg._plugins_loaded = True
    reg._entries["broken"] = registry.Entry("broken", "no_such_module_xyz:load", source="plugin:broken 1.0")
    assert reg.names() == ["broken", "good"]
    with pytest.raises(VlbenchError, match="plugin:broken 1.0.*failed to load"):
        reg.get("broken")
    assert reg.get("good") is not None


def test_plugin_entry_points_monkeypatched(monkeypatch):
    """Discovery through importlib.metadata.entry_points, with built-ins winning clashes."""
    import importlib.metadata as md

    from vlbench import registry

    class EP:
        def __init__(self, name, value):
            self.name, self.value, self.dist = name, value, None

    def fake(group=None):
        return [EP("clip", "evil:load"), EP("my-model", "pkg:load")] if group == "vlbench.models" else []

    monkeypatch.setattr(md, "entry_points", fake)
    reg = registry.Registry("models")
    reg.register("clip", "vlbench.models.hf:load_clip")
    assert "my-model" in reg.names()
    assert reg.entry("clip").source == "builtin"
    assert "clip" in reg.plugin_errors


def test_model_that_fails_to_load(counting_plugin):
    with pytest.raises(ModelError, match="broken on purpose"):
        load_model("counting:fail")


def _missing_real_weights_or_data(repo: str, datasets: tuple[str, ...]) -> str | None:
    """Why the real-weights test cannot run here (weights not in the local Hub cache, a dataset's captions or images
    not on disk), or None. Only these named conditions skip: any other error while loading is a failure."""
    from huggingface_hub import try_to_load_from_cache

    from vlbench.datasets.core import check_images, load_dataset
    from vlbench.errors import DataError

    if not isinstance(try_to_load_from_cache(repo, "config.json"), str):
        return f"the weights of {repo} are not in the local Hugging Face cache (hf download {repo})"
    for name in datasets:
        try:  # DataError is how vlbench says a dataset's files are not where it looks: the named condition
            check_images(load_dataset(name, require_images=False, download=False))
        except DataError as exc:
            return f"the {name} captions or images are not on this machine: {exc.message[:200]}"
    return None


def test_only_a_missing_model_or_dataset_skips_the_real_weights_test(monkeypatch):
    """The real-weights test skips when the weights or data are not here, and for nothing else: an error of
    another kind while checking (a bug) propagates instead of turning into a skip."""
    import huggingface_hub

    from vlbench.datasets import core

    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, name: None)
    assert "not in the local Hugging Face cache" in _missing_real_weights_or_data("org/m", ("flickr30k",))
    monkeypatch.setattr(huggingface_hub, "try_to_load_from_cache", lambda repo, name: "/x/config.json")

    def absent(name, **kw):
        raise core.DataError(f"caption file for {name!r} is not here", "download it")

    monkeypatch.setattr(core, "load_dataset", absent)
    assert "flickr30k captions or images" in _missing_real_weights_or_data("org/m", ("flickr30k",))

    def broken(name, **kw):
        raise ZeroDivisionError("a bug, not missing data")

    monkeypatch.setattr(core, "load_dataset", broken)
    with pytest.raises(ZeroDivisionError):
        _missing_real_weights_or_data("org/m", ("flickr30k",))


@pytest.mark.weights
def test_reference_numbers_with_real_weights():
    """protocols_and_metrics.md section 7: CLIP ViT-B/32 (OpenAI) zero-shot on Flickr30k 1k and COCO 5k."""
    from vlbench.pipeline.runner import run

    missing = _missing_real_weights_or_data("openai/clip-vit-base-patch32", ("flickr30k", "coco"))
    if missing:
        pytest.skip(missing)
    expected = {"flickr30k": {("t2i", 1): 58.78, ("t2i", 5): 83.56, ("t2i", 10): 90.02, ("i2t", 1): 78.90,
                              ("i2t", 5): 94.90, ("i2t", 10): 98.20},
                "coco": {("t2i", 1): 30.44, ("t2i", 5): 55.94, ("t2i", 10): 66.87, ("i2t", 1): 50.12,
                         ("i2t", 5): 75.00, ("i2t", 10): 83.52}}
    for ds, exp in expected.items():
        res = run(model="clip:openai/clip-vit-base-patch32", dataset=ds, quiet=True)
        vals = {(r["direction"], r["k"]): r["value"] for r in res.results["results"] if r["metric"] == "recall"}
        for key, v in exp.items():
            assert vals[key] == pytest.approx(v, abs=0.6), (ds, key)


def test_help_and_ls_do_not_import_torch():
    code = ("import sys, io, contextlib\n"
            "from vlbench.cli import main\n"
            "with contextlib.redirect_stdout(io.StringIO()):\n"
            "    main(['ls'])\n"
            "    try:\n"
            "        main(['--help'])\n"
            "    except SystemExit:\n"
            "        pass\n"
            "print(sorted(m for m in ('torch', 'transformers', 'spacy', 'open_clip', 'nltk') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_openclip_keys_keep_token_zero(tiny_models):
    """In CLIP's vocabulary id 0 is '!': it must not be confused with padding in the text keys."""
    m = load_model(f"openclip:{tiny_models('openclip')}", device="cpu")
    a, b = m.text_keys(['he said "stop!".', 'he said "stop".'])
    assert a != b
    assert len(set(m.text_keys(['a dog !"!', 'a dog "!']))) == 2


def test_openclip_custom_text_tower_embed_dim(tiny_models):
    """The identity gave embed_dim 0 for CustomTextCLIP (operator precedence bug); both
    open_clip model classes of the tiny fixtures have a 16-d joint space (embed_dim=16 in their config)."""
    import open_clip

    custom = load_model(f"openclip:{tiny_models('openclip_custom_text', 0)}", device="cpu")
    plain = load_model(f"openclip:{tiny_models('openclip', 0)}", device="cpu")
    assert isinstance(custom.model, open_clip.CustomTextCLIP)
    assert not isinstance(plain.model, open_clip.CustomTextCLIP)
    assert custom.identity()["embed_dim"] == 16
    assert plain.identity()["embed_dim"] == 16
    assert custom.encode_texts(["a dog"]).shape[-1] == 16


def test_same_size_same_mtime_weights_get_a_new_fingerprint(tmp_path, monkeypatch):
    """Replacing weights by a same-size file with the old mtime must change the hash."""
    from vlbench.models.adapter import _dir_fingerprint

    monkeypatch.setenv("VLBENCH_CACHE_DIR", str(tmp_path / "cache"))
    ck = tmp_path / "ck"
    ck.mkdir()
    w = ck / "weights.bin"
    w.write_bytes(b"A" * 4096)
    st = os.stat(w)
    first = _dir_fingerprint(ck)
    assert first == _dir_fingerprint(ck)  # memo hit, same answer
    time.sleep(0.01)
    w.write_bytes(b"B" * 4096)  # same size ...
    os.utime(w, ns=(st.st_atime_ns, st.st_mtime_ns))  # ... and the old mtime
    assert os.stat(w).st_size == st.st_size and os.stat(w).st_mtime_ns == st.st_mtime_ns
    assert _dir_fingerprint(ck) != first


def test_model_identity_is_typed_frozen_and_hash_compatible(tiny_models):
    import dataclasses
    import hashlib
    import json

    from vlbench.models.adapter import EMBED_CODE_VERSION

    m = load_model(f"clip:{tiny_models('clip', 0)}", device="cpu")
    ident = m.model_identity()
    assert ident.precision == "fp32" and ident.embed_dim == 16 and ident.to_dict() == m.identity()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ident.precision = "bf16"
    # the hash of the dict form as before the typed identity: cached vectors stay valid
    old = hashlib.sha256(json.dumps(dict(m.identity(), embed_code_version=EMBED_CODE_VERSION), sort_keys=True,
                                    default=str).encode()).hexdigest()
    assert m.model_hash() == old and hash(ident) == hash(m.model_identity())
