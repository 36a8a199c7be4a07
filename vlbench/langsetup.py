"""``vlbench setup-language-data``: install NLTK's tokenizer and tagger data online (``nltk.download``) or
offline from a copied ``nltk_data`` folder or archive (``--from``), checked file by file and loaded through
NLTK once before it is copied into vlbench's language-data store; the spaCy model and WordNet are checked too.
What is checked and where it is looked for: :mod:`vlbench.langdata`.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import shutil
import sys
import tempfile
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
from .util.archive import check_regular, extract
from .util.fetch import DownloadError, download, fetch_bytes, mirrored
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


#: the most an --from archive (or a downloaded NLTK package) may extract to: the two NLTK packages and WordNet
#: take about 60 MB; a whole nltk_data folder may not fit (archive only the folders vlbench needs)
MAX_LANGUAGE_DATA_BYTES = 512 << 20
_BOUND_HINT = ("archive only the folders vlbench needs: tokenizers/punkt_tab, taggers/averaged_perceptron_tagger_eng "
               "(and corpora/wordnet), or give the unpacked folder")


def _extract(archive: Path, dest: Path) -> None:
    try:
        extract(archive, dest, max_bytes=MAX_LANGUAGE_DATA_BYTES)
    except DataError as exc:
        raise DataError(exc.message, _BOUND_HINT if "more than" in exc.message else exc.hint) from None


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
            shutil.copytree(root / folder, scratch / folder, symlinks=True)
    for _, folder, z in zips:
        _extract(z, scratch / folder.split("/")[0])
    return scratch


def _unpack(source: Path, work: Path) -> Path:
    """A folder as it is; a .zip / .tar / .tar.gz / .tgz extracted into ``work`` (bounded, no links, no FIFOs:
    vlbench.util.archive)."""
    if source.is_dir():
        return source
    if not source.name.lower().endswith((".zip", ".tar", ".tar.gz", ".tgz", ".tar.bz2", ".tar.xz")):
        check_regular(source)
        raise DataError(f"--from {str(source)!r} is neither a folder nor a .zip/.tar.gz archive",
                        f"give the nltk_data folder copied from a machine that has the data, or an archive of "
                        f"it: {OFFLINE_ROUTE}")
    _extract(source, work / "archive")
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


def install_from(source, packages=(TOKENIZER, TAGGER), *, source_label: str | None = None) -> Path:
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
        own = _copy_into_store(root, packages, source_label or str(src.resolve()))
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


#: NLTK's data index (what nltk.download reads); VLBENCH_MIRROR applies to it and to the archives it lists
NLTK_INDEX = "https://raw.githubusercontent.com/nltk/nltk_data/gh-pages/index.xml"
MAX_INDEX_BYTES = 8 << 20


def _index_entries(url: str, packages) -> dict:
    """{package id: its index attributes (url, subdir, checksum, sha256_checksum)} from NLTK's data index."""
    from xml.etree import ElementTree  # lazy: only the online route reads XML

    try:
        body = fetch_bytes(url)
        if len(body) > MAX_INDEX_BYTES:
            raise DataError(f"NLTK's data index {mirrored(url)} is over {MAX_INDEX_BYTES:,} bytes", hint(packages))
        root = ElementTree.fromstring(body)
    except DownloadError as exc:
        raise DataError(f"NLTK's data index could not be fetched: {exc.message}", hint(packages)) from None
    except ElementTree.ParseError as exc:
        raise DataError(f"NLTK's data index {mirrored(url)} is not valid XML ({exc})", hint(packages)) from None
    return {p.get("id"): dict(p.attrib) for p in root.iter("package")}


def fetch(packages=(TOKENIZER, TAGGER)) -> Path:
    """The online route: NLTK's data index and package archives through vlbench's downloader (VLBENCH_MIRROR,
    resume, retries; nltk.download ignores the mirror setting and refuses a mirror on a private address), each
    archive checked against the index's checksums, then installed exactly as by ``--from`` (bounded extraction,
    file checks, one load through NLTK)."""
    import hashlib  # lazy: only the online route needs md5

    names = {p: p if layout() is PACKAGES else {TOKENIZER: "punkt", TAGGER: "averaged_perceptron_tagger"}[p]
             for p in packages}
    index = _index_entries(NLTK_INDEX, packages)
    store().mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".download.", dir=store()) as work:
        for p, name in names.items():
            info = index.get(name)
            if not info or not info.get("url"):
                raise DataError(f"NLTK's data index {mirrored(NLTK_INDEX)} lists no package {name!r}", hint(packages))
            dest = Path(work) / (info.get("subdir") or layout()[p][0].split("/")[0]) / f"{name}.zip"
            try:
                download(info["url"], dest, sha256=info.get("sha256_checksum"), what=f"NLTK's {name}")
            except DownloadError as exc:
                raise DataError(f"NLTK's {name} could not be downloaded: {exc.message}", hint(packages)) from None
            if info.get("checksum") and hashlib.md5(dest.read_bytes()).hexdigest() != info["checksum"]:
                raise DataError(f"NLTK's {name} from {mirrored(info['url'])} does not match the md5 its index "
                                "gives; nothing was installed", "try again later; " + hint(packages))
        return install_from(work, packages, source_label=f"NLTK data index {mirrored(NLTK_INDEX)}")


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
