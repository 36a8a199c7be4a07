"""``vlbench run --config run.toml``: a TOML file whose keys are the long option names of ``vlbench run``
(``batch-size = 32``; ``batch_size`` is read the same): the option table's rows that apply to ``config``
(vlbench/util/options.py), read off the run parser's options, which are made from the table. The file is turned
into option tokens placed before the command line's own, so argparse applies one set of definitions, types,
choices and checks to both, and a flag given on the command line overrides the file's value (the last value
wins). A ``true`` flag in the file (``quiet = true``) cannot be switched off from the command line: leave it out
of the file.

Values: strings, integers, booleans for on/off flags; ``k``, ``graded-relevance``, ``token-budget`` and
``sentence-budget`` may be lists; ``param``
is a list of "NAME.KEY=VALUE" strings (or a table {"NAME.KEY" = VALUE})."""

from __future__ import annotations

import argparse
import sys

from .errors import VlbenchError
from .util.io import read_regular_file

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - exercised on 3.10 only
    import tomli as tomllib

MAX_CONFIG_BYTES = 1 << 20
#: options that take one comma-separated value
_JOINED = ("k", "graded-relevance", "token-budget", "sentence-budget", "report-to")


def load_toml(path: str) -> dict:
    """The TOML document at ``path``; VlbenchError naming the file and the fault otherwise."""
    try:
        raw = read_regular_file(path, MAX_CONFIG_BYTES)
    except OSError as exc:
        raise VlbenchError(f"--config {path} cannot be read ({exc.strerror or exc})",
                           "pass a TOML file whose keys are vlbench run's long option names") from None
    try:
        return tomllib.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, tomllib.TOMLDecodeError) as exc:
        raise VlbenchError(f"--config {path} is not valid TOML ({exc})", "fix the file, e.g. batch-size = 32") from None


def config_tokens(doc: dict, parser: argparse.ArgumentParser, path: str) -> list[str]:
    """Option tokens equivalent to ``doc``, checked against ``parser``'s options (the one definition)."""
    actions = {a.option_strings[0][2:]: a for a in parser._actions
               if a.option_strings and a.option_strings[0].startswith("--")}
    tokens: list[str] = []
    for key, value in doc.items():
        name = str(key).replace("_", "-")
        action = actions.get(name)
        if action is None or name in ("help", "config"):
            known = ", ".join(sorted(set(actions) - {"help", "config"}))
            raise VlbenchError(f"--config {path}: unknown key {key!r}", f"keys are vlbench run's long options: {known}")
        tokens += _tokens(name, value, action, path)
    return tokens


def _tokens(name: str, value, action: argparse.Action, path: str) -> list[str]:
    flag = f"--{name}"
    if isinstance(action, argparse._StoreTrueAction):
        if not isinstance(value, bool):
            raise VlbenchError(f"--config {path}: {name} must be true or false, got {value!r}", f"{name} = true")
        return [flag] if value else []
    if name == "param":
        items = [f"{k}={v}" for k, v in value.items()] if isinstance(value, dict) else value
        if not isinstance(items, list) or not all(isinstance(x, str) for x in items):
            raise VlbenchError(f"--config {path}: param must be a list of \"NAME.KEY=VALUE\" strings",
                               'param = ["typos-keyboard.rate=0.1"]')
        return [t for x in items for t in (flag, x)]
    if isinstance(value, list) and name in _JOINED:
        value = ",".join(str(v) for v in value)
    if isinstance(value, (dict, list, bool)) or value is None:
        raise VlbenchError(f"--config {path}: {name} takes one value, got {value!r}",
                           f"write {name} as a string or number, as on the command line")
    return [flag, str(value)]


def expand_config(argv: list[str], parser: argparse.ArgumentParser) -> list[str]:
    """``run --config FILE rest...`` -> ``run <FILE's tokens> rest...``; other argv unchanged."""
    if not argv or argv[0] != "run":
        return argv
    rest, path = [], None
    it = iter(argv[1:])
    for tok in it:
        if tok == "--config":
            path = next(it, None)
            if path is None:
                raise VlbenchError("--config needs a file name", "vlbench run --config run.toml")
        elif tok.startswith("--config="):
            path = tok.split("=", 1)[1]
        else:
            rest.append(tok)
    if path is None:
        return argv
    # argparse keeps its subcommands only on private attributes (set when the CLI built its subparsers)
    run_parser = parser._subparsers._group_actions[0].choices["run"]  # type: ignore[union-attr,index]  # private, see above
    # --config stays between the file's tokens and the command line's: there the run parser tells an override of
    # the file's value from an option repeated on the command line (pipeline/run_options.py, ConfigFileAction)
    return ["run", *config_tokens(load_toml(path), run_parser, path), "--config", path, *rest]
