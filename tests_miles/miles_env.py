"""Where the Miles under test comes from, and the one import shim it needs on CPU.

Kept free of pytest so ``python -m tests_miles.miles_env`` can run first in ``tox -e miles``
and stop the run at once when ``MILES_SRC`` is missing.
"""

from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

SOURCE_ENV_VAR = "MILES_SRC"
# The Miles commit this project was last checked against (see the README, `tox -e miles`).
CHECKED_COMMIT = "31f1ca961a94cb860cec3b2dea34ec332bfa8f76"
# Miles' DeepSeek chat-template helper imports this from a newer SGLang than any on PyPI; only
# DeepSeek-V4 prompt encoding uses it, which nothing here exercises.
_MISSING_SGLANG_MODULE = "sglang.srt.entrypoints.openai.encoding_dsv4"


class MilesSourceError(SystemExit):
    pass


def miles_source(environ: dict[str, str] | None = None) -> Path:
    """The checkout named by ``MILES_SRC``; exits with what to set when it is missing."""
    env = os.environ if environ is None else environ
    value = env.get(SOURCE_ENV_VAR, "").strip()
    if not value:
        raise MilesSourceError(
            f"{SOURCE_ENV_VAR} is not set. Point it at a Miles source checkout, e.g. "
            "`git clone https://github.com/radixark/miles && git -C miles checkout "
            f"{CHECKED_COMMIT[:12]}`, then `{SOURCE_ENV_VAR}=$PWD/miles tox -e miles`."
        )
    path = Path(value).expanduser().resolve()
    if not (path / "miles" / "__init__.py").is_file():
        raise MilesSourceError(
            f"{SOURCE_ENV_VAR}={value} is not a Miles source checkout (no miles/__init__.py "
            "there). Point it at the root of a clone of radixark/miles."
        )
    return path


def miles_commit(path: Path) -> str:
    """The checkout's commit, or a note saying why it is unknown."""
    try:
        result = subprocess.run(
            ["git", "-C", str(path), "rev-parse", "HEAD"],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"unknown ({type(error).__name__})"
    return result.stdout.strip() if result.returncode == 0 else "unknown (not a git checkout)"


def install_sglang_shim() -> None:
    """Give Miles' import of the missing SGLang module an empty stand-in (import time only)."""
    if _MISSING_SGLANG_MODULE in sys.modules:
        return
    import importlib

    parent_name, _, leaf = _MISSING_SGLANG_MODULE.rpartition(".")
    parent = importlib.import_module(parent_name)
    if hasattr(parent, leaf):
        return
    module = types.ModuleType(_MISSING_SGLANG_MODULE)
    sys.modules[_MISSING_SGLANG_MODULE] = module
    setattr(parent, leaf, module)


def main() -> int:
    path = miles_source()
    commit = miles_commit(path)
    print(f"Miles under test: {path} at commit {commit}")
    if commit != CHECKED_COMMIT:
        print(f"note: the project was last checked against Miles {CHECKED_COMMIT}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
