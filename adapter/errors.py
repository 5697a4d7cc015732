"""The adapter's exception hierarchy: match these by type, read their messages as prose.

Every exception the adapter raises derives from :class:`MilesVerifiersError` and from one of
its four families, which say what went wrong and so what a caller can do about it:

- :class:`SetupError`: the run is configured in a way that cannot work (an option, the config
  file, the taskset, a hook, an installed version). Raised at construction, or by the first
  call for what only a call can see. Nothing ran; fix the named flag or field.
- :class:`RolloutCallError`: a call could not produce its output (out of replacement groups,
  a trace Miles cannot train on, a scheduling invariant broken).
- :class:`EngineError`: SGLang (or whatever speaks its protocol) answered something unusable,
  refused a request, or could not be reached.
- :class:`CommandLineError`: the ``miles-verifiers`` command was given something unusable.

Many classes also keep the builtin base they always had (``ValueError``, ``TimeoutError``)
or the ``openai``/Verifiers class that Verifiers' TrainClient needs to see, so existing
``except ValueError`` code keeps working.

Errors raised inside an episode cross Verifiers, which records only their class name and
message on the trace. Classes that can take that road carry a ``trace_code``; their messages end
with a tag naming it, and :func:`recorded_error_class` turns a recorded trace error back into
the class, so the adapter still decides by type, not by wording.
"""

from __future__ import annotations

import re
from typing import Any, ClassVar

__all__ = [
    "CommandLineError",
    "EngineError",
    "MilesVerifiersError",
    "RendererSetupError",
    "RolloutCallError",
    "SetupError",
    "recorded_error_class",
    "recorded_error_code",
    "tag_message",
]

_TAG_PREFIX = "miles-verifiers:"
_TAG_PATTERN = re.compile(r"\[miles-verifiers:([a-z][a-z_]*)\]")
_BY_CODE: dict[str, type[MilesVerifiersError]] = {}


class MilesVerifiersError(Exception):
    """Base of every exception miles-verifiers raises."""

    trace_code: ClassVar[str | None] = None
    """Set on classes whose instances may be recorded on a Verifiers trace (see module doc).
    (Not ``code``: openai's errors, which some of ours also are, use that name per instance.)"""

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
    """The run cannot work as configured; nothing was run. The message names the fix."""


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
    """``message`` tagged with ``code``, for a side where the class is not importable (an
    episode worker whose Verifiers differs)."""
    return f"{message} [{_TAG_PREFIX}{code}]"


def recorded_error_code(recorded: Any) -> str | None:
    """The ``trace_code`` behind an exception or a recorded trace error, if it was one of ours.

    Read from the message's tag, so it works where the class itself was never imported (the
    trainer side of a run whose episodes, and so the Verifiers-based classes, live elsewhere).
    """
    if recorded is None:
        return None
    # A class without a code of its own (a worker's error relayed) may carry a recorded tag.
    if isinstance(recorded, MilesVerifiersError) and type(recorded).trace_code is not None:
        return type(recorded).trace_code
    message = getattr(recorded, "message", None)
    if message is None:
        message = str(recorded)
    found = _TAG_PATTERN.findall(str(message))
    return found[-1] if found else None


def recorded_error_class(recorded: Any) -> type[MilesVerifiersError] | None:
    """The adapter class behind an exception or a recorded trace error, if it was one of ours.

    A live exception answers with its own class. A recorded error (anything with a
    ``message``, as Verifiers keeps on ``trace.errors``) answers with the class whose tag its
    message carries (when that class is imported in this process), or None.
    """
    if isinstance(recorded, MilesVerifiersError):
        return type(recorded)
    code = recorded_error_code(recorded)
    return _BY_CODE.get(code) if code is not None else None


# The code of the episode side's refusal of a request the token path cannot serve.
UNSUPPORTED_REQUEST_CODE = "unsupported_request"


def is_unsupported_request(error: Any) -> bool:
    """True for an exception or recorded trace error that is the episode side's refusal of a
    request the token path cannot serve (a setup problem, not a failed episode)."""
    return recorded_error_code(error) == UNSUPPORTED_REQUEST_CODE


def describe_error(error: BaseException | Any) -> str:
    """``Type: message`` for an exception or a recorded error (anything with ``type`` and
    ``message``, as a trace or an episode records it), on one line."""
    kind = getattr(error, "type", None) or type(error).__name__
    message = getattr(error, "message", None)
    if message is None:
        message = str(error)
    line = " ".join(str(message).split())
    return f"{kind}: {line[:500]}"


def abort_failures(report: Any, whose: str) -> str | None:
    """One line naming the abort posts of ``report`` that failed (the first few, with their
    reasons), or None when all went through; each side logs it as a warning."""
    if report.ok:
        return None
    return (
        f"aborting {whose} failed on {len(report.failures)} of {report.posted} worker posts: "
        + "; ".join(f"{url} {reason}" for url, _, reason in report.failures[:3])
    )
