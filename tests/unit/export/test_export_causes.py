"""Causes found from outside in ``vlbench export`` (issue 44), each with the behaviour that protects against it:
a choice-task run is refused (not published as retrieval results), a hand-written README.md in --out is kept,
the model card holds a chosen set of metrics (not every record at mixed scales), an unknown format gets a "did you
mean", and every --push-to-hub failure says its own cause in one line (a dead endpoint, the Hub offline, a refused
token, a failing Hub, an answer that is no Hub's JSON, a rejection)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from support.synthetic_runs import synth_run

from vlbench.cli import main


@pytest.fixture
def run(tmp_path):
    return synth_run(tmp_path / "run", perturb=("char-swap", "shuffle-all-words"))


def _as_task_run(folder):
    doc = json.loads((folder / "results.json").read_text())
    doc["task"] = {"name": "winoground", "kind": "choice"}
    (folder / "results.json").write_text(json.dumps(doc))
    return folder


@pytest.mark.parametrize("fmt", ["mteb", "model-index"])
def test_choice_task_run_is_not_exported_as_retrieval_results(run, tmp_path, fmt, capsys):
    _as_task_run(run)
    assert main(["export", str(run), "--format", fmt, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "choice-task run" in err and "retrieval" in err
    assert not list((tmp_path / "out").rglob("*.*")) if (tmp_path / "out").exists() else True


def test_hand_written_readme_in_out_is_kept_unless_overwrite(run, tmp_path, capsys):
    out = tmp_path / "card"
    out.mkdir()
    (out / "README.md").write_text("# My model\n\nMy own words.\n")
    assert main(["export", str(run), "--format", "model-index", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert "not written by vlbench" in err and "--overwrite" in err
    assert (out / "README.md").read_text() == "# My model\n\nMy own words.\n"
    assert not (out / ".eval_results").exists()
    assert main(["export", str(run), "--format", "model-index", "--out", str(out), "--overwrite"]) == 0
    assert "My own words." not in (out / "README.md").read_text()
    # a card vlbench wrote is its own to replace: a second export needs no --overwrite
    assert main(["export", str(run), "--format", "model-index", "--out", str(out), "--model-name", "b/c"]) == 0
    assert "b/c" in (out / "README.md").read_text()


def _metric_types(card_dir) -> set:
    from huggingface_hub import ModelCard

    return {r.metric_type for r in ModelCard.load(card_dir / "README.md").data.eval_results}


def test_model_card_default_metrics_are_mteb_main_score_and_recall_at_1_5_10(run, tmp_path):
    assert main(["export", str(run), "--format", "model-index", "--out", str(tmp_path / "a")]) == 0
    assert _metric_types(tmp_path / "a") == {f"{d}_recall@{k}" for d in ("i2t", "t2i") for k in (1, 5, 10)}
    from huggingface_hub import ModelCard

    assert len(ModelCard.load(tmp_path / "a" / "README.md").data.eval_results) == 3 * 2 * 3  # conditions x d x k
    full = tmp_path / "all"
    assert main(["export", str(run), "--format", "model-index", "--out", str(full), "--metrics", "all"]) == 0
    assert {"i2t_rsum", "both_rsum"} <= _metric_types(full)  # the sums at another scale: only when asked for


def test_model_card_metrics_selection_by_direction_and_unknown_names_refused(run, tmp_path, capsys):
    assert main(["export", str(run), "--format", "model-index", "--out", str(tmp_path / "a"),
                 "--metrics", "t2i_recall@1,rsum"]) == 0
    assert _metric_types(tmp_path / "a") == {"t2i_recall@1", "i2t_rsum", "t2i_rsum", "both_rsum"}
    assert main(["export", str(run), "--format", "model-index", "--out", str(tmp_path / "b"),
                 "--metrics", "recall@7"]) == 2
    err = capsys.readouterr().err
    assert "'recall@7' matches no metric record" in err and "recall@5" in err
    assert main(["export", str(run), "--format", "mteb", "--out", str(tmp_path / "c"), "--metrics", "all"]) == 2
    assert "--metrics" in capsys.readouterr().err


def test_unknown_export_format_gets_did_you_mean(run, tmp_path, capsys):
    assert main(["export", str(run), "--format", "model_index", "--out", str(tmp_path / "x")]) == 2
    err = capsys.readouterr().err
    assert "unknown exporter 'model_index'" in err and "did you mean 'model-index'" in err


# -- --push-to-hub: one line per cause ----------------------------------------------------------------------------

class _Hub(BaseHTTPRequestHandler):
    """A stand-in that has the repository without a README.md and answers every other call with ``answer``."""

    answer: tuple = (200, "text/html", b"<html>not a Hub</html>")

    def _reply(self, code: int, ctype: str, body: bytes, extra: dict | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def _any(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.path.endswith("/README.md"):  # the repository exists and has no card
            self._reply(404, "application/json", b'{"error": "Entry not found"}', {"X-Error-Code": "EntryNotFound"})
        else:
            self._reply(*self.answer)

    do_GET = do_POST = do_HEAD = _any

    def log_message(self, *args) -> None:
        pass


def _online(monkeypatch, tmp_path, endpoint: str) -> None:
    """The session's offline switch undone for this test, the Hub client pointed at ``endpoint``."""
    from huggingface_hub import constants

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(constants, "ENDPOINT", endpoint)
    monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub-cache"))
    monkeypatch.setenv("HF_TOKEN", "hf_test_token")


@pytest.fixture
def hub(monkeypatch, tmp_path):
    servers = []

    def serve(code: int, ctype: str, body: bytes):
        handler = type("Hub", (_Hub,), {"answer": (code, ctype, body)})
        srv = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=srv.serve_forever, daemon=True).start()
        servers.append(srv)
        _online(monkeypatch, tmp_path, f"http://127.0.0.1:{srv.server_port}")
        return srv

    yield serve
    for srv in servers:
        srv.shutdown()


def _push(run, capsys) -> str:
    assert main(["export", str(run), "--format", "model-index", "--push-to-hub", "org/model"]) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return err


def test_push_to_a_dead_endpoint_says_unreachable_at_once(run, monkeypatch, tmp_path, capsys):
    _online(monkeypatch, tmp_path, "http://127.0.0.1:9")  # the discard port: nothing listens
    t0 = time.monotonic()
    err = _push(run, capsys)
    assert "could not be reached" in err and "Connection refused" in err and "rejected" not in err
    assert time.monotonic() - t0 < 20  # no minute of retries


def test_push_offline_says_hf_hub_offline(run, monkeypatch, capsys):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    err = _push(run, capsys)
    assert "HF_HUB_OFFLINE is set" in err and "Expecting value" not in err


@pytest.mark.parametrize("code, ctype, body, says", [
    (200, "text/html", b"<html>a proxy's page</html>", "not the Hub's JSON"),
    (401, "application/json", b'{"error": "Invalid credentials in Authorization header"}', "refused the token"),
    (403, "application/json", b'{"error": "You do not have write access"}', "refused the token"),
    (400, "application/json", b'{"error": "Invalid metadata in README.md"}', "rejected the pull request"),
    (502, "text/html", b"<html>Bad Gateway</html>", "not the Hub's JSON"),
    (503, "application/json", b'{"error": "Service unavailable"}', "failed while taking the pull request"),
])
def test_push_refusals_name_their_own_cause(run, hub, capsys, code, ctype, body, says):
    hub(code, ctype, body)
    err = _push(run, capsys)
    assert says in err, err
    assert "the Hub rejected the model card" not in err  # the old answer to every cause
    assert len([line for line in err.splitlines() if line.strip() and "fix:" not in line]) == 1, err
