"""Any image-text dataset on the Hugging Face Hub as a test set: ``--dataset hf:ORG/NAME[?OPTIONS]``.

``hf:ORG/NAME?split=test&image=image&caption=caption,sentences&config=default&revision=main``; every option
may be left out (the defaults are detected and recorded, and the run prints them):

* ``split``: the split's parquet files (``test`` when the repository has one, else its only split);
* ``config``: the configuration (sub-folder) when the repository has several;
* ``image``: the image column (a column the ``datasets`` library declared an Image, or a struct with a
  ``bytes`` field, or a binary column named here); ``caption``: one or more caption columns, comma-separated
  (strings or lists of strings), read in the order given;
* ``revision``: a branch, tag or commit of the dataset repository.

The files come through huggingface_hub (``list_repo_files`` and ``snapshot_download`` with
``repo_type="dataset"`` and only the split's parquet files allowed), so HF_ENDPOINT, HF_TOKEN, HF_HUB_CACHE,
HF_HUB_OFFLINE and proxies apply as they do for models, and a cached snapshot is used offline. The parquet
files are read with pyarrow (:mod:`.parquet`): the images are written once into the data folder and from
then on they are files like a custom manifest's, hashed by content wherever vlbench hashes images.

Why pyarrow and not the ``datasets`` library: a test set is a few parquet files read once, row by row.
``datasets`` would add its own cache (an Arrow copy of every split it prepares, beside the Hub's cache), its
own download manager and a dozen dependencies (dill, multiprocess, xxhash, fsspec versions pinned to its
release), and it decodes images into PIL objects that vlbench would write back to disk. pyarrow reads the
same files, is what ``datasets`` itself uses underneath, and keeps the one cache the user configured.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..errors import DataError
from ..util.fetch import hub_blob_problem
from ..util.io import sha256_file
from ..util.paths import default_data_dir, offline
from ..util.query import QueryProblem, query_pairs

PREFIX = "hf:"
OPTIONS = ("split", "config", "image", "caption", "revision")
_REPO = re.compile(r"^(?:[A-Za-z0-9][\w.-]{0,95}/)?[A-Za-z0-9][\w.-]{0,95}$")
_SHARD = re.compile(r"(.+?)-\d+-of-\d+(?:-[0-9a-f]+)?")
EXAMPLE = "hf:ORG/NAME?split=test&image=image&caption=caption"


@dataclass(frozen=True)
class HubSpec:
    """What ``hf:ORG/NAME?...`` asks for (None / empty: detect)."""

    repo: str
    split: str | None = None
    config: str | None = None
    image: str | None = None
    captions: tuple[str, ...] = field(default_factory=tuple)
    revision: str | None = None

    def canonical(self) -> str:
        """The spec with its options in one fixed order: the dataset's name in results and run ids."""
        opts = [("split", self.split), ("config", self.config), ("image", self.image),
                ("caption", ",".join(self.captions) or None), ("revision", self.revision)]
        query = "&".join(f"{k}={v}" for k, v in opts if v)
        return f"{PREFIX}{self.repo}" + (f"?{query}" if query else "")


def is_hub_spec(spec) -> bool:
    return isinstance(spec, str) and spec.startswith(PREFIX)


def parse_spec(spec: str) -> HubSpec:
    """``hf:ORG/NAME?split=..&image=..&caption=a,b&config=..&revision=..``; every problem named."""
    repo, _, query = spec[len(PREFIX):].partition("?")
    repo = repo.strip()
    if not _REPO.match(repo) or "--" in repo or ".." in repo:
        raise DataError(f"dataset {spec!r}: {repo!r} is not a Hub dataset id",
                        f"write hf:ORG/NAME, e.g. {EXAMPLE}")
    try:
        pairs = query_pairs(query)
    except QueryProblem as exc:
        raise DataError(f"dataset {spec!r}: {exc}", f"e.g. {EXAMPLE}") from None
    values: dict = {}
    for key, value in pairs:
        if key not in OPTIONS:
            raise DataError(f"dataset {spec!r}: unknown option {key!r}",
                            f"the options are {', '.join(OPTIONS)}, e.g. {EXAMPLE}")
        if not value:
            raise DataError(f"dataset {spec!r}: option {key!r} is empty", "give it a value or leave it out")
        values[key] = value
    captions = tuple(c.strip() for c in values.pop("caption", "").split(",") if c.strip())
    if len(set(captions)) != len(captions):
        raise DataError(f"dataset {spec!r}: a caption column is named twice", "name each caption column once")
    return HubSpec(repo, captions=captions, **values)


def canonical_name(spec: str) -> str:
    """The name a run on ``spec`` records (the spec's options in a fixed order)."""
    return parse_spec(spec).canonical()


# ----------------------------------------------------------------------------------------------
# the repository's files


def _hub_error(hs: HubSpec, exc: Exception) -> DataError | None:
    """A Hub answer that no cache can mend (no such repository, revision, or access), as a DataError."""
    from huggingface_hub import errors  # lazy: huggingface_hub is imported only for a Hub dataset

    if isinstance(exc, errors.GatedRepoError):
        return DataError(f"Hub dataset {hs.repo!r} is gated and this token has no access ({type(exc).__name__})",
                         "accept its terms on the Hub and set HF_TOKEN (or run 'hf auth login')")
    if isinstance(exc, errors.RevisionNotFoundError):
        return DataError(f"Hub dataset {hs.repo!r} has no revision {hs.revision!r}",
                         "give a branch, tag or commit it has (revision=...), or leave revision out")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return DataError(f"Hub dataset {hs.repo!r} was not found at the Hub endpoint (or it is private)",
                         "check the id (ORG/NAME, as in the dataset's Hub address); for a private dataset set "
                         "HF_TOKEN; for a mirror set HF_ENDPOINT")
    return None


def _brief(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0][:200]}" if text else type(exc).__name__


def _snapshot(hs: HubSpec, patterns: list[str], local: bool, why_local: str = "") -> Path:
    """snapshot_download of the dataset repository, only ``patterns`` (from the cache alone when ``local``)."""
    from huggingface_hub import snapshot_download  # lazy: huggingface_hub is imported only for a Hub dataset

    try:
        return Path(snapshot_download(hs.repo, repo_type="dataset", revision=hs.revision, allow_patterns=patterns,
                                      local_files_only=local))
    except Exception as exc:
        known = _hub_error(hs, exc)
        if known is not None:
            raise known from None
        how = (f"it is not in the Hugging Face cache, and {why_local or 'the Hub may not be used (offline)'}"
               if local else f"the download failed ({_brief(exc)})")
        raise DataError(f"Hub dataset {hs.repo!r}" + (f" at {hs.revision!r}" if hs.revision else "") + f": {how}",
                        "run once with network access to the Hub (or its mirror: HF_ENDPOINT) to fill the cache "
                        "(HF_HUB_CACHE), or unset HF_HUB_OFFLINE / VLBENCH_OFFLINE") from None


def repo_parquet_files(hs: HubSpec, download: bool) -> tuple[list[str], bool]:
    """The parquet files of the repository at the revision, and whether the Hub answered: its listing when it may
    be asked (the cached snapshot's when it does not answer). The download that follows asks for the same revision
    as given (not the commit), so the cache records the branch and an offline run finds it again."""
    why = ""
    if download:
        from huggingface_hub import HfApi  # lazy: huggingface_hub is imported only for a Hub dataset

        try:
            files = HfApi().list_repo_files(hs.repo, repo_type="dataset", revision=hs.revision)
            return sorted(f for f in files if f.endswith(".parquet")), True
        except Exception as exc:
            known = _hub_error(hs, exc)
            if known is not None:
                raise known from None
            why = f"the Hub did not answer ({_brief(exc)})"
    folder = _snapshot(hs, [], local=True, why_local=why)  # no pattern: the cached snapshot's folder, nothing fetched
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*.parquet")), False


def split_of(path: str) -> tuple[str, str]:
    """(config, split) of a parquet file by the Hub's layouts: ``data/test-00000-of-00001.parquet`` (the
    ``datasets`` library), ``CONFIG/test-00000-of-00002.parquet``, ``CONFIG/test/0000.parquet`` (the Hub's
    parquet conversion), ``test.parquet``, ``data/test.parquet``. A folder named ``data`` is no config."""
    *dirs, name = path.split("/")
    stem = name[:-len(".parquet")] if name.endswith(".parquet") else name
    shard = _SHARD.fullmatch(stem)
    if shard:
        split = shard.group(1)
    elif stem.isdigit() and dirs:
        split, dirs = dirs[-1], dirs[:-1]
    else:
        split = stem
    return "/".join(d for d in dirs if d != "data") or "default", split


def _pick(kind: str, asked: str | None, found: list[str], preferred: tuple, hs: HubSpec) -> str:
    if asked is not None:
        if asked not in found:
            raise DataError(f"Hub dataset {hs.repo!r} has no {kind} {asked!r}; its {kind}s: {', '.join(found)}",
                            f"give {kind}=NAME with one of them")
        return asked
    for name in preferred:
        if name in found:
            return name
    if len(found) == 1:
        return found[0]
    raise DataError(f"Hub dataset {hs.repo!r} has {len(found)} {kind}s ({', '.join(found)}) and none is the default",
                    f"choose one: hf:{hs.repo}?{kind}=NAME")


def choose_files(hs: HubSpec, files: list[str]) -> tuple[str, str, list[str]]:
    """(config, split, its parquet files) for the spec; the defaults: config ``default`` or the only one, split
    ``test`` or the only one."""
    if not files:
        raise DataError(f"Hub dataset {hs.repo!r}" + (f" at {hs.revision!r}" if hs.revision else "") +
                        " has no parquet files", "vlbench reads datasets stored as parquet (as the datasets "
                        "library's push_to_hub writes them, or the Hub's parquet conversion: revision="
                        "refs/convert/parquet)")
    parts = {f: split_of(f) for f in files}
    config = _pick("config", hs.config, sorted({c for c, _ in parts.values()}), ("default",), hs)
    splits = sorted({s for c, s in parts.values() if c == config})
    split = _pick("split", hs.split, splits, ("test",), hs)
    return config, split, [f for f in files if parts[f] == (config, split)]


def fetch(hs: HubSpec, download: bool | None) -> tuple[Path, str, str, list[str]]:
    """The local snapshot folder holding the split's parquet files (downloaded when allowed and missing), with
    the config, split and file names chosen."""
    download = (not offline()) if download is None else download
    files, online = repo_parquet_files(hs, download)
    try:
        config, split, chosen = choose_files(hs, files)
    except DataError as exc:
        if online:
            raise
        raise DataError(f"{exc.message} (in the cached snapshot: the Hub was not asked)", exc.hint) from None
    return _snapshot(hs, chosen, local=not online), config, split, chosen


def load_hub(spec: str, *, data_dir=None, download: bool | None = None) -> tuple[str, list[dict], Path, dict]:
    """``hf:ORG/NAME?...`` as (name, manifest rows, image folder, source record), images written under
    ``<data dir>/hub/``; core.load_dataset builds the Dataset from them as from a manifest."""
    from .parquet import read_split  # lazy: the parquet reader imports pyarrow, needed only for a Hub dataset

    hs = parse_spec(spec)
    folder, config, split, files = fetch(hs, download)
    commit = folder.name  # snapshots/<commit>
    data_dir = Path(data_dir).expanduser() if data_dir else default_data_dir()
    image_root = data_dir.resolve() / "hub" / hs.repo.replace("/", "--") / commit / config / split
    digests = {f: sha256_file(folder / f) for f in files}
    for f, digest in digests.items():  # a cached file must still be what its blob's name says the Hub sent
        tampered = hub_blob_problem(folder / f, digest)
        if tampered:
            raise DataError(f"{hs.repo}: {f} in the Hugging Face cache is not what the Hub sent: {tampered}",
                            f"delete {(folder / f).resolve()} and the link {folder / f}, and run again online")
    rows, root, source = read_split([folder / f for f in files], image_root, hs,
                      {"hub": hs.repo, "revision": commit, "config": config, "split": split,
                                    "files": digests,
                                    "spec": replace(hs, revision=commit).canonical()})  # the same data again
    return hs.canonical(), rows, root, source
