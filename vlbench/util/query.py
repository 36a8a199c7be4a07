"""``?key=value&key=value`` options of a spec string (``siglip2:CKPT?lowercase=0``, ``hf:ORG/NAME?split=test``).

One reader for every family of specs, so each refuses the same things: a key given twice (which value was
meant is unknowable; the first reader took the last one silently) and a key without ``=``. Each caller checks
the keys and values it knows and raises its own error class; :func:`query_pairs` only splits.
"""

from __future__ import annotations


class QueryProblem(ValueError):
    """Why a query string cannot be read; the caller wraps it into its own error with the spec it came from."""


def query_pairs(query: str) -> list[tuple[str, str]]:
    """``"a=1&b=x,y"`` -> ``[("a", "1"), ("b", "x,y")]``, keys and values stripped; empty parts (``a=1&&b=2``)
    are skipped. A part without ``=`` or a key given twice raises :class:`QueryProblem`."""
    pairs: list[tuple[str, str]] = []
    seen: set[str] = set()
    for part in filter(None, (p.strip() for p in query.split("&"))):
        key, sep, value = part.partition("=")
        key, value = key.strip(), value.strip()
        if not sep:
            raise QueryProblem(f"option {key!r} has no value (write {key}=VALUE)")
        if key in seen:
            raise QueryProblem(f"option {key!r} is given twice; give each option once")
        seen.add(key)
        pairs.append((key, value))
    return pairs
