"""A model family is one record (vlbench/models/families.py): its fingerprint hook gives warm runs that load
no model, its preflight hook is asked before any work, its static facts are listed without torch; a plain
loader function (the plug-in API of before) keeps working, without a warm path."""

from __future__ import annotations

import subprocess
import sys

import pytest

from support.data import ROOT, read_counts
from vlbench.errors import ModelError


@pytest.fixture
def family_plugin(monkeypatch):
    """Register a plug-in model *family* (the toy counting model of tests/plugin_pkg, with hooks) in-process;
    returns a function that registers one built from keyword arguments and the list of loader calls."""
    import vlbench_counting_plugin as counting

    from vlbench import registry
    from vlbench.models.families import ModelFamily

    calls = []

    def loader(checkpoint=None, **kw):
        calls.append(checkpoint)
        return counting.load(checkpoint, **kw)

    def register(name="counting-family", **hooks):
        registry.models.names()  # built-ins first
        family = ModelFamily(name, loader, **hooks)
        monkeypatch.setitem(registry.models._entries, name, registry.Entry(name, family, "", "plugin:test 1.0"))
        return family

    register.calls = calls
    return register


def _run_twice(model, manifest, tmp_path, monkeypatch):
    from vlbench.pipeline.runner import run

    counts = tmp_path / "counts.jsonl"
    monkeypatch.setenv("VLBENCH_COUNT_FILE", str(counts))
    kw = dict(dataset=f"custom:{manifest}", quiet=True, num_workers=0, cache_dir=str(tmp_path / "cache"), n_boot=20,
              perturb="shuffle-all-words")
    cold = run(model=model, out=str(tmp_path / "cold"), **kw)
    after_cold = read_counts(counts)
    warm = run(model=model, out=str(tmp_path / "warm"), **kw)
    return cold, warm, after_cold, read_counts(counts)


@pytest.mark.slow  # a cold and a warm run
def test_plugin_family_with_a_fingerprint_hook_gets_a_warm_run_that_loads_no_model(family_plugin, manifest,
                                                                                  tmp_path, monkeypatch):
    family_plugin(fingerprint=lambda checkpoint, **kw: {"toy-version": 1}, default_checkpoint="dim=16")
    cold, warm, after_cold, after_warm = _run_twice("counting-family", manifest, tmp_path, monkeypatch)
    assert family_plugin.calls == ["dim=16"]  # loaded once, by the cold run (with the record's default)
    assert cold.results["encoding"]["model_loaded"] is True
    assert warm.results["encoding"]["model_loaded"] is False
    assert after_cold["images"] > 0 and after_warm == after_cold  # the warm run encoded nothing
    assert warm.results["results"] == cold.results["results"]
    assert warm.results["model"] == cold.results["model"]
    assert warm.results["model"]["identity"]["embed_dim"] == 16


@pytest.mark.slow  # a cold and a warm run
def test_plain_loader_plugin_keeps_working_without_the_warm_path(counting_plugin, manifest, tmp_path, monkeypatch):
    cold, warm, after_cold, after_warm = _run_twice(counting_plugin, manifest, tmp_path, monkeypatch)
    assert cold.results["encoding"]["model_loaded"] is True and warm.results["encoding"]["model_loaded"] is True
    assert after_warm == after_cold  # vectors still come from the embedding cache
    assert warm.results["results"] == cold.results["results"]


@pytest.mark.slow  # a cold and a warm run
def test_fingerprint_hook_returning_none_loads_the_model(family_plugin, manifest, tmp_path, monkeypatch):
    family_plugin(fingerprint=lambda checkpoint, **kw: None)
    _, warm, _, _ = _run_twice("counting-family", manifest, tmp_path, monkeypatch)
    assert warm.results["encoding"]["model_loaded"] is True and len(family_plugin.calls) == 2


def test_plugin_version_is_part_of_the_fingerprint(family_plugin, monkeypatch):
    from vlbench import registry
    from vlbench.models.lazy import fingerprint

    family = family_plugin(fingerprint=lambda checkpoint, **kw: {})
    kw = dict(precision="fp32", trust_remote_code=False, revision=None)
    first = fingerprint("counting-family", **kw)
    monkeypatch.setitem(registry.models._entries, "counting-family",
                        registry.Entry("counting-family", family, "", "plugin:test 2.0"))
    assert first and fingerprint("counting-family", **kw) not in (None, first)


def test_builtin_fingerprint_is_the_one_earlier_versions_computed(tiny_models):
    """Warm caches made before the family records stay warm: same key for a local checkpoint."""
    from vlbench.models.adapter import EMBED_CODE_VERSION, _dir_fingerprint
    from vlbench.models.lazy import fingerprint
    from vlbench.util.io import sha256_json

    folder = tiny_models("clip")
    old = sha256_json({"spec": f"clip:{folder}", "precision": "bf16", "trust_remote_code": False, "revision": None,
                       "embed_code": EMBED_CODE_VERSION, "local": _dir_fingerprint(folder)})
    assert fingerprint(f"clip:{folder}", precision="bf16", trust_remote_code=False, revision=None) == old


def test_failing_preflight_hook_stops_the_run_with_exit_2_naming_the_model(family_plugin, manifest, tmp_path,
                                                                             capsys):
    from vlbench.cli import main

    seen = []

    def preflight(checkpoint, **kw):
        seen.append(checkpoint)
        return [ModelError(f"weights file for {checkpoint!r} is missing", "run 'toy-download' first")]

    family_plugin(preflight=preflight)
    code = main(["run", "--model", "counting-family:dim=8", "--dataset", f"custom:{manifest}", "--quiet",
                 "--out", str(tmp_path / "o"), "--num-workers", "0"])
    err = capsys.readouterr().err
    assert code == 2, err
    assert seen == ["dim=8"]
    assert "model 'counting-family:dim=8'" in err and "weights file for 'dim=8' is missing" in err
    assert "toy-download" in err
    assert family_plugin.calls == [] and not (tmp_path / "o").exists()  # stopped before loading or writing


def test_preflight_hook_that_crashes_is_reported_naming_the_model(family_plugin):
    from vlbench.pipeline.preflight import check_model

    def preflight(checkpoint, **kw):
        raise KeyError("no-such-key")

    family_plugin(preflight=preflight)
    (problem,) = check_model("counting-family")
    assert problem.item == "model 'counting-family'" and "KeyError" in problem.what
    assert problem.error is ModelError


def test_ls_models_shows_static_facts_without_importing_torch():
    code = ("import sys, io, contextlib\n"
            "from vlbench import registry\n"
            "from vlbench.models.families import ModelFamily\n"
            "registry.models.register('toy', ModelFamily('toy', 'toy_pkg:load', embed_dim=48, parameters=2_500_000,"
            " licence='Apache-2.0', description='a toy family'), source='plugin:toy 0.1')\n"
            "from vlbench.cli import main\n"
            "out = io.StringIO()\n"
            "with contextlib.redirect_stdout(out):\n"
            "    main(['ls', 'models'])\n"
            "print(out.getvalue())\n"
            "print('heavy:', sorted(m for m in ('torch', 'transformers', 'open_clip') if m in sys.modules))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = {line.split()[0]: line for line in proc.stdout.splitlines() if line.startswith("  ")}
    assert "512-d embeddings" in lines["clip"] and "151.3M parameters" in lines["clip"]
    assert "640-d embeddings" in lines["align"] and "256-d embeddings" in lines["groupvit"]
    assert "licence MIT" in lines["openclip"]
    assert "a toy family" in lines["toy"] and "[48-d embeddings, 2.5M parameters, licence Apache-2.0]" in lines["toy"]
    assert "heavy: []" in proc.stdout
