"""Errors that vlbench raises for bad input.

Every error names the offending item and says how to fix it; the CLI prints the message
without a traceback and exits with status 2.
"""

from __future__ import annotations


def install_extra(*extras: str) -> str:
    """The command that installs vlbench's optional extras (pyproject.toml), for an error's fix or a help text.

    vlbench is not on PyPI, so installing its extras by the package's name cannot work: they install from the clone,
    editable, as scripts/setup.sh installs vlbench itself.
    """
    if not extras:
        raise ValueError("install_extra needs the name of at least one extra")
    return f"pip install -e '.[{','.join(extras)}]' (in vlbench's clone)"


class VlbenchError(Exception):
    """Base class: a problem the user can fix. ``hint`` says how."""

    def __init__(self, message: str, hint: str | None = None):
        self.message = message
        self.hint = hint
        super().__init__(message if not hint else f"{message}\n  fix: {hint}")


class UnknownNameError(VlbenchError, KeyError):
    """An unknown model / dataset / perturbation / metric name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return Exception.__str__(self)


class DataError(VlbenchError):
    """A dataset, manifest, caption or image problem."""


class ModelError(VlbenchError):
    """A model could not be loaded or produced unusable output."""


_NO_EXAMPLE = object()


class OptionError(VlbenchError):
    """A bad value of one run option, named the way the caller spelt it.

    ``option`` is the option's Python name (the RunConfig field, the keyword argument of ``vlbench.run``).
    ``message`` and ``hint`` write the option as ``{opt}``; ``example`` is a value that would work. From
    Python the error reads ``batch_size must be >= 1 ... e.g. batch_size=64``; the CLI renders the same
    error with the option's flag (:meth:`cli_text`): ``--batch-size must be >= 1 ... e.g. --batch-size 64``.
    """

    def __init__(self, option: str, message: str, hint: str | None = None, *, example=_NO_EXAMPLE,
                 flag: str | None = None):
        self.option = option
        self.flag = flag  # the CLI flag when it is not the field name with dashes (the CLI looks it up)
        self._parts = (message, hint, example)
        message, hint = self.render(None)
        super().__init__(message, hint)

    def render(self, flag: str | None) -> tuple[str, str | None]:
        """(message, hint) naming the option as ``flag`` (CLI) or, with None, as its keyword argument."""
        message, hint, example = self._parts
        name = flag or self.option
        if example is not _NO_EXAMPLE:
            if flag:
                value = ",".join(map(str, example)) if isinstance(example, (list, tuple)) else example
                shown = flag if value is True else f"{flag} {value}"
            else:
                shown = f"{self.option}={list(example) if isinstance(example, tuple) else example!r}"
            hint = f"{hint}; e.g. {shown}" if hint else f"e.g. {shown}"
        return message.replace("{opt}", name), None if hint is None else hint.replace("{opt}", name)

    def cli_text(self, flag: str | None = None) -> str:
        """The error as the command line shows it: the option as its flag."""
        message, hint = self.render(flag or self.flag or "--" + self.option.replace("_", "-"))
        return message if not hint else f"{message}\n  fix: {hint}"


class PluginInterrupt(KeyboardInterrupt):
    """A KeyboardInterrupt raised while a plug-in was being imported (Ctrl-C then, or the plug-in raised it
    itself): still an interrupt (the command line exits 130), but ``plugin`` names the plug-in, so a plug-in that
    interrupts every import is found."""

    def __init__(self, plugin: str):
        self.plugin = plugin
        super().__init__(f"interrupted while importing the plug-in {plugin} (Ctrl-C, or the plug-in raised "
                         "KeyboardInterrupt itself)")

