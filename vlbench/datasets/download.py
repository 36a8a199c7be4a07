"""Downloads of the built-in datasets (only when online; every file is checksum-verified).

Captions come from the same pinned public sources as the normalized files vlbench expects, and are
converted the same way; the result must match the pinned sha256 of the normalized file, so a
changed upstream file is detected rather than silently evaluated:

* Flickr30k: multi30k/dataset (Karpathy test image list + the five raw English caption files);
* MS-COCO: the ALBEF/BLIP-style Karpathy test annotation (data-ming-and-application/CVLR-RD);
* FG captions: cwj1412/MSCOCO-Flikcr30K_FG at a pinned commit, reordered to the original image order.

Images come from the Hugging Face datasets nlphuji/flickr_1k_test_image_text_retrieval and
nlphuji/mscoco_2014_5k_test_image_text_retrieval (zip archives, verified where a digest is pinned), fetched
through huggingface_hub so HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE and proxies apply and the Hub cache is reused.
Caption sources come through vlbench's own downloader (:mod:`vlbench.util.fetch`; VLBENCH_MIRROR applies).
"""

from __future__ import annotations

import gzip
import html
import json
import os
import zipfile
from collections.abc import Callable
from pathlib import Path
from urllib.parse import unquote, urlsplit

from ..errors import DataError
from ..util.fetch import DownloadError, fetch_bytes, hub_blob_problem, hub_cache_dir, hub_endpoint
from ..util.io import atomic_write_bytes, sha256_bytes, sha256_file
from ..util.locks import hub_lock_words
from ..util.paths import offline
from .specs import BUILTIN, IMAGE_SOURCES

__all__ = ["DownloadError", "http_get", "fetch_captions", "fetch_images", "hub_blob_problem", "hub_file"]


def http_get(url: str, timeout: float | None = None, *, text: bool = False) -> bytes:
    """The bytes of a non-Hub file (through VLBENCH_MIRROR, with resume, retries and timeouts: util.fetch).
    ``text``: a JSON or text file, so an HTML page served in its place (a proxy's, a login) is refused."""
    del timeout  # the downloader's own setting (VLBENCH_DOWNLOAD_TIMEOUT) applies
    return fetch_bytes(url, text=text)


def _jsonl(rows) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _multi30k(data_dir: Path, images: str, captions: str, files: int = 5) -> bytes:
    """Line i of caption file j is caption j of image i; whitespace stripped, HTML entities unescaped."""
    names = [x.strip() for x in http_get(images, text=True).decode("utf-8").splitlines() if x.strip()]
    caps = []
    for j in range(1, files + 1):
        raw = gzip.decompress(http_get(captions.format(j=j))).decode("utf-8").splitlines()
        caps.append([html.unescape(x.strip()) for x in raw])
    if any(len(c) != len(names) for c in caps):
        raise DataError(f"the Multi30K files do not have one caption per image ({len(names)} images, "
                        f"{[len(c) for c in caps]} lines)", "the upstream files changed: report it to vlbench")
    return _jsonl({"image": n, "captions": [c[i] for c in caps]} for i, n in enumerate(names))


def _karpathy_json(data_dir: Path, url: str) -> bytes:
    data = json.loads(http_get(url, text=True))
    return _jsonl({"image": os.path.basename(e["image"]), "captions": [c.strip() for c in e["caption"][:5]]}
                  for e in data)


def _fg_reorder(data_dir: Path, url: str, order_of: str) -> bytes:
    original = fetch_captions(order_of, data_dir)
    data = json.loads(http_get(url, text=True))
    order = [json.loads(line)["image"] for line in original.read_text().splitlines() if line.strip()]
    return _jsonl({"image": n, "captions": data[n[:-4] if n.endswith(".jpg") else n]} for n in order)


#: recipe step (vlbench.datasets.specs.RECIPE_STEPS) -> function(data_dir, **args) -> file bytes
STEPS: dict[str, Callable[..., bytes]] = {
    "multi30k": _multi30k, "karpathy_json": _karpathy_json, "fg_reorder": _fg_reorder}


def fetch_captions(name: str, data_dir: Path) -> Path:
    """The normalized caption file of built-in ``name`` in ``data_dir``, made by its recipe if missing."""
    spec = BUILTIN[name]
    target = Path(data_dir) / spec.captions
    if target.is_file() and sha256_file(target) == spec.sha256:
        return target
    try:
        blob = STEPS[spec.recipe.step](Path(data_dir), **spec.recipe.args)
    except DownloadError as exc:  # one flat message: which captions, which file, why
        raise DataError(f"the captions of {name!r} are not in {data_dir} and could not be downloaded: "
                        f"{exc.url}: {exc.reason}",
                        f"put {spec.captions} (sha256 {spec.sha256[:16]}...) into {data_dir} or pass "
                        f"--data-dir with the folder that holds it; online, 'vlbench download {name}' fetches it") \
            from None
    except DataError as exc:  # the dataset this one is made from (an FG set's original) failed: say so once
        if spec.recipe.step != "fg_reorder" or exc.message.startswith(f"the captions of {name!r}"):
            raise
        base = spec.recipe.args["order_of"]
        raise DataError(f"the captions of {name!r} are made from those of {base!r}, and {exc.message}",
                        f"{exc.hint}; then 'vlbench download {name}' (or put {spec.captions} into {data_dir})") \
            from None
    digest = sha256_bytes(blob)
    if digest != spec.sha256:
        raise DataError(f"the downloaded captions of {name!r} have sha256 {digest[:16]}..., expected "
                        f"{spec.sha256[:16]}...", "the upstream file changed; report it to vlbench")
    atomic_write_bytes(target, blob)
    return target


def hub_file(url: str) -> tuple[str, str, str, str]:
    """(repo_type, repo_id, revision, filename) of a ``https://huggingface.co/[datasets/]ORG/NAME/resolve/REV/PATH``
    URL, so the file is fetched through huggingface_hub (HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE and proxies apply)."""
    parts = [unquote(p) for p in urlsplit(url).path.strip("/").split("/")]
    repo_type = "model"
    if parts and parts[0] in ("datasets", "spaces"):
        repo_type, parts = parts[0][:-1], parts[1:]
    if len(parts) < 5 or parts[2] != "resolve":
        raise ValueError(f"not a Hub resolve URL: {url}")
    return repo_type, "/".join(parts[:2]), parts[3], "/".join(parts[4:])


def _hub_download(url: str, what: str, fix: str) -> Path:
    """The Hub file of ``url`` in the Hub cache, downloaded through huggingface_hub when missing."""
    repo_type, repo_id, revision, filename = hub_file(url)
    asked = f"{hub_endpoint()}/{'datasets/' if repo_type == 'dataset' else ''}{repo_id}/resolve/{revision}/{filename}"
    from huggingface_hub import hf_hub_download  # lazy: only a download needs the Hub client
    from huggingface_hub.errors import (  # lazy: as above
        EntryNotFoundError,
        LocalEntryNotFoundError,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        with hub_lock_words(what):  # a wait for another process's download of the same blob, said (util/locks.py)
            return Path(hf_hub_download(repo_id, filename, repo_type=repo_type, revision=revision,
                                        endpoint=hub_endpoint(), cache_dir=hub_cache_dir()))
    except LocalEntryNotFoundError as exc:  # the Hub did not answer usably and the cache has no copy: say why
        cause = exc.__cause__ or exc.__context__
        reason = _first_line(cause) if cause is not None else _first_line(exc)
    except (EntryNotFoundError, RepositoryNotFoundError, RevisionNotFoundError) as exc:
        reason = f"not found on the Hub ({type(exc).__name__})"
    except Exception as exc:  # connection, timeout, 5xx, a missing X-Repo-Commit: the client's words
        reason = _first_line(exc)
    raise DataError(f"could not download {what} from {asked}: {reason}", fix)


def _first_line(exc: BaseException) -> str:
    """The Hub client's error in a few words: the HTTP status when there was one, else its first line."""
    response = getattr(exc, "response", None)
    code = getattr(response, "status_code", None)
    if isinstance(code, int):
        return f"the server answered HTTP {code}"
    if "Timeout" in type(exc).__name__:
        return (f"the server stopped sending ({type(exc).__name__}: timed out; HF_HUB_DOWNLOAD_TIMEOUT and "
                "HF_HUB_ETAG_TIMEOUT set how long the Hub client waits)")
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:400]


def fetch_images(name: str, ds, data_dir: Path) -> None:
    """Download (through huggingface_hub) and unpack the images of ``ds`` (a built-in dataset) that are missing
    under ``data_dir``; a pinned archive digest is checked before anything is unpacked."""
    spec = BUILTIN[name]
    root = Path(data_dir) / "images" / spec.images
    missing = [n for n in ds.images if not (root / n).is_file()]
    if not missing:
        return
    src = IMAGE_SOURCES[spec.images]
    fix = (f"check the network (HF_ENDPOINT, HF_TOKEN, https_proxy), or set VLBENCH_OFFLINE=1 and download "
           f"{src.url} by hand and unzip its images into {root}")
    if offline():
        raise DataError(f"{len(missing)} image(s) of {name!r} are missing and offline mode is on",
                        f"download {src.url} and unzip its images into {root}")
    print(f"fetching the images of {name!r} ({len(missing)} missing) from {hub_endpoint()} ...", flush=True)
    zpath = _hub_download(src.url, f"the images of {name!r}", fix)
    digest = sha256_file(zpath)
    tampered = hub_blob_problem(zpath, digest)
    if tampered:
        raise DataError(f"the image archive of {name!r} in the Hugging Face cache is not what the Hub sent: "
                        f"{tampered}; nothing was unpacked",
                        f"delete {Path(zpath).resolve()} (and the link {zpath}) and try again: it is downloaded anew")
    if src.sha256 and digest != src.sha256:
        raise DataError(f"the image archive of {name!r} ({src.url}) has sha256 {digest[:16]}..., pinned "
                        f"{src.sha256[:16]}...; nothing was unpacked",
                        f"the archive changed upstream or is damaged: delete {zpath} from the Hugging Face cache "
                        "and try again, or download it by hand")
    wanted = set(ds.images)
    root.mkdir(parents=True, exist_ok=True)
    try:
        with zipfile.ZipFile(zpath) as z:
            for info in z.infolist():
                base = os.path.basename(info.filename)
                if base in wanted and not info.is_dir():
                    atomic_write_bytes(root / base, z.read(info))  # flat, by base name: no path escapes
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise DataError(f"unpacking the image archive of {name!r} ({zpath}) into {root} failed: {exc}",
                        "free disk space if it is full, or delete the archive from the Hugging Face cache and "
                        "try again") from None
    atomic_write_bytes(root / ".source.json", json.dumps({"url": src.url, "sha256": digest}).encode())
