"""What the built-in model families ask of the Hugging Face hub and of open_clip, without loading a model.

Used by their fingerprint hooks (the commit of a cached snapshot) and preflight hooks (is the repository
cached, is the hub reachable, which repository an open_clip tag comes from). Nothing heavy is imported:
no torch, no transformers, and open_clip's table is read without its package import.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import sys
import types
from functools import lru_cache
from pathlib import Path
from urllib.parse import urlsplit

from ..errors import ModelError
from ..util.fetch import hub_endpoint
from ..util.paths import offline

PROBE_TIMEOUT = 3.0


def probe_address(endpoint: str | None = None) -> tuple[str, int]:
    """(host, port) of the configured Hub endpoint: what must answer for vlbench to count as online. A malformed
    endpoint (HF_ENDPOINT) is a ModelError naming it."""
    url = endpoint or hub_endpoint()
    try:
        parts = urlsplit(url)
    except ValueError as exc:  # e.g. an unclosed IPv6 literal, http://[::1
        raise ModelError(f"HF_ENDPOINT {url!r} is not a valid URL ({exc})",
                         "set HF_ENDPOINT to the Hub (or its mirror) as a URL, e.g. http://[::1]:8080 or "
                         "https://hf-mirror.example, or unset it for huggingface.co") from None
    try:
        port = parts.port
    except ValueError:
        port = None
    return parts.hostname or "huggingface.co", port or (80 if parts.scheme == "http" else 443)


@lru_cache(maxsize=8)
def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=PROBE_TIMEOUT):
            return True
    except OSError:
        return False


def network_reachable() -> bool:
    """False when offline mode is on or the configured Hub endpoint (HF_ENDPOINT, else huggingface.co) does not
    answer within PROBE_TIMEOUT seconds. One probe per endpoint and process."""
    if offline():
        return False
    return _answers(*probe_address())


network_reachable.cache_clear = _answers.cache_clear  # type: ignore[attr-defined]  # the tests' reset


def hub_cached(repo_id: str) -> bool:
    """Whether a Hugging Face hub repository has a snapshot in the local cache."""
    try:
        from huggingface_hub import constants
        cache = Path(constants.HF_HUB_CACHE)
    except Exception:  # pragma: no cover - huggingface_hub is a dependency
        cache = Path(os.environ.get("HF_HOME", Path.home() / ".cache" / "huggingface")) / "hub"
    snaps = cache / f"models--{repo_id.replace('/', '--')}" / "snapshots"
    return snaps.is_dir() and any(p.is_dir() and any(p.iterdir()) for p in snaps.iterdir())


def hub_commit(repo: str, revision: str | None) -> str | None:
    """The commit of the locally cached snapshot of ``repo`` (at ``revision``), or None."""
    try:
        from huggingface_hub import try_to_load_from_cache
    except ImportError:  # pragma: no cover
        return None
    try:
        path = try_to_load_from_cache(repo, "config.json", revision=revision)
    except Exception:
        return None
    if not isinstance(path, str):
        return None
    parts = Path(path).parts
    return parts[-2] if len(parts) >= 2 and parts[-3] == "snapshots" else None


def no_network_reason() -> str:
    if offline():
        return "offline mode is on"
    host, port = probe_address()
    return f"the Hugging Face hub cannot be reached ({host}:{port} does not answer; no network, or set HF_ENDPOINT)"


def hub_problem(repo_id: str, cli_hint: str) -> ModelError | None:
    """None when ``repo_id`` is cached or can be downloaded; else what is missing and how to fix it."""
    if hub_cached(repo_id) or network_reachable():
        return None
    return ModelError(f"{repo_id!r} is not in the local Hugging Face cache and {no_network_reason()}",
                      f"run 'hf download {repo_id}' on a machine with network access (same HF_HOME), "
                      f"or pass a local folder: {cli_hint}")


@lru_cache(maxsize=1)
def openclip_table():
    """open_clip's table of pretrained tags, loaded without importing torch: open_clip's package import
    pulls torch in (seconds), the table module needs only two small sibling modules. The module is
    loaded under a private package name, with ``safetensors.torch`` masked for the duration."""
    spec = importlib.util.find_spec("open_clip")
    if spec is None or not spec.submodule_search_locations:
        return None
    root = Path(list(spec.submodule_search_locations)[0])
    pkg = types.ModuleType("_vlbench_open_clip")
    pkg.__path__ = [str(root)]
    saved = {k: sys.modules.get(k) for k in ("_vlbench_open_clip", "safetensors.torch")}
    sys.modules["_vlbench_open_clip"] = pkg
    if "torch" not in sys.modules:
        # None in sys.modules makes the import raise ImportError: open_clip then skips safetensors
        sys.modules["safetensors.torch"] = None  # type: ignore[assignment]  # see the comment above
    try:
        for name in ("constants", "version", "pretrained"):
            sub = importlib.util.spec_from_file_location(f"_vlbench_open_clip.{name}", root / f"{name}.py")
            if sub is None or sub.loader is None:
                return None
            mod = importlib.util.module_from_spec(sub)
            sys.modules[sub.name] = mod
            sub.loader.exec_module(mod)
        return mod.get_pretrained_cfg
    except Exception:
        return None
    finally:
        for k in [m for m in sys.modules if m.startswith("_vlbench_open_clip")]:
            del sys.modules[k]
        for k, v in saved.items():
            if v is not None:
                sys.modules[k] = v
            else:
                sys.modules.pop(k, None)


def openclip_repo(arch: str, tag: str) -> str | None:
    """The hub repository open_clip downloads ARCH/TAG from, read from open_clip's own table."""
    get_pretrained_cfg = openclip_table()
    if get_pretrained_cfg is None:
        return None
    parts = ((get_pretrained_cfg(arch, tag) or {}).get("hf_hub") or "").strip("/").split("/")
    return "/".join(parts[:2]) if len(parts) >= 2 else None
