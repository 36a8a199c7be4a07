"""A plug-in whose import calls sys.exit(0) must fail the run that selects it, never end it with exit 0."""

from __future__ import annotations

import pytest

from vlbench import registry
from vlbench.errors import VlbenchError


def test_plugin_calling_sys_exit_on_import_is_an_error(tmp_path, monkeypatch):
    (tmp_path / "exiting_plugin.py").write_text("import sys\nsys.exit(0)\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = registry.Registry("models")
    reg._plugins_loaded = True
    reg._entries["exiter"] = registry.Entry("exiter", "exiting_plugin:load", "", "plugin:exiting 0.1")
    with pytest.raises(VlbenchError, match=r"exiter.*sys\.exit\(0\)") as err:
        reg.get("exiter")
    assert "reinstall or fix" in err.value.hint


def test_plugin_raising_keyboard_interrupt_at_import_is_named(tmp_path, monkeypatch):
    """A plug-in that raises KeyboardInterrupt while importing stayed anonymous (every run stopped as if
    the user had pressed Ctrl-C); it is still an interrupt, but it names the plug-in, its source and target."""
    from vlbench.errors import PluginInterrupt

    (tmp_path / "interrupting_plugin.py").write_text("raise KeyboardInterrupt\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = registry.Registry("models")
    reg._plugins_loaded = True
    reg._entries["stopper"] = registry.Entry("stopper", "interrupting_plugin:load", "", "plugin:stopper 0.1")
    with pytest.raises(KeyboardInterrupt) as err:
        reg.get("stopper")
    assert isinstance(err.value, PluginInterrupt)
    assert err.value.plugin == "'stopper' (plugin:stopper 0.1: interrupting_plugin:load)"
    assert "stopper" in str(err.value) and "KeyboardInterrupt" in str(err.value)


def test_ls_marks_broken_plugins_and_lists_custom_datasets(monkeypatch, capsys, tmp_path):
    import importlib.metadata as md

    from vlbench import cli

    (tmp_path / "raising_plugin.py").write_text("raise RuntimeError('boom')\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    class EP:
        def __init__(self, name, value):
            self.name, self.value, self.dist = name, value, None

    eps = [EP("gone-model", "no_such_module_xyz:load"), EP("raising-model", "raising_plugin:load")]
    monkeypatch.setattr(md, "entry_points", lambda group=None: eps if group == "vlbench.models" else [])
    fresh = registry.Registry("models", registry.BUILTIN_MODULES["models"])
    monkeypatch.setattr(registry, "models", fresh)
    assert cli.main(["ls", "models"]) == 0
    out = capsys.readouterr().out
    gone = next(line for line in out.splitlines() if "gone-model" in line)
    assert gone.startswith("!") and "BROKEN: module 'no_such_module_xyz' is not installed" in gone
    assert "BROKEN" not in next(line for line in out.splitlines() if "raising-model" in line)  # not imported
    assert cli.main(["ls", "models", "--check"]) == 0
    out = capsys.readouterr().out
    assert "BROKEN: RuntimeError: boom" in next(line for line in out.splitlines() if "raising-model" in line)
    assert cli.main(["ls", "datasets"]) == 0
    assert "custom:<manifest.jsonl>" in capsys.readouterr().out


def _fake_metric_eps(monkeypatch, tmp_path, mapping):
    import importlib.metadata as md

    from vlbench.metrics.specs import register_builtins

    class EP:
        def __init__(self, name, value):
            self.name, self.value, self.dist = name, value, None

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(md, "entry_points", lambda group=None: [EP(n, v) for n, v in mapping.items()]
                        if group == "vlbench.metrics" else [])
    fresh = registry.Registry("metrics")
    register_builtins(fresh)
    monkeypatch.setattr(registry, "metrics", fresh)


def test_metric_plugin_calling_sys_exit_fails_run_with_exit_2(monkeypatch, tmp_path, capsys):
    from vlbench import cli

    (tmp_path / "exiting_metric.py").write_text("import sys\nsys.exit(0)\n")
    _fake_metric_eps(monkeypatch, tmp_path, {"exit-metric": "exiting_metric:M"})
    (tmp_path / "m.jsonl").write_text('{"image": "a.png", "captions": ["a cat"]}\n')
    rc = cli.main(["run", "--model", "clip", "--dataset", f"custom:{tmp_path / 'm.jsonl'}",
                   "--out", str(tmp_path / "run"), "--quiet"])
    err = capsys.readouterr().err
    assert rc == 2
    assert "'exit-metric'" in err and "sys.exit(0)" in err
    assert not (tmp_path / "run").exists()  # refused before any work
    assert cli.main(["ls", "metrics"]) == 0
    out = capsys.readouterr().out
    assert "recall@k" in out and "ndcg_cm@p" in out  # built-ins still listed
    line = next(x for x in out.splitlines() if "exit-metric" in x)
    assert line.startswith("!") and "BROKEN" in line and "sys.exit(0)" in line


def test_metric_entry_point_naming_a_function_is_listed_broken(monkeypatch, tmp_path, capsys):
    from vlbench import cli

    (tmp_path / "func_metric.py").write_text("def mrr(r, ev):\n    return 1.0 / r.best_rank\n")
    _fake_metric_eps(monkeypatch, tmp_path, {"func-metric": "func_metric:mrr"})
    assert cli.main(["ls", "metrics"]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if "func-metric" in x)
    assert line.startswith("!") and "BROKEN" in line and "must name a vlbench Metric, got function" in line
    assert "recall@k" in out
