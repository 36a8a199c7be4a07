"""One small generic registry for models, datasets, perturbations, metrics, protocols, galleries, perturbation
variants, granularity profiles, reproductions, sweep suites, sweep executors,
exporters, trackers and pair scorers.

* names are kebab-case slugs; registering a name twice is an error;
* entries may be lazy ``"module:attr"`` strings, so nothing heavy is imported until used;
* third-party packages add entries through the entry-point groups ``vlbench.<kind>``;
  plug-ins are discovered lazily, a plug-in that fails to load is reported (``vlbench ls``)
  and only fails a run that selects it, built-ins win name clashes, and
  ``VLBENCH_DISABLE_PLUGIN_AUTOLOAD=1`` turns discovery off;
* a *study* (a publication's protocol preset, its perturbation variant, its reproduction, ...) plugs in through
  the entry-point group ``vlbench.studies``: each entry is a function that registers the study's parts into
  these registries. Studies load once per process, after the built-ins and before the plug-ins, whichever
  registry is read first; the studies vlbench itself ships (``vlbench/studies/``) load even when plug-in
  discovery is off;
* unknown names get a "did you mean" answer.
"""

from __future__ import annotations

import difflib
import importlib
import importlib.metadata
import os
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .errors import PluginInterrupt, UnknownNameError, VlbenchError

_SLUG = re.compile(r"^[a-z0-9]+(?:[-_.][a-z0-9]+)*$")
PLUGIN_ENV = "VLBENCH_DISABLE_PLUGIN_AUTOLOAD"


@dataclass
class Entry:
    name: str
    target: Any  # object or "module:attr"
    description: str = ""
    source: str = "builtin"  # "builtin" or "plugin:<distribution> <version>"
    meta: dict = field(default_factory=dict)
    _loaded: Any = None

    def load(self) -> Any:
        if self._loaded is None:
            if isinstance(self.target, str):
                try:
                    self._loaded = resolve(self.target)
                except KeyboardInterrupt as exc:  # named: a plug-in that raises it at import is found
                    if isinstance(exc, PluginInterrupt):
                        raise
                    raise PluginInterrupt(f"{self.name!r} ({self.source}: {self.target})") from exc
            else:
                self._loaded = self.target
        return self._loaded


def valid_name(name) -> bool:
    """Whether ``name`` is a registrable name: a lowercase slug (``my-model``, ``r_precision``)."""
    return isinstance(name, str) and bool(_SLUG.match(name))


def resolve(target: str) -> Any:
    module, _, attr = target.partition(":")
    obj = importlib.import_module(module)
    for part in filter(None, attr.split(".")):
        obj = getattr(obj, part)
    return obj


def close_matches(name: str, choices, n: int = 3) -> list[str]:
    choices = list(choices)
    out = difflib.get_close_matches(name, choices, n=n, cutoff=0.5)
    if not out:  # prefix / substring matches help with e.g. "flickr" -> flickr30k
        out = [c for c in choices if name and (c.startswith(name) or name in c)][:n]
    return out


BUILTIN_MODULES = {"models": "vlbench.models.adapter", "datasets": "vlbench.datasets.builtin",
                   "perturbations": "vlbench.perturbations", "metrics": "vlbench.metrics.specs",
                   "protocols": "vlbench.pipeline.presets", "granularity_profiles": "vlbench.granularity.features",
                   "galleries": "vlbench.pipeline.galleries",
                   "exporters": "vlbench.export.builtin",
                   "trackers": "vlbench.trackers.builtin",
                   "pair_scorers": "vlbench.models.pairs.builtin"}
STUDY_GROUP = "vlbench.studies"
#: name -> why a study's registration failed (shown by ``vlbench ls``; a run that needs its parts fails then)
study_errors: dict[str, str] = {}
_studies = {"loaded": False}


def _autoload_off() -> bool:
    return os.environ.get(PLUGIN_ENV, "").strip() not in ("", "0")


def load_studies() -> None:
    """Call the registration function of every study (entry-point group ``vlbench.studies``), once."""
    if _studies["loaded"]:
        return
    _studies["loaded"] = True

    for ep in importlib.metadata.entry_points(group=STUDY_GROUP):
        dist = getattr(ep, "dist", None)
        if _autoload_off() and (dist is None or dist.name != "vlbench"):
            continue
        try:
            ep.load()()
        except KeyboardInterrupt as exc:  # named, as for the other plug-ins (Entry.load)
            if isinstance(exc, PluginInterrupt):
                raise
            raise PluginInterrupt(f"study {ep.name!r} ({ep.value})") from exc
        except Exception as exc:  # a broken study fails only what uses its parts (they stay unregistered)
            study_errors[ep.name] = f"{ep.value}: {type(exc).__name__}: {exc}"


class Registry:
    def __init__(self, kind: str, builtin_module: str | None = None):
        self.kind = kind  # e.g. "models"; entry-point group is vlbench.<kind>
        self.builtin_module = builtin_module
        self._entries: dict[str, Entry] = {}
        self._plugins_loaded = False
        self.plugin_errors: dict[str, str] = {}

    # -- registration -------------------------------------------------------------
    def register(self, name: str, target: Any = None, *, description: str = "", source: str = "builtin",
                 **meta) -> Callable | None:
        """Register ``target`` under ``name``; usable as a decorator when target is None."""
        if target is None:
            def deco(obj):
                self.register(name, obj, description=description, source=source, **meta)
                return obj
            return deco
        if not valid_name(name):
            raise VlbenchError(f"invalid {self.kind} name {name!r}",
                               "use a lowercase kebab-case slug such as 'my-model'")
        if name in self._entries:
            raise VlbenchError(f"{self.kind} name {name!r} is registered twice "
                               f"({self._entries[name].source} and {source})",
                               "rename one of them")
        self._entries[name] = Entry(name, target, description, source, dict(meta))
        return None

    # -- plug-ins -----------------------------------------------------------------
    def _load_plugins(self) -> None:
        if self._plugins_loaded:
            return
        self._plugins_loaded = True
        if self.builtin_module:  # built-ins register first, so they win name clashes whatever the import order
            importlib.import_module(self.builtin_module)
        load_studies()
        if _autoload_off():
            return

        for ep in importlib.metadata.entry_points(group=f"vlbench.{self.kind}"):
            dist = getattr(ep, "dist", None)
            source = "plugin:" + (f"{dist.name} {dist.version}" if dist is not None else ep.value)
            if ep.name in self._entries:
                # built-ins (and earlier plug-ins) win name clashes; say so.
                self.plugin_errors[ep.name] = (f"{source} also defines {self.kind} {ep.name!r}; "
                                               f"the {self._entries[ep.name].source} entry wins")
                continue
            if not _SLUG.match(ep.name):
                self.plugin_errors[ep.name] = f"{source}: invalid name {ep.name!r} (use a kebab-case slug)"
                continue
            self._entries[ep.name] = Entry(ep.name, ep.value, "", source)

    # -- lookup -------------------------------------------------------------------
    def names(self) -> list[str]:
        self._load_plugins()
        return sorted(self._entries)

    def entries(self) -> list[Entry]:
        self._load_plugins()
        return [self._entries[n] for n in sorted(self._entries)]

    def entry(self, name: str) -> Entry:
        self._load_plugins()
        if name not in self._entries:
            matches = close_matches(name, self._entries)
            hint = (f"did you mean {', '.join(repr(m) for m in matches)}?" if matches else
                    f"run 'vlbench ls' to see the {self.kind}")
            raise UnknownNameError(f"unknown {self.kind[:-1] if self.kind.endswith('s') else self.kind} "
                                   f"{name!r}", hint)
        return self._entries[name]

    def get(self, name: str) -> Any:
        entry = self.entry(name)
        try:
            obj = entry.load()
            entry.meta["used"] = True  # plug-ins a run selected: recorded in results.json (plugin_versions)
            return obj
        except VlbenchError:
            raise
        except (Exception, SystemExit) as exc:  # a broken plug-in fails only the run that selects it;
            # SystemExit too: a plug-in whose import calls sys.exit(0) must not end a run "successfully"
            what = f"called sys.exit({exc.code!r}) while importing" if isinstance(exc, SystemExit) else \
                f"failed to load: {type(exc).__name__}: {exc}"
            raise VlbenchError(f"{self.kind} {name!r} ({entry.source}) {what}",
                               "reinstall or fix the package that provides it") from None

    def __contains__(self, name: str) -> bool:
        self._load_plugins()
        return name in self._entries


models = Registry("models", BUILTIN_MODULES["models"])
datasets = Registry("datasets", BUILTIN_MODULES["datasets"])
perturbations = Registry("perturbations", BUILTIN_MODULES["perturbations"])
metrics = Registry("metrics", BUILTIN_MODULES["metrics"])
#: named evaluation protocols: presets of run-option values (vlbench.pipeline.presets.Protocol)
protocols = Registry("protocols", BUILTIN_MODULES["protocols"])
#: the t2i gallery providers of ``--gallery`` (vlbench.pipeline.galleries.GalleryProvider)
galleries = Registry("galleries", BUILTIN_MODULES["galleries"])
#: other implementations of the registered perturbations (vlbench.perturbations.variants.PerturbationVariant)
perturbation_variants = Registry("perturbation_variants")
#: reproductions of published results, ``vlbench reproduce NAME`` (an object with ``configure(parser)``, ``main(args)``)
reproductions = Registry("reproductions")
#: named grids of runs, ``vlbench sweep --suite NAME`` (a vlbench.sweep.suites.Suite)
suites = Registry("suites", "vlbench.sweep.suites")
#: named sets of granularity feature readings (a dict of vlbench.granularity.FeatureOptions values)
granularity_profiles = Registry("granularity_profiles", BUILTIN_MODULES["granularity_profiles"])
#: the formats of ``vlbench export --format NAME`` (a vlbench.plugins.exporter.Exporter)
exporters = Registry("exporters", BUILTIN_MODULES["exporters"])
#: the experiment trackers of ``--report-to NAME`` (a vlbench.trackers.protocol.Tracker)
trackers = Registry("trackers", BUILTIN_MODULES["trackers"])
#: models that score (image, text) pairs, loaders ``(checkpoint, *, device, precision, ...) -> PairScorer``
#: (vlbench.models.pairs)
pair_scorers = Registry("pair_scorers", BUILTIN_MODULES["pair_scorers"])
#: where a sweep's runs execute, ``vlbench sweep --executor NAME`` (a vlbench.execution.Executor)
executors = Registry("executors", "vlbench.sweep.executors")


def plugin_versions() -> dict[str, str]:
    """Distribution and version of the plug-ins this process used (recorded in results): a model, dataset,
    perturbation, protocol, gallery or perturbation-variant plug-in once a run selected it (``get``), a metric
    plug-in once it was actually computed (a broken one is not "in use"); installed but unused plug-ins are
    left out."""
    out = {}
    for reg in (models, datasets, perturbations, metrics, protocols, galleries, perturbation_variants):
        for e in reg.entries():
            if not e.meta.get("computed" if reg is metrics else "used"):
                continue
            if e.source.startswith("plugin:"):
                out[f"{reg.kind}/{e.name}"] = e.source[len("plugin:"):]
    return out


class Names:
    """The names of a registry as a read-only sequence, read when used (argparse ``choices``, help texts), so
    defining an option does not load the registry: ``Names(protocols)``; ``first``: names listed before them."""

    def __init__(self, reg: Registry, first: tuple = ()):
        self._reg, self._first = reg, tuple(first)

    def _all(self) -> list[str]:
        return [*self._first, *(n for n in self._reg.names() if n not in self._first)]

    def __iter__(self):
        return iter(self._all())

    def __contains__(self, name) -> bool:
        return name in self._all()

    def __len__(self) -> int:
        return len(self._all())

    def __getitem__(self, i):
        return self._all()[i]

    def __repr__(self) -> str:
        return repr(tuple(self._all()))


class Records:
    """Typed records registered in-process by name, the built-ins imported on the first lookup: the choice
    tasks (vlbench.tasks.registry) and the rescore suites (vlbench.rescore.registry). ``builtin_modules``
    register the built-ins when imported; :meth:`all` lists them first, in that order (``module_of`` says
    which module a record belongs to), then the others in registration order."""

    def __init__(self, kind: str, record_type: type[Any], builtin_modules: tuple[str, ...],
                 module_of: Callable[[Any], str | None] = lambda record: None):
        self.kind, self.builtin_modules = kind, tuple(builtin_modules)
        self.record_type: type[Any] = record_type
        self._module_of = module_of
        self._records: dict[str, Any] = {}
        self._builtins_loaded = False

    def register(self, record: Any) -> Any:
        """Register ``record`` under its ``name`` (a name registered twice is an error); returns it."""
        if not isinstance(record, self.record_type):
            raise TypeError(f"a {self.kind} record is a {self.record_type.__name__}, got {type(record).__name__}")
        if record.name in self._records and self._records[record.name] is not record:
            raise VlbenchError(f"{self.kind} {record.name!r} is registered twice",
                               f"give the new {self.kind} another name")
        self._records[record.name] = record
        return record

    def unregister(self, name: str) -> None:
        """Remove a registered record (tests, notebooks)."""
        self._records.pop(name, None)

    def all(self) -> dict[str, Any]:
        if not self._builtins_loaded:
            self._builtins_loaded = True
            for module in self.builtin_modules:
                importlib.import_module(module)
        order = self.builtin_modules

        def rank(record) -> int:
            module = self._module_of(record)
            return order.index(module) if module in order else len(order)

        return {r.name: r for r in sorted(self._records.values(), key=rank)}
