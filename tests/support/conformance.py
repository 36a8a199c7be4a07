"""The assertion every broken-plug-in test of vlbench.testing makes: the check fails with a ConformanceError (an
AssertionError) of the plug-in's kind and the broken clause, whose message names the clause."""

from __future__ import annotations

import pytest

from vlbench.testing import ConformanceError


def fails_clause(check, target, kind: str, clause: str, **kwargs) -> ConformanceError:
    with pytest.raises(ConformanceError) as err:
        check(target, **kwargs)
    assert isinstance(err.value, AssertionError)
    assert (err.value.kind, err.value.check) == (kind, clause)
    assert clause in str(err.value) and "expected" in str(err.value)
    return err.value
