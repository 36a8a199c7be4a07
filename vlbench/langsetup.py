"""``vlbench setup-language-data``: install NLTK's tokenizer and tagger data online (``nltk.download``) or
offline from a copied ``nltk_data`` folder or archive (``--from``), checked file by file and loaded through
NLTK once before it is copied into vlbench's language-data store; the spaCy model and WordNet are checked too.
What is checked and where it is looked for: :mod:`vlbench.langdata`.
"""

from __future__ import annotations

import datetime as _dt
import io
import json
import os
import shutil
import sys
import tempfile
import zipfile
from pathlib import Path

from .errors import DataError
from .langdata import (
    OFFLINE_ROUTE,
    PACKAGES,
    PROVENANCE,
    TAGGER,
    TOKENIZER,
    find,
    hint,
    layout,
    missing,
    nltk_version,
    read_provenance,
    store,
    verify,
)
from .util.io import sha256_file
from .util.paths import offline


def _locate_root(top: Path) -> Path:
    """The nltk_data root inside ``top``: ``top`` itself, or a folder up to 3 levels down that has a
    tokenizers/ or taggers/ folder (nltk_data/, a user's home copy, ...)."""
    lay = layout()
    best, level = None, [top]
    for _ in range(4):
        for d in level:
            hits = sum((d / folder.split("/")[0]).is_dir() for folder, _ in lay.values())
            if hits == len(lay):
                return d
            if hits and best is None:
                best = d
        level = [c for d in level for c in sorted(d.iterdir()) if c.is_dir() and not c.name.startswith(".")]
    return best or top


def _unzip_packages(root: Path, work: Path) -> Path:
    """An nltk_data copy that has only ``tokenizers/punkt_tab.zip`` (NLTK's download format) gets it extracted
    into a scratch copy of the needed folders; returns the root to read from."""

    lay = layout()
    need = [(p, folder) for p, (folder, _) in lay.items() if not (root / folder).is_dir()]
    zips = [(p, folder, root / folder.split("/")[0] / f"{folder.split('/')[1]}.zip") for p, folder in need]
    zips = [z for z in zips if z[2].is_file()]
    if not zips:
        return root
    scratch = work / "unzipped"
    for folder, _ in lay.values():
        if (root / folder).is_dir():
            shutil.copytree(root / folder, scratch / folder)
    for _, folder, z in zips:
        with zipfile.ZipFile(z) as zf:
            _safe_members(zf.namelist(), z)
            zf.extractall(scratch / folder.split("/")[0])
    return scratch


def _safe_members(names, archive: Path) -> None:
    for n in names:
        parts = Path(n).parts
        if n.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
            raise DataError(f"archive {str(archive)!r} holds an unsafe path {n!r}",
                            "make the archive from the nltk_data folder itself (e.g. zip -r nltk_data.zip nltk_data)")


def _unpack(source: Path, work: Path) -> Path:
    """A folder as it is; a .zip / .tar / .tar.gz / .tgz extracted into ``work``."""
    import tarfile  # lazy: vlbench --help imports this module; keep it light

    if source.is_dir():
        return source
    name = source.name.lower()
    try:
        if name.endswith(".zip"):
            with zipfile.ZipFile(source) as zf:
                _safe_members(zf.namelist(), source)
                zf.extractall(work / "archive")
        elif name.endswith((".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")):
            with tarfile.open(source) as tf:
                members = tf.getmembers()
                _safe_members([m.name for m in members], source)
                tf.extractall(work / "archive", members=[m for m in members if m.isfile() or m.isdir()])
        else:
            raise DataError(f"--from {str(source)!r} is neither a folder nor a .zip/.tar.gz archive",
                            f"give the nltk_data folder copied from a machine that has the data, or an archive of "
                            f"it: {OFFLINE_ROUTE}")
    except (zipfile.BadZipFile, tarfile.TarError, EOFError) as exc:
        raise DataError(f"--from {str(source)!r} is not a readable archive ({exc})",
                        "copy the archive again, or give the unpacked nltk_data folder") from None
    return work / "archive"


# ---------------------------------------------------------------- installing

def _copy_into_store(root: Path, packages, source: str) -> Path:
    """Copy each package's folder from ``root`` into the store (replacing an older copy) and record it."""

    own = store()
    lay = layout()
    recorded = read_provenance(own)
    for p in packages:
        folder, files = lay[p]
        target = own / folder
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
        for f in files:  # NLTK refuses symlinks pointing outside its data folders: real copies
            shutil.copyfile(root / folder / f, tmp / f)
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
        recorded[p] = {"source": source, "installed": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
                       "nltk": nltk_version(), "sha256": {f: sha256_file(target / f) for f in files}}
    (own / PROVENANCE).write_text(json.dumps(recorded, indent=1, sort_keys=True), encoding="utf-8")
    return own


def load_check(root: Path, packages=(TOKENIZER, TAGGER)) -> None:
    """Load the packages under ``root`` through NLTK once, in a fresh process that searches ``root`` first."""
    import subprocess  # lazy: vlbench --help imports this module; keep it light

    code = ("import nltk\n"
            "toks = nltk.word_tokenize(\"A dog's red ball (on a 'green' mat).\")\n"
            "assert toks[:3] == ['A', 'dog', \"'s\"], toks\n")
    if TAGGER in packages:
        code += "tags = dict(nltk.pos_tag(toks))\nassert tags['dog'].startswith('NN'), tags\n"
    env = {**os.environ, "NLTK_DATA": str(root)}
    try:
        done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300)
    except subprocess.TimeoutExpired:
        raise DataError("loading the NLTK data through nltk took over 5 minutes", "run the command again") from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["?"])[-1]
        raise DataError(f"NLTK {nltk_version()} cannot use the copy under {root}: {last}",
                        f"copy the nltk_data folder of a machine whose NLTK is 3.9 or newer (the files of "
                        f"{', '.join(packages)}), then: {OFFLINE_ROUTE}")


def install_from(source, packages=(TOKENIZER, TAGGER)) -> Path:
    """The offline route: check the copy at ``source`` (folder or archive), copy it into the store, load it
    once through NLTK. Returns the store. Raises DataError naming every problem."""
    src = Path(source).expanduser()
    if not src.exists():
        raise DataError(f"--from {str(source)!r} does not exist",
                        f"copy the nltk_data folder (e.g. ~/nltk_data) from a machine that has "
                        f"{' and '.join(packages)}, then: {OFFLINE_ROUTE}")
    store().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".from.", dir=store()) as work:
        root = _locate_root(_unpack(src, Path(work)))
        root = _unzip_packages(root, Path(work))
        problems = verify(root, packages)
        if problems:
            raise DataError(f"--from {str(source)!r} is not a usable copy of NLTK's "
                            f"{' and '.join(packages)}: " + "; ".join(problems),
                            "copy the whole nltk_data folder from a machine where "
                            f"python -c \"import nltk; nltk.data.find('{layout()[packages[0]][0]}')\" works, "
                            f"then: {OFFLINE_ROUTE}")
        load_check(root, packages)
        own = _copy_into_store(root, packages, str(src.resolve()))
        _copy_wordnet(root, own)
        return own


def _copy_wordnet(root: Path, own: Path) -> None:
    """A copy that also holds WordNet (corpora/wordnet with its lexnames table) gives it to the store too,
    when NLTK finds none yet."""
    from .lang import wordnet_available  # lazy: vlbench --help imports this module; keep it light

    wn = root / "corpora" / "wordnet"
    if not ((wn / "data.noun").is_file() and (wn / "lexnames").is_file()) or wordnet_available():
        return
    target = own / "corpora" / "wordnet"
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet.", dir=target.parent))
    for f in wn.iterdir():
        if f.is_file():
            shutil.copyfile(f, tmp / f.name)
    os.replace(tmp, target)


def fetch(packages=(TOKENIZER, TAGGER)) -> Path:
    """The online route: ``nltk.download`` into the store, then the same checks as the offline route."""
    import nltk

    own = store()
    own.mkdir(parents=True, exist_ok=True)
    for p in packages:
        name = p if layout() is PACKAGES else {TOKENIZER: "punkt", TAGGER: "averaged_perceptron_tagger"}[p]
        try:
            ok = nltk.download(name, download_dir=str(own), quiet=True, raise_on_error=True,
                               print_error_to=io.StringIO())  # the error goes into our message instead
        except Exception as exc:  # the downloader raises many kinds when its server cannot be reached
            raise DataError(f"nltk.download('{name}') failed ({type(exc).__name__}: {exc})", hint(packages)) from None
        if not ok:
            raise DataError(f"nltk.download('{name}') failed", hint(packages))
    problems = verify(own, packages)
    if problems:
        raise DataError("the downloaded NLTK data is incomplete: " + "; ".join(problems), hint(packages))
    recorded = read_provenance(own)
    for p in packages:
        recorded[p] = {"source": "nltk.download", "nltk": nltk_version(),
                       "sha256": {f: sha256_file(own / layout()[p][0] / f) for f in layout()[p][1]}}
    (own / PROVENANCE).write_text(json.dumps(recorded, indent=1, sort_keys=True), encoding="utf-8")
    return own


# ---------------------------------------------------------------- vlbench setup-language-data

def configure(parser) -> None:
    parser.description = ("Check and install the language data: the spaCy English model, WordNet, and NLTK's "
                          "punkt_tab tokenizer and averaged_perceptron_tagger_eng tagger (needed by the "
                          "perturbation variants that tokenize with NLTK: vlbench ls perturbation-variants). Online, "
                          "missing NLTK data is downloaded; offline, give --from with an nltk_data folder (or a "
                          ".zip/.tar.gz of "
                          "one) copied from a machine that has it. See docs/reproducing.md.")
    parser.add_argument("--from", dest="source", default=None, metavar="FOLDER_OR_ARCHIVE",
                        help="install punkt_tab and averaged_perceptron_tagger_eng from this nltk_data folder or "
                             "archive (files and formats checked, then loaded through NLTK once)")
    parser.add_argument("--cache-dir", default=None, help="the cache folder whose nltk_data store receives the data "
                                                          "(default $VLBENCH_CACHE_DIR, else ~/.cache/vlbench)")
    parser.add_argument("--nltk-optional", action="store_true",
                        help="when NLTK's tokenizer/tagger data cannot be had (offline, no --from), print the offline "
                             "route and exit 0 (scripts/setup.sh); spaCy and WordNet stay required")


def main(args) -> int:
    from . import lang, stores  # lazy: vlbench --help imports this module; keep it light

    with stores.using(args.cache_dir):
        print(f"spaCy model: {lang.spacy_model_name()}")
        packages = (TOKENIZER, TAGGER)
        # a --from copy is installed before WordNet is looked for: it may be what brings WordNet (offline)
        installed = install_from(args.source) if args.source else None
        print(f"WordNet: {lang.ensure_wordnet()}")
        if installed is not None:
            print(f"NLTK {', '.join(packages)}: installed from {args.source} into {installed}")
        elif not missing(packages):
            print(f"NLTK {', '.join(packages)}: " + ", ".join(f"{p} in {find(p)}" for p in packages))
        else:
            try:
                if offline():
                    raise DataError(f"NLTK's {' and '.join(missing(packages))} are not installed and this machine is "
                                    "offline (they are needed by the perturbation variants that tokenize with NLTK; "
                                    "vlbench ls perturbation-variants)", hint(missing(packages)))
                print(f"NLTK {', '.join(packages)}: downloaded into {fetch(tuple(missing(packages)))}")
            except DataError as exc:
                if not args.nltk_optional:
                    raise
                print(f"NLTK {', '.join(missing(packages))}: not installed: {exc.message}\n  fix: {exc.hint}")
        print(f"NLTK {nltk_version()}; language data store: {store()}")
    return 0
