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
