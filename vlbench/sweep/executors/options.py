"""What the cluster executors share about their options: an error that names the option as the user writes it
(``--option NAME=VALUE`` on the command line, or a key of ``[study.executor.<name>]`` in the plan) and the
check of a number option."""

from __future__ import annotations

from typing import Any

from ...errors import OptionError


def toml_value(value: Any) -> str:
    """``value`` as it is written in a TOML plan."""
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k!r} = {toml_value(v)}".replace("'", '"') for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    return repr(value).replace("'", '"')


def bad_option(executor: str, name: str, message: str, example: Any = None) -> OptionError:
    """An error naming the option of ``executor`` as it is written, with an example of a good value."""
    hint = None
    if example is not None:
        plan = f"{name} = {toml_value(example)} under [study.executor.{executor}] in the plan"
        hint = (f"e.g. {plan}" if isinstance(example, (dict, list, tuple)) else
                f"e.g. --option {name}={example}, or {plan}")
    return OptionError(name, message, hint, flag=name)


def number_option(executor: str, options: dict, name: str, *, kind: type, low: float, strict: bool = False,
                  example: Any) -> Any:
    """``options[name]`` as ``kind`` (int: a whole number), at least ``low`` (above it with ``strict``)."""
    value = options[name]
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and (kind is float or
                                                                             float(value).is_integer())
    if ok:
        value = kind(value)
        ok = value > low if strict else value >= low
    if not ok:
        what = "a whole number" if kind is int else "a number"
        bound = f"> {low:g}" if strict else f">= {low:g}"
        raise bad_option(executor, name, f"the {executor} executor's option {{opt}} must be {what} {bound}, "
                         f"not {value!r}", example)
    return value
