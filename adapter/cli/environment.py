"""The process environment a run needs: offline fixture tokenizers and ``VERIFIERS_CONFIG``.

Hugging Face libraries read where tokenizers live when they are first imported, so
:func:`use_fixture_tokenizers` must run before anything imports them.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from miles_verifiers.cli.kit import find_kit
from miles_verifiers.episodes.v02.config import CONFIG_ENV_VAR


def is_fixture_model(model: str | None) -> bool:
    """Whether the test kit builds ``model``'s tokenizer offline (never without the kit)."""
    kit = find_kit()
    return kit is not None and model in kit.model_ids


def use_fixture_tokenizers(environ: MutableMapping[str, str] | None = None) -> None:
    """Build the kit's offline tokenizers (cached) and point Hugging Face at them; without the
    kit the environment's own tokenizers (a real Hugging Face cache) are used."""
    kit = find_kit()
    if kit is not None:
        kit.prepare_tokenizers(os.environ if environ is None else environ)


@contextlib.contextmanager
def verifiers_config(path: Path | None) -> Iterator[None]:
    """Set ``VERIFIERS_CONFIG`` for the block (left as it is when ``path`` is None)."""
    if path is None:
        yield
        return
    previous = os.environ.get(CONFIG_ENV_VAR)
    os.environ[CONFIG_ENV_VAR] = str(path)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(CONFIG_ENV_VAR, None)
        else:
            os.environ[CONFIG_ENV_VAR] = previous
