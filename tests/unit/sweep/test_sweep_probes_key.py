"""A sweep plan's ``probes`` key (the option table's row): a condition of the grid that runs meaning-changing probes,
handed to vlbench.run as given, another run than clean; an unknown probe name refused before any run."""

from __future__ import annotations

import pytest

from vlbench.errors import VlbenchError
from vlbench.pipeline.run_config import RunConfig, validate
from vlbench.sweep.plan import expand, parse_plan


def _doc() -> dict:
    return {"options": {"n-boot": 20, "validity": "off"}, "models": {"a": "clip:/m/a"},
            "datasets": {"d1": "custom:/d/one.jsonl"},
            "conditions": {"clean": {}, "negation": {"probes": "negation"},
                           "both": {"perturb": ["char-swap"], "probes": ["half-truth-object", "negation-present"]}}}


def test_plan_key_probes_reaches_the_run(tmp_path):
    tasks = {t.run_id.split("--")[2]: t for t in expand(parse_plan(_doc(), "p.toml"), tmp_path)}
    assert tasks["negation"].kwargs["probes"] == "negation"
    assert "probes" not in tasks["clean"].kwargs
    assert tasks["both"].kwargs["probes"] == ["half-truth-object", "negation-present"]
    assert len({t.run_id for t in tasks.values()}) == 3


def test_probes_option_is_checked_before_any_work():
    validate(RunConfig(model="clip", dataset="flickr30k", probes=["negation", "half-truth"]))  # a list is joined
    with pytest.raises(VlbenchError) as err:
        validate(RunConfig(model="clip", dataset="flickr30k", probes="negation,no-such-probe"))
    assert "no-such-probe" in str(err.value) and "sensitivity" in str(err.value)
