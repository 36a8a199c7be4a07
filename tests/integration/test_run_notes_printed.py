"""A run whose numbers are partly so by construction says so where the user reads them: a small --limit whose R@k
cut-offs reach the number of candidates (stdout and results.json ``warnings``), and a token budget that cut no
caption (its n_cut in the printed run and table.md, and a line while the run works)."""

from __future__ import annotations

import json

from support.data import write_manifest


def test_small_limit_and_uncut_budget_are_said_in_the_printed_run(tiny_models, tmp_path, capsys):
    from vlbench.cli import main

    manifest = write_manifest(tmp_path / "d", 8)
    out = tmp_path / "run"
    assert main(["run", "--model", f"clip:{tiny_models('clip')}", "--dataset", f"custom:{manifest}", "--limit", "5",
                 "--token-budget", "4,77", "--num-workers", "0", "--validity", "off", "--bootstrap", "20",
                 "--out", str(out)]) == 0
    printed = capsys.readouterr()
    res = json.loads((out / "results.json").read_text())
    assert res["conditions"]["budget:77"]["n_cut"] == 0 and res["conditions"]["budget:4"]["n_cut"] > 0
    assert [w.split(" with ")[0] for w in res["warnings"]] == ["t2i R@5, R@10"]
    assert "warning: t2i R@5, R@10 with 5 candidates (images) are 100 by construction" in printed.out
    for text in (printed.out, (out / "table.md").read_text()):
        assert "captions cut (n_cut)" in text
        budget_rows = [x for x in text.splitlines() if x.startswith("| budget:77") and " of " in x]
        assert len(budget_rows) == 1 and "0 of 25" in budget_rows[0] and "cut no caption" in budget_rows[0]
    assert "budget:77 cut no caption (n_cut 0 of 25" in printed.err
    # the RSUM change row of the uncut budget: every caption left as it is ("not applicable", as a perturbation's)
    change = next(x for x in printed.out.splitlines() if " budget:77 |" in x and "[+0.00" in x)
    assert "100.0%" in change
