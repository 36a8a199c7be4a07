"""``vlbench export ... --push-to-hub REPO``: the run's model-card results as a pull request on a model repository.

Always a pull request (``HfApi.create_commit(..., create_pr=True)``), never a commit to the default branch: the
repository owner reviews what a benchmark wrote into their card. The card is the repository's own README.md (read
from its default branch) with the run's model-index merged in, plus the ``.eval_results`` file. The token and the
Hub are huggingface_hub's: ``HF_TOKEN`` (or a saved login) and ``HF_ENDPOINT``.
"""

from __future__ import annotations

import sys

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
    except (LocalEntryNotFoundError, OfflineModeIsEnabled):  # the Hub did not answer: the card is unknown, not absent
        raise VlbenchError(f"--push-to-hub: the Hub at {api.endpoint} could not be reached to read {repo!r}'s "
                           "README.md", "check the network and HF_ENDPOINT, and unset HF_HUB_OFFLINE") from None
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


def push(record: RunRecord, repo: str, name: str) -> str:
    """Open a pull request on model repository ``repo`` with the run's results; returns the PR's URL."""
    from huggingface_hub import CommitOperationAdd, HfApi
    from huggingface_hub.errors import HfHubHTTPError

    api = HfApi()  # HF_TOKEN / HF_ENDPOINT as huggingface_hub reads them
    try:
        card = modelindex.model_card(record, name, _existing_card(api, repo))
        results = modelindex.eval_results_yaml(record).encode("utf-8")
        ops = [CommitOperationAdd("README.md", str(card).encode("utf-8")),
               CommitOperationAdd(modelindex.eval_results_path(record), results)]
        info = api.create_commit(repo_id=repo, operations=ops, create_pr=True,
                                 commit_message=f"Add vlbench image-text retrieval results ({record.dataset.name})",
                                 commit_description=f"vlbench {record.vlbench_version or ''} run {record.run_id}: "
                                                    f"model `{record.model.spec}`, dataset {record.dataset.name} "
                                                    f"(content hash {record.dataset.hash[:12]}), conditions "
                                                    + ", ".join(record.condition_names()))
    except ValueError as exc:  # the Hub's check of the card's YAML (api/validate-yaml) said no
        raise VlbenchError(f"--push-to-hub: the Hub rejected the model card for {repo!r}: {exc}",
                           "fix the metadata of the repository's README.md, then push again") from None
    except _transport_errors() as exc:  # connection refused, timed out, ... while committing
        raise VlbenchError(f"--push-to-hub: the Hub at {api.endpoint} could not be reached ({type(exc).__name__})",
                           "check the network and HF_ENDPOINT, then push again") from None
    except HfHubHTTPError as exc:
        status = getattr(getattr(exc, "response", None), "status_code", None)
        raise VlbenchError(f"--push-to-hub: the Hub refused the pull request on {repo!r} (HTTP {status}: "
                           f"{str(exc).splitlines()[0]})", "set HF_TOKEN to a token with write access to the "
                           "repository (or one that may open pull requests on it)") from None
    return str(info.pr_url or info.commit_url)
