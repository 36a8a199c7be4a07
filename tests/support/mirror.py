"""A local mirror for the online-path tests: one HTTP server on 127.0.0.1 that answers what the real clients ask.

* A Hub-shaped API for ``huggingface_hub`` (HF_ENDPOINT pointed at it): ``HEAD``/``GET``
  ``/ORG/NAME/resolve/REV/PATH`` and ``/datasets/ORG/NAME/resolve/REV/PATH`` with the headers the client needs
  (``X-Repo-Commit``, ``ETag``, ``Content-Length``, ``Accept-Ranges``; ``Range`` answered with 206), the Hub's
  error codes on 404 (``X-Error-Code: EntryNotFound / RepoNotFound / RevisionNotFound``), and the API endpoints
  ``snapshot_download`` uses (``/api/{models,datasets}/ORG/NAME/revision/REV`` and ``.../tree/REV[/PATH]``); the
  commit API of ``HfApi.create_commit`` (``/api/validate-yaml``, ``.../preupload/REV``, ``.../commit/REV``): with
  ``create_pr=1`` the files go to a new pull request (:attr:`Repo.prs`, served at ``resolve/refs/pr/N/PATH``) and
  the default branch stays as it is; every commit received is in :attr:`Mirror.commits`.
  Repositories are added whole (:meth:`Mirror.add_model_repo`, :meth:`Mirror.add_dataset_repo`), e.g. a tiny model
  saved by tests/support/tiny_models.py, in its real layout.
* Any other file at ``/HOST/PATH``, the layout ``VLBENCH_MIRROR=BASE`` asks for (:meth:`Mirror.add_file` takes the
  original URL: GitHub-raw caption and task files, NLTK's index and packages).
* A request log (:attr:`Mirror.log`) and faults (:meth:`Mirror.fault`): drop the connection after N bytes, stall,
  answer an HTTP status.

Nothing is monkeypatched: the clients talk HTTP to this server.
"""

from __future__ import annotations

import hashlib
import json
import os
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import unquote, urlsplit


@dataclass
class Request:
    method: str
    path: str
    status: int
    start: int = 0  # first byte sent (a Range request's offset)
    sent: int = 0  # body bytes actually written
    headers: dict = field(default_factory=dict)
    query: str = ""


@dataclass
class Commit:
    """A commit the mirror received (HfApi.create_commit): on a new pull request (``pr_num``) or, without
    ``create_pr``, on the default branch."""

    repo_id: str
    summary: str
    description: str
    files: dict[str, bytes]
    create_pr: bool
    pr_num: int | None = None


@dataclass
class Fault:
    match: str  # a substring of the request path
    # "drop" (close after `after` bytes), "stall" (send `after` bytes, then wait), "status" (answer `code`),
    # "slow" (the whole body, `seconds` spread over it: a race between clients becomes real), "endless" (no
    # Content-Length, the body repeated until the client hangs up or `after` bytes went), "shift" (a Range request
    # answered 206 from `after` bytes before the offset asked, with a Content-Range that says so)
    kind: str
    times: int = 1
    after: int = 0
    code: int = 500
    seconds: float = 30.0


@dataclass
class Repo:
    kind: str  # "model" or "dataset"
    files: dict[str, bytes]
    prs: list[Commit] = field(default_factory=list)  # pull requests opened by commits with create_pr

    @property
    def commit(self) -> str:
        h = hashlib.sha1(self.kind.encode())
        for p in sorted(self.files):
            h.update(p.encode() + b"\0" + hashlib.sha256(self.files[p]).digest())
        return h.hexdigest()


def _read_folder(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(Path(folder).rglob("*")) if p.is_file()}


class Mirror:
    def __init__(self):
        self.repos: dict[tuple[str, str], Repo] = {}
        self.files: dict[str, bytes] = {}
        self.log: list[Request] = []
        self.commits: list[Commit] = []
        self.faults: list[Fault] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        handler = type("Handler", (_Handler,), {"mirror": self})
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self._thread.start()

    # ------------------------------------------------------------------ content
    def add_model_repo(self, repo_id: str, files: dict[str, bytes] | Path) -> str:
        """A model repository (a saved folder, or {path: bytes}); returns its commit."""
        return self._add("model", repo_id, files)

    def add_dataset_repo(self, repo_id: str, files: dict[str, bytes] | Path) -> str:
        """A dataset repository (repo_type="dataset": archives, parquet files, ...); returns its commit."""
        return self._add("dataset", repo_id, files)

    def _add(self, kind: str, repo_id: str, files) -> str:
        repo = Repo(kind, _read_folder(files) if isinstance(files, (str, Path)) else dict(files))
        self.repos[(kind, repo_id)] = repo
        return repo.commit

    def add_file(self, url: str, data: bytes) -> str:
        """A non-Hub file, given by its original URL; served at /HOST/PATH. Returns the mirror's URL of it."""
        key = "/" + url.split("://", 1)[-1]
        self.files[key] = data
        return self.url + key

    def fault(self, match: str, kind: str, **kw) -> Fault:
        f = Fault(match, kind, **kw)
        with self._lock:
            self.faults.append(f)
        return f

    # ------------------------------------------------------------------ for the tests
    def env(self, base: dict | None = None, hf_home: Path | None = None) -> dict:
        """An environment whose Hub is this mirror, whose non-Hub files come from it (VLBENCH_MIRROR), with the
        offline switches unset and every other host behind a dead proxy (no route to huggingface.co)."""
        env = dict(os.environ if base is None else base)
        for var in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "VLBENCH_OFFLINE", "HF_DATASETS_OFFLINE"):
            env.pop(var, None)
        dead = "http://127.0.0.1:9"  # the discard port: nothing listens, every proxied request fails at once
        env.update({"HF_ENDPOINT": self.url, "VLBENCH_MIRROR": self.url, "https_proxy": dead, "http_proxy": dead,
                    "HTTPS_PROXY": dead, "HTTP_PROXY": dead, "no_proxy": "127.0.0.1,localhost",
                    "NO_PROXY": "127.0.0.1,localhost", "HF_HUB_DISABLE_TELEMETRY": "1",
                    "HF_HUB_DISABLE_XET": "1", "VLBENCH_DOWNLOAD_BACKOFF": "0.05"})
        if hf_home is not None:
            env["HF_HOME"] = str(hf_home)
            env.pop("HF_HUB_CACHE", None)
        return env

    def gets(self, match: str = "") -> list[Request]:
        return [r for r in self.log if r.method == "GET" and match in r.path]

    def full_gets(self, match: str = "") -> list[Request]:
        """The GET requests of ``match`` that asked for the whole file (no Range): each a full download."""
        return [r for r in self.gets(match) if "Range" not in r.headers]

    def bytes_sent(self, match: str = "") -> int:
        return sum(r.sent for r in self.gets(match))

    def close(self) -> None:
        self._stop.set()
        self.server.shutdown()
        self.server.server_close()

    def _take_fault(self, path: str, method: str) -> Fault | None:
        with self._lock:
            for f in self.faults:
                if f.times > 0 and f.match in path and (method == "GET" or f.kind == "status"):
                    f.times -= 1
                    return f
        return None


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    mirror: Mirror

    def log_message(self, *args) -> None:  # quiet
        pass

    def do_HEAD(self) -> None:
        self._serve(body=False)

    def do_GET(self) -> None:
        self._serve(body=True)

    def do_POST(self) -> None:
        """paths-info (HfApi.get_paths_info, HfFileSystem), and the commit API: validate-yaml, preupload and commit
        (HfApi.create_commit; ``create_pr=1`` opens a pull request on ``refs/pr/N`` and leaves main as it is)."""
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        split = urlsplit(self.path)
        path = unquote(split.path)
        kept = ("Authorization", "Content-Type")
        record = Request("POST", path, 0, headers={k: self.headers[k] for k in kept if k in self.headers})
        record.query = split.query
        self.mirror.log.append(record)
        if path == "/api/validate-yaml":
            return self._json(record, {"errors": [], "warnings": []})
        parts = path.strip("/").split("/")
        kinds = {"models": "model", "datasets": "dataset"}
        if len(parts) < 6 or parts[0] != "api" or parts[1] not in kinds:
            return self._error(record, 404, {}, "unknown API")
        repo = self.mirror.repos.get((kinds[parts[1]], "/".join(parts[2:4])))
        if repo is None:
            return self._error(record, 404, {"X-Error-Code": "RepoNotFound"}, "not found")
        if parts[4] == "paths-info":
            from urllib.parse import parse_qs

            wanted = set(parse_qs(body.decode()).get("paths", []))
            return self._json(record, [e for e in _tree(repo, "") if e["path"] in wanted])
        if parts[4] == "preupload":
            files = json.loads(body or b"{}").get("files", [])
            return self._json(record, {"files": [{"path": f["path"], "uploadMode": "regular", "shouldIgnore": False,
                                                  "oid": None} for f in files]})
        if parts[4] == "commit":
            return self._commit(record, repo, "/".join(parts[2:4]), body, "create_pr=1" in split.query)
        return self._error(record, 404, {}, "unknown API")

    def _commit(self, record: Request, repo: Repo, repo_id: str, body: bytes, create_pr: bool) -> None:
        import base64

        lines = [json.loads(line) for line in body.decode().splitlines() if line.strip()]
        header = next((x["value"] for x in lines if x.get("key") == "header"), {})
        files = {x["value"]["path"]: base64.b64decode(x["value"]["content"]) for x in lines if x.get("key") == "file"}
        commit = Commit(repo_id, header.get("summary", ""), header.get("description", ""), files, create_pr)
        with self.mirror._lock:
            if create_pr:
                commit.pr_num = len(repo.prs) + 1
                repo.prs.append(commit)
            else:
                repo.files.update(files)  # a direct commit changes the default branch
            self.mirror.commits.append(commit)
        oid = hashlib.sha1(json.dumps(sorted(files)).encode() + b"".join(files.values())).hexdigest()
        pr_url = f"{self.mirror.url}/{repo_id}/discussions/{commit.pr_num}" if create_pr else None
        return self._json(record, {"commitUrl": f"{self.mirror.url}/{repo_id}/commit/{oid}", "commitOid": oid,
                                   "pullRequestUrl": pr_url})

    def _json(self, record: Request, doc) -> None:
        self._send(record, json.dumps(doc).encode(), {"Content-Type": "application/json"}, True, None)

    # ------------------------------------------------------------------ routing
    def _serve(self, body: bool) -> None:
        path = unquote(urlsplit(self.path).path)
        kept = ("Range", "If-Range", "Authorization")
        record = Request(self.command, path, 0, headers={k: self.headers[k] for k in kept if k in self.headers})
        self.mirror.log.append(record)
        fault = self.mirror._take_fault(path, self.command)
        if fault is not None and fault.kind == "status":
            return self._error(record, fault.code, {}, f"injected {fault.code}")
        if path.startswith("/api/"):
            return self._api(record, path[5:])
        hub = self._hub_file(path)
        if hub is not None:
            repo, data, extra = hub
            if data is None:
                return self._error(record, 404, extra, "not found")
            return self._send(record, data, extra, body, fault)
        if path in self.mirror.files:
            return self._send(record, self.mirror.files[path], {}, body, fault)
        return self._error(record, 404, {}, "no such file on the mirror")

    def _hub_file(self, path: str):
        parts = path.strip("/").split("/")
        kind = "model"
        if parts and parts[0] == "datasets":
            kind, parts = "dataset", parts[1:]
        if len(parts) < 5 or parts[2] != "resolve":
            return None
        repo_id, rev, file = "/".join(parts[:2]), parts[3], "/".join(parts[4:])
        repo = self.mirror.repos.get((kind, repo_id))
        if repo is None:
            return None, None, {"X-Error-Code": "RepoNotFound"}
        files = repo.files
        if parts[3:5] == ["refs", "pr"] and len(parts) > 6 and parts[5].isdigit():  # a pull request's ref
            num, file = int(parts[5]), "/".join(parts[6:])
            if not 1 <= num <= len(repo.prs):
                return repo, None, {"X-Error-Code": "RevisionNotFound"}
            files = {**repo.files, **repo.prs[num - 1].files}
        elif rev not in ("main", repo.commit):
            return repo, None, {"X-Error-Code": "RevisionNotFound"}
        data = files.get(file)
        head = {"X-Repo-Commit": repo.commit if files is repo.files else Repo(repo.kind, files).commit}
        if data is None:
            return repo, None, dict(head, **{"X-Error-Code": "EntryNotFound"})
        return repo, data, head

    def _api(self, record: Request, rest: str) -> None:
        parts = rest.strip("/").split("/")
        kinds = {"models": "model", "datasets": "dataset"}
        if len(parts) < 3 or parts[0] not in kinds:
            return self._error(record, 404, {}, "unknown API")
        kind, repo_id, tail = kinds[parts[0]], "/".join(parts[1:3]), parts[3:]
        repo = self.mirror.repos.get((kind, repo_id))
        if repo is None:
            return self._error(record, 404, {"X-Error-Code": "RepoNotFound"}, f"{repo_id} not found")
        if tail and tail[0] in ("revision", "tree") and len(tail) >= 2 and tail[1] not in ("main", repo.commit):
            return self._error(record, 404, {"X-Error-Code": "RevisionNotFound"}, "no such revision")
        if not tail or tail[0] == "revision":
            doc: object = {"id": repo_id, "sha": repo.commit, "private": False,
                           "siblings": [{"rfilename": p} for p in sorted(repo.files)]}
        elif tail[0] == "tree":
            under = "/".join(tail[2:])
            doc = _tree(repo, under)
        else:
            return self._error(record, 404, {}, "unknown API")
        data = json.dumps(doc).encode()
        return self._send(record, data, {"Content-Type": "application/json"}, True, None)

    # ------------------------------------------------------------------ answers
    def _error(self, record: Request, code: int, headers: dict, message: str) -> None:
        data = json.dumps({"error": message}).encode()
        record.status = code
        self.send_response(code)
        for k, v in dict(headers, **{"X-Error-Message": message}).items():
            self.send_header(k, v)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send(self, record: Request, data: bytes, headers: dict, body: bool, fault: Fault | None) -> None:
        etag = '"' + hashlib.sha256(data).hexdigest() + '"'
        start, code = 0, 200
        rng = self.headers.get("Range", "")
        if_range = self.headers.get("If-Range")
        if rng.startswith("bytes=") and (if_range is None or if_range == etag):
            first, _, last = rng[6:].partition("-")
            start = int(first or 0)
            if fault is not None and fault.kind == "shift":
                start = max(0, start - fault.after)
            end = int(last) + 1 if last else len(data)
            if start >= len(data):
                return self._error(record, 416, {"Content-Range": f"bytes */{len(data)}"}, "range not satisfiable")
            code = 206
            chunk = data[start:end]
        else:
            chunk = data
        record.status, record.start = code, start
        if body and fault is not None and fault.kind == "endless":
            return self._endless(record, chunk, headers, fault)
        self.send_response(code)
        for k, v in dict(headers, **{"ETag": etag, "Accept-Ranges": "bytes"}).items():
            self.send_header(k, v)
        if "Content-Type" not in headers:
            self.send_header("Content-Type", "application/octet-stream")
        if code == 206:
            self.send_header("Content-Range", f"bytes {start}-{start + len(chunk) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(chunk)))
        self.end_headers()
        if not body:
            return
        whole = fault is None or fault.kind in ("slow", "shift")
        limit = len(chunk) if whole else min(fault.after, len(chunk))
        pause = fault.seconds / max(1, -(-limit // (1 << 16))) if fault is not None and fault.kind == "slow" else 0
        view = memoryview(chunk)
        try:
            for i in range(0, limit, 1 << 16):
                self.wfile.write(view[i:min(limit, i + (1 << 16))])
                record.sent += min(limit, i + (1 << 16)) - i
                if pause:
                    self.wfile.flush()
                    time.sleep(pause)
            if whole:
                return
            self.wfile.flush()
            if fault.kind == "stall":
                self.mirror._stop.wait(fault.seconds)
            self.close_connection = True
            self.connection.shutdown(2)
        except OSError:  # the client hung up first
            self.close_connection = True


    def _endless(self, record: Request, chunk: bytes, headers: dict, fault: Fault) -> None:
        """A body with no Content-Length that repeats ``chunk`` until the client hangs up (or ``fault.after`` bytes,
        a guard for the test machine)."""
        self.send_response(200)
        for k, v in dict(headers, **{"Content-Type": "application/octet-stream", "Connection": "close"}).items():
            self.send_header(k, v)
        self.end_headers()
        record.status = 200
        block = (chunk or b"x") * max(1, (1 << 16) // max(1, len(chunk)))
        try:
            while record.sent < (fault.after or 1 << 30):
                self.wfile.write(block)
                record.sent += len(block)
        except OSError:
            pass
        self.close_connection = True


def _tree(repo: Repo, under: str) -> list[dict]:
    out, folders = [], set()
    for p in sorted(repo.files):
        if under and not p.startswith(under.rstrip("/") + "/"):
            continue
        parent = p.rsplit("/", 1)[0] if "/" in p else ""
        while parent and parent not in folders and parent != under.rstrip("/"):
            folders.add(parent)
            parent = parent.rsplit("/", 1)[0] if "/" in parent else ""
        data = repo.files[p]
        out.append({"type": "file", "path": p, "size": len(data),
                    "oid": hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()})
    out += [{"type": "directory", "path": d, "size": 0, "oid": hashlib.sha1(d.encode()).hexdigest()}
            for d in sorted(folders)]
    return out


def wait_for(predicate, seconds: float = 10.0) -> bool:
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


# ---------------------------------------------------------------------------------------------------------------
# upstream files in their real layouts, rebuilt from the normalized caption files (so the pinned digests hold)


def caption_sources(captions_dir: Path) -> dict[str, bytes]:
    """{original URL: bytes} of the pinned upstream caption sources of flickr30k, flickr30k-fg, coco and coco-fg
    (Multi30K's image list and gzipped caption files, CVLR-RD's Karpathy JSON, the FG release's annotations),
    rebuilt from the normalized files so that vlbench's conversion gives back their pinned sha256."""
    import gzip
    import html

    from vlbench.datasets.specs import BUILTIN

    def rows(name):
        text = (Path(captions_dir) / BUILTIN[name].captions).read_text(encoding="utf-8")
        return [json.loads(line) for line in text.splitlines() if line.strip()]

    out: dict[str, bytes] = {}
    flickr = rows("flickr30k")
    args = BUILTIN["flickr30k"].recipe.args
    out[args["images"]] = "".join(r["image"] + "\n" for r in flickr).encode()
    for j in range(1, 6):
        text = "".join(html.escape(r["captions"][j - 1], quote=False) + "\n" for r in flickr)
        out[args["captions"].format(j=j)] = gzip.compress(text.encode("utf-8"), mtime=0)
    coco = rows("coco")
    out[BUILTIN["coco"].recipe.args["url"]] = json.dumps(
        [{"image": f"val2014/{r['image']}", "caption": r["captions"], "image_id": i}
         for i, r in enumerate(coco)]).encode()
    for fg in ("flickr30k-fg", "coco-fg"):
        out[BUILTIN[fg].recipe.args["url"]] = json.dumps(
            {r["image"].removesuffix(".jpg"): r["captions"] for r in rows(fg)}).encode()
    return out


def image_archive(names, folder: str, pad_bytes: int = 0, seed: int = 0) -> bytes:
    """A zip of small real JPEG images under ``folder/NAME`` (the archives' layout), plus ``pad_bytes`` of
    incompressible padding in a member no dataset asks for (to make a large archive)."""
    import io
    import zipfile

    import numpy as np
    from PIL import Image

    rng = np.random.default_rng(seed)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for n in names:
            img = io.BytesIO()
            Image.fromarray(rng.integers(0, 255, (8, 8, 3), dtype=np.uint8)).save(img, format="JPEG")
            z.writestr(f"{folder}/{n}", img.getvalue())
        if pad_bytes:
            z.writestr(f"{folder}/padding.bin", rng.bytes(pad_bytes))
    return buf.getvalue()
