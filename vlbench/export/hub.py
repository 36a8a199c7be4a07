"""``vlbench export ... --push-to-hub REPO``: the run's model-card results as a pull request on a model repository.

Always a pull request (``HfApi.create_commit(..., create_pr=True)``), never a commit to the default branch: the
repository owner reviews what a benchmark wrote into their card. The card is the repository's own README.md (read
from its default branch) with the run's model-index merged in, plus the ``.eval_results`` file. The token and the
Hub are huggingface_hub's: ``HF_TOKEN`` (or a saved login) and ``HF_ENDPOINT``.
"""

from __future__ import annotations

import socket
import sys
from urllib.parse import urlsplit

from ..errors import VlbenchError
from ..results import RunRecord
from . import modelindex


def _existing_card(api, repo: str) -> str | None:
    """The repository's README.md text, or None when it has none; VlbenchError when the repository is missing."""
    from huggingface_hub.errors import (
        EntryNotFoundError,
        LocalEntryNotFoundError,
        OfflineModeIsEnabled,
        RepositoryNotFoundError,
        RevisionNotFoundError,
    )

    try:
        path = api.hf_hub_download(repo_id=repo, filename="README.md")
    except (LocalEntryNotFoundError, OfflineModeIsEnabled) as exc:  # the card is unknown, not absent: why
        raise explain(exc, api.endpoint, repo) from None
    except EntryNotFoundError:  # the repository has no README.md: a new card
        return None
    except (RepositoryNotFoundError, RevisionNotFoundError) as exc:
        raise VlbenchError(f"--push-to-hub: the model repository {repo!r} was not found on {api.endpoint} "
                           f"({type(exc).__name__})", "create the repository first, check the name, and set HF_TOKEN "
                           "to a token that can read it (HF_ENDPOINT for another Hub)") from None
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def _transport_errors() -> tuple:
    """The connection errors of the HTTP client huggingface_hub uses (httpx, or its fork httpx2), as loaded."""
    found = []
    for module, name in (("httpx2", "TransportError"), ("httpx", "TransportError")):
        cls = getattr(sys.modules.get(module), name, None)
        if isinstance(cls, type) and issubclass(cls, BaseException):
            found.append(cls)
    return tuple(found) or (ConnectionError,)


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes: huggingface_hub wraps the HTTP error or the connection error it met."""
    out: list[BaseException] = []
    while exc is not None and exc not in out:
        out.append(exc)
        exc = exc.__cause__ or exc.__context__  # type: ignore[assignment]
    return out


def _reachable(endpoint: str) -> str | None:
    """Why the Hub's host cannot be connected to (a dead port, an unknown host), or None; within 10 seconds,
    so a dead endpoint is said at once instead of after huggingface_hub's retries."""

    url = urlsplit(endpoint)
    if not url.hostname:
        return f"HF_ENDPOINT {endpoint!r} is not a URL"
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        socket.create_connection((url.hostname, port), timeout=10).close()
    except (OSError, ValueError) as exc:
        return f"{type(exc).__name__}: {getattr(exc, 'strerror', None) or exc}"
    return None


def explain(exc: BaseException, endpoint: str, repo: str) -> VlbenchError:
    """One line for what went wrong while pushing: the Hub unreachable, the token refused, the repository missing,
    the Hub failing, an answer that is no Hub's, or the Hub's rejection of the card -- each with its fix."""
    from huggingface_hub.errors import HfHubHTTPError, OfflineModeIsEnabled, RepositoryNotFoundError

    where = f"--push-to-hub: the Hub at {endpoint}"
    chain = _chain(exc)
    if any(isinstance(e, OfflineModeIsEnabled) for e in chain):
        return VlbenchError(f"{where} cannot be used: HF_HUB_OFFLINE is set", "unset HF_HUB_OFFLINE, then push again")
    if any(isinstance(e, RepositoryNotFoundError) for e in chain):
        return VlbenchError(f"{where} has no model repository {repo!r} that this token can see",
                            "create the repository first, check the name, and set HF_TOKEN to a token that can "
                            "read it")
    http = next((e for e in chain if isinstance(e, HfHubHTTPError) and getattr(e, "response", None) is not None),
                None)
    if http is not None:
        status = http.response.status_code
        said = " ".join((getattr(http, "server_message", None) or "").split())[:200]
        said = f": {said}" if said else ""
        if status in (401, 403):
            return VlbenchError(f"{where} refused the token for {repo!r} (HTTP {status}{said})",
                                "set HF_TOKEN to a token with write access to the repository (or one that may "
                                "open pull requests on it)")
        if status == 404:
            return VlbenchError(f"{where} has no model repository {repo!r} (HTTP 404{said})",
                                "create the repository first and check the name (and HF_ENDPOINT)")
        if status >= 500:
            return VlbenchError(f"{where} failed while taking the pull request on {repo!r} (HTTP {status}{said})",
                                "push again later; check that HF_ENDPOINT is a Hugging Face Hub")
        return VlbenchError(f"{where} rejected the pull request on {repo!r} (HTTP {status}{said})",
                            "fix what the Hub names, then push again")
    transport = _transport_errors()
    broken = next((e for e in chain if isinstance(e, transport + (ConnectionError, TimeoutError))), None)
    if broken is not None:
        return VlbenchError(f"{where} could not be reached ({type(broken).__name__})",
                            "check the network and HF_ENDPOINT, then push again")
    if any(type(e).__name__ == "LocalEntryNotFoundError" for e in chain):  # no answer, and not in the cache
        return VlbenchError(f"{where} could not be reached to read {repo!r}'s README.md (the card is unknown, "
                            "so no pull request may replace it)", "check the network and HF_ENDPOINT, then push "
                            "again")
    bad_json = next((e for e in chain if type(e).__name__ == "JSONDecodeError"), None)
    if bad_json is not None:
        return VlbenchError(f"{where} answered with something that is not the Hub's JSON ({bad_json})",
                            "push again later (a failing Hub answers with an error page), and check that "
                            "HF_ENDPOINT is a Hugging Face Hub (unset it for huggingface.co)")
    if isinstance(exc, ValueError):  # the Hub's check of the card's YAML (api/validate-yaml) said no
        return VlbenchError(f"{where} rejected the model card for {repo!r}: {' '.join(str(exc).split())[:300]}",
                            "fix the metadata of the repository's README.md, then push again")
    return VlbenchError(f"{where}: the push to {repo!r} failed ({type(exc).__name__}: "
                        f"{' '.join(str(exc).split())[:300]})", "check HF_ENDPOINT and HF_TOKEN, then push again")


def push(record: RunRecord, repo: str, name: str, metrics: tuple[str, ...] | None = None) -> str:
    """Open a pull request on model repository ``repo`` with the run's results; returns the PR's URL."""
    from huggingface_hub import CommitOperationAdd, HfApi, constants

    api = HfApi()  # HF_TOKEN / HF_ENDPOINT as huggingface_hub reads them
    if constants.HF_HUB_OFFLINE:
        raise VlbenchError(f"--push-to-hub: the Hub at {api.endpoint} cannot be used: HF_HUB_OFFLINE is set",
                           "unset HF_HUB_OFFLINE, then push again")
    why = _reachable(api.endpoint)
    if why is not None:
        raise VlbenchError(f"--push-to-hub: the Hub at {api.endpoint} could not be reached ({why})",
                           "check the network and HF_ENDPOINT, then push again")
    card = modelindex.model_card(record, name, None, metrics)  # the run's own problems (--metrics) first
    try:
        card = modelindex.model_card(record, name, _existing_card(api, repo), metrics)
        results = modelindex.eval_results_yaml(record, metrics).encode("utf-8")
        ops = [CommitOperationAdd("README.md", str(card).encode("utf-8")),
               CommitOperationAdd(modelindex.eval_results_path(record), results)]
        info = api.create_commit(repo_id=repo, operations=ops, create_pr=True,
                                 commit_message=f"Add vlbench image-text retrieval results ({record.dataset.name})",
                                 commit_description=f"vlbench {record.vlbench_version or ''} run {record.run_id}: "
                                                    f"model `{record.model.spec}`, dataset {record.dataset.name} "
                                                    f"(content hash {record.dataset.hash[:12]}), conditions "
                                                    + ", ".join(record.condition_names()))
    except VlbenchError:
        raise
    except Exception as exc:  # noqa: BLE001 -- every cause as one line with its fix, never a traceback
        raise explain(exc, api.endpoint, repo) from None
    return str(info.pr_url or info.commit_url)
