"""The adapter's exception hierarchy: match these by type, read their messages as prose.

Every exception derives from :class:`MilesVerifiersError` and one of four families (setup,
rollout call, engine, command line). Verifiers records only an error's class name and message
on a trace, so classes that can cross it carry a ``trace_code``, tagged at the end of their
messages, which :func:`recorded_error_code` reads back: the adapter decides by code, not wording.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

_TAG_PREFIX = "miles-verifiers:"
_TAG_PATTERN = re.compile(r"\[miles-verifiers:([a-z][a-z_]*)\]")
_BY_CODE: dict[str, type[MilesVerifiersError]] = {}


class MilesVerifiersError(Exception):
    """Base of every exception miles-verifiers raises."""

    # Set on classes whose instances may be recorded on a trace (not ``code``: openai's
    # errors, which some of ours also are, use that per instance).
    trace_code: ClassVar[str | None] = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        code = cls.__dict__.get("trace_code")
        if code is None:
            return
        if not _TAG_PATTERN.fullmatch(f"[{_TAG_PREFIX}{code}]"):
            raise TypeError(f"{cls.__qualname__}.trace_code {code!r} must be lower_snake_case")
        taken = _BY_CODE.get(code)
        if taken is not None and taken.__qualname__ != cls.__qualname__:
            raise TypeError(f"error code {code!r} is used by {taken.__qualname__} already")
        _BY_CODE[code] = cls


class SetupError(MilesVerifiersError):
    """The run cannot work as configured (an option, the config, the taskset, a hook, an
    installed version); nothing was run. The message names the fix."""


class RendererSetupError(SetupError, ValueError):
    """The tokenizer or renderer for the model cannot be built; names the flag to change."""


class RolloutCallError(MilesVerifiersError):
    """A rollout call could not produce its output."""


class EngineError(MilesVerifiersError):
    """The engine refused, failed, or answered something that cannot be used."""


class CommandLineError(MilesVerifiersError):
    """The ``miles-verifiers`` command line cannot be carried out as given."""


def tag_message(error_cls: type[MilesVerifiersError], message: str) -> str:
    """``message`` with the tag that lets :func:`recorded_error_class` recognise ``error_cls``."""
    if error_cls.trace_code is None:
        raise TypeError(f"{error_cls.__qualname__} has no code to tag a message with")
    return tag_with_code(error_cls.trace_code, message)


def tag_with_code(code: str, message: str) -> str:
    """``message`` tagged with ``code``, where the class is not importable."""
    return f"{message} [{_TAG_PREFIX}{code}]"


def _message(error: Any) -> str:
    """An exception's text, or a recorded trace error's ``message``."""
    message = getattr(error, "message", None)
    return str(error) if message is None else str(message)


def recorded_error_code(recorded: Any) -> str | None:
    """The ``trace_code`` behind an exception or a recorded trace error (anything with a
    ``message``), if it was one of ours, read from the message's tag where not from its class."""
    if recorded is None:
        return None
    # A class without a code of its own (a worker's error relayed) may carry a recorded tag.
    if isinstance(recorded, MilesVerifiersError) and type(recorded).trace_code is not None:
        return type(recorded).trace_code
    found = _TAG_PATTERN.findall(_message(recorded))
    return found[-1] if found else None


# The code of the episode side's refusal of a request the token path cannot serve.
UNSUPPORTED_REQUEST_CODE = "unsupported_request"


def is_unsupported_request(error: Any) -> bool:
    """Whether ``error`` is that refusal (a setup problem, not a failed episode)."""
    return recorded_error_code(error) == UNSUPPORTED_REQUEST_CODE


def describe_error(error: BaseException | Any) -> str:
    """``Type: message`` on one line, for an exception or a recorded error."""
    kind = getattr(error, "type", None) or type(error).__name__
    line = " ".join(_message(error).split())
    return f"{kind}: {line[:500]}"
