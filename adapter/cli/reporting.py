"""How the commands report an error: one clear message, a traceback on request."""

from __future__ import annotations

import sys
import traceback
from typing import TextIO

# Exit codes: 1 for a run or construction failure, 2 for an unusable command line (as argparse).
EXIT_FAILURE = 1
EXIT_USAGE = 2

# Errors raised on purpose explain themselves; any other type is named (likely a bug).
_SELF_EXPLAINING = (ValueError, RuntimeError, TimeoutError, OSError, ImportError)


def error_text(error: BaseException) -> str:
    text = str(error).strip() or type(error).__name__
    if isinstance(error, _SELF_EXPLAINING):
        return text
    return f"{type(error).__name__}: {text}"


def report_error(
    command: str, error: BaseException, *, debug: bool = False, stream: TextIO | None = None
) -> None:
    """``miles-verifiers <command>: error: <message>``, after the traceback with ``--debug``."""
    out = stream or sys.stderr
    if debug:
        traceback.print_exception(error, file=out)
    out.write(f"miles-verifiers {command}: error: {error_text(error)}\n")
    out.flush()
