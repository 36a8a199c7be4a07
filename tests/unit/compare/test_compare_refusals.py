"""compare's bad input: every case a clear error naming the option or the runs, never a traceback;
each test is named after what it protects."""

from __future__ import annotations

import gzip

import pytest

from support.runs import rehash
from support.synthetic_runs import synth_run, write_per_query
from vlbench.errors import OptionError, VlbenchError

VALS = {("clean", "i2t"): [100.0, 0.0, 200.0], ("clean", "t2i"): [0.0, 300.0, 100.0]}


@pytest.fixture
def pair(tmp_path):
    a = synth_run(tmp_path / "a", model=0)
    b = synth_run(tmp_path / "b", model=1)
    write_per_query(a, VALS)
    write_per_query(b, {k: v[::-1] for k, v in VALS.items()})
    return a, b


def _cli(capsys, *args):
    from vlbench.cli import main

    rc = main(["compare", *map(str, args)])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.err
    return rc, cap.out, cap.err


def test_a_negative_seed_is_refused_naming_seed(pair, capsys):
    rc, _, err = _cli(capsys, *pair, "--seed", "-1")
    assert rc == 2 and "--seed must be" in err


@pytest.mark.parametrize("args,flag", [(["--alpha", "1.5"], "--alpha"), (["--n-resamples", "99"], "--n-resamples"),
                                       (["--alpha", "nan"], "--alpha")])
def test_alpha_and_resample_errors_name_the_option(pair, capsys, args, flag):
    rc, _, err = _cli(capsys, *pair, *args)
    assert rc == 2 and err.startswith(f"vlbench: error: {flag} must be")


def test_resamples_are_bounded_and_the_limit_named(pair, capsys):
    from vlbench.compare.engine import compare_runs

    with pytest.raises(OptionError) as err:
        compare_runs(list(pair), n_resamples=10 ** 12)
    assert err.value.option == "n_resamples" and "1,000,000" in str(err.value)
    rc, _, msg = _cli(capsys, *pair, "--n-resamples", str(10 ** 12))
    assert rc == 2 and "--n-resamples must be an integer from 100 to 1,000,000" in msg


def test_out_an_existing_file_is_refused(pair, capsys, tmp_path):
    (tmp_path / "taken").write_text("mine")
    rc, _, err = _cli(capsys, *pair, "--out", tmp_path / "taken")
    assert rc == 2 and "--out" in err and "not a folder" in err
    assert (tmp_path / "taken").read_text() == "mine"


def test_infinite_per_query_values_are_refused_naming_the_run(pair, capsys, tmp_path):
    a, b = pair
    write_per_query(a, {("clean", "i2t"): [100.0, float("inf"), 0.0], ("clean", "t2i"): VALS[("clean", "t2i")]})
    rc, _, err = _cli(capsys, a, b, "--out", tmp_path / "o")
    assert rc == 2 and str(a) in err and "infinite" in err
    assert not (tmp_path / "o").exists()


def test_empty_per_query_files_name_the_runs(pair, capsys):
    a, b = pair
    for f in (a, b):
        with gzip.open(f / "per_query.csv.gz", "wt") as fh:
            fh.write("condition,fold,direction,query_index,query_id,rsum\n")
        rehash(f)  # the runs' own (empty) files, not edited ones
    rc, _, err = _cli(capsys, a, b)
    assert rc == 2 and str(a) in err and str(b) in err and "no values" in err


def test_a_run_compared_with_itself_is_refused(pair):
    from vlbench.compare.engine import compare_runs

    a, _ = pair
    with pytest.raises(VlbenchError) as err:
        compare_runs([a, a])
    assert "the same run" in str(err.value)
    with pytest.raises(VlbenchError):
        compare_runs([a, a / "results.json"])


def test_directions_both_needs_the_rsum_total(pair):
    from vlbench.compare.engine import compare_runs

    with pytest.raises(OptionError) as err:
        compare_runs(list(pair), test="ttest", directions="both")
    assert err.value.option == "directions"


def test_compare_help_renders_its_percent_signs(capsys):
    from vlbench.cli import main

    with pytest.raises(SystemExit) as done:  # in-process: the parser argparse prints, as `vlbench compare --help`
        main(["compare", "--help"])
    out = capsys.readouterr().out
    assert done.value.code == 0
    assert "%%" not in out and "95%" in out and "--conditions" in out
