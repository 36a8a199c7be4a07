"""The options of ``vlbench run``, generated from the option table (vlbench/util/options.py).

:data:`RUN_OPTIONS` are the table's rows that are :class:`~vlbench.pipeline.run_config.RunConfig` fields (each
with its command-line flag, help and kind); the argparse
options (:func:`add_run_options`, one argparse group per RunConfig option group, so ``--help`` shows
them grouped), the ``--config run.toml`` keys (vlbench/config.py reads the keys off these argparse
options) and the Python API (``RunConfig(**fields)``) therefore share one definition: the field's
default is the option's default, its group is the group that declares the field, and the choice lists
come from run_config.py. tests/unit/pipeline/test_run_options.py checks that every field has exactly one option and
the other way round.

The parsed arguments also say which options were given (on the command line or in the ``--config``
file), whatever their value: :func:`given_fields`. A choice task refuses the retrieval options by it.

Flags that are not run settings (``--config``, ``--json``, and ``--task``/``--images-dir``/``--perturb-options``,
which send the arguments to a choice task, vlbench/tasks/cli.py) are listed in :data:`CLI_ONLY`. ``--dataset`` is
the one field the command line may leave out: a choice task names its own data; a retrieval run without
it stops in ``vlbench run`` with exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses

from ..errors import OptionError
from ..perturbations.cli import parse_params
from ..util import options
from . import run_config

#: options of ``vlbench run`` that are not RunConfig fields: how the CLI reads and prints, not what runs
CLI_ONLY = tuple(o.flag for o in options.OPTIONS if "cli" in o.where and "api" not in o.where)
#: fields without a default that the command line does not require (checked later, see above)
_OPTIONAL_ON_CLI = ("dataset",)


Option = options.Option  # a row of the table (re-exported: its old home)


def _ints(s: str) -> tuple:
    try:
        return tuple(int(x) for x in s.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated integers, got {s!r}") from None


def _names(s: str) -> tuple:
    return tuple(x.strip() for x in s.split(",") if x.strip())


#: the rows of the option table (vlbench/util/options.py) that are RunConfig fields, in the table's order (the order
#: of --help), with their choice lists filled in from run_config.py
RUN_OPTIONS = tuple(dataclasses.replace(o, choices=getattr(run_config, o.choices) if o.choices else None)
                    for o in options.OPTIONS if "api" in o.where)


def _default(name: str):
    """The field's default; dataclasses.MISSING for a field the caller must give (a required option)."""
    f = next(f for f in dataclasses.fields(run_config.RunConfig) if f.name == name)
    if f.default is not dataclasses.MISSING:
        return f.default
    return f.default_factory() if f.default_factory is not dataclasses.MISSING else dataclasses.MISSING


#: the namespace attribute where the recording actions note each given option's field
_GIVEN = "run_options_given"


#: the namespace attribute where the comma-list options note each value given on the command line, in order
_LISTS = "run_options_lists"


def _recording(base: type, listed: bool = False) -> type:
    """``base`` that also notes its field as given (a value equal to the default still counts); ``listed``:
    a comma-list option, whose every value is noted too, so a repeat can be refused (:func:`check_repeats`)."""

    class Recording(base):
        def __call__(self, parser, namespace, values, option_string=None):
            setattr(namespace, _GIVEN, getattr(namespace, _GIVEN, frozenset()) | {self.dest})
            if listed:
                seen = dict(getattr(namespace, _LISTS, {}))
                seen[self.dest] = [*seen.get(self.dest, []), values]
                setattr(namespace, _LISTS, seen)
            super().__call__(parser, namespace, values, option_string)

    Recording.__name__ = f"Given{'List' if listed else ''}{base.__name__}"
    return Recording


_STORE, _FLAG, _APPEND = (_recording(a) for a in (argparse._StoreAction, argparse._StoreTrueAction,
                                                   argparse._AppendAction))
_STORE_LIST = _recording(argparse._StoreAction, listed=True)


class ConfigFileAction(argparse._StoreAction):
    """``--config FILE``: vlbench/config.py places the file's option tokens before this option and the command
    line's own after it, so a comma-list option in both is the command line overriding the file (the file's
    value is forgotten here), not a repeat."""

    def __call__(self, parser, namespace, values, option_string=None):
        setattr(namespace, _LISTS, {})
        super().__call__(parser, namespace, values, option_string)


#: why a comma-list option given twice is refused (``vlbench run --help`` says it)
REPEAT_RULE = ("A comma-list option (" + "{flags}" + ") takes one list: --perturb typos,lexical. Given twice on "
               "the command line it is refused, neither merged nor overridden: a repeat usually comes from a base "
               "command with an override appended, and merging would run more than the override asks, overriding "
               "would drop what the base asks, both silently. A value in a --config file is overridden by the "
               "command line's.")


def add_run_options(parser: argparse.ArgumentParser) -> None:
    """One argparse option per RunConfig field (dest = the field name, default = the field's default),
    in one argparse group per option group (run_config.GROUPS)."""
    groups = {name: parser.add_argument_group(f"{name} options", cls.__doc__) for name, _, cls in run_config.GROUPS}
    for o in RUN_OPTIONS:
        group = groups[run_config.group_of(o.field)]
        kw: dict = {"dest": o.field, "help": o.help}
        default = _default(o.field)
        if o.kind == "flag":
            group.add_argument(o.flag, action=_FLAG, **kw)
            continue
        if o.kind == "params":
            group.add_argument(o.flag, action=_APPEND, default=[], metavar=o.metavar, **kw)
            continue
        if default is dataclasses.MISSING:
            kw["required"] = o.field not in _OPTIONAL_ON_CLI
            kw["default"] = None
        else:
            kw["default"] = default
        kw["type"] = {"int": int, "float": float, "ints": _ints, "names": _names}.get(o.kind, str)
        if o.choices:
            kw["choices"] = o.choices
        if o.metavar:
            kw["metavar"] = o.metavar
        group.add_argument(o.flag, action=_STORE_LIST if o.is_list else _STORE, **kw)


def given_fields(args: argparse.Namespace) -> frozenset:
    """The RunConfig fields whose option was given (command line or --config file), default value or not."""
    return getattr(args, _GIVEN, frozenset())


def flag_of(field: str) -> str:
    """The command-line flag of a RunConfig field (for messages)."""
    return next(o.flag for o in RUN_OPTIONS if o.field == field)


def list_flags() -> str:
    """The comma-list options' flags, for the help text."""
    return ", ".join(o.flag for o in RUN_OPTIONS if o.is_list)


def _text(value) -> str:
    return ",".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)


def check_repeats(args: argparse.Namespace) -> None:
    """OptionError for a comma-list option given more than once on the command line (:data:`REPEAT_RULE`),
    naming the values and the one list that holds them all."""
    for dest, values in getattr(args, _LISTS, {}).items():
        if len(values) > 1:
            shown = [_text(v) for v in values]
            joined = ",".join(dict.fromkeys(x.strip() for v in shown for x in v.split(",") if x.strip()))
            given = ", then ".join(map(repr, shown))
            raise OptionError(dest, f"{{opt}} was given {len(values)} times ({given}); it takes one comma-separated "
                                    "list, and a repeat is refused rather than merged or overridden",
                              "give it once, with every value you want in one list", example=joined)


def config_from_args(args: argparse.Namespace) -> run_config.RunConfig:
    """The RunConfig of parsed ``vlbench run`` arguments (a repeated comma-list option refused)."""
    check_repeats(args)
    values = {o.field: getattr(args, o.field) for o in RUN_OPTIONS}
    if values["perturb_params"]:
        values["perturb_params"] = parse_params(values["perturb_params"])
    else:
        values["perturb_params"] = {}
    return run_config.RunConfig(**values)
