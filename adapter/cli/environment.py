"""The process environment a run needs: offline tokenizers and ``VERIFIERS_CONFIG``.

The fixture models' tokenizers are rebuilt offline (nothing can be fetched from the Hugging
Face hub here) and found through environment variables that Hugging Face libraries read when
they are first imported, so :func:`use_fixture_tokenizers` must run before anything imports
them. ``VERIFIERS_CONFIG`` is how Miles tells the rollout function where its config is.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator, MutableMapping
from pathlib import Path

from miles_verifiers.cli.kit import find_kit
from miles_verifiers.episodes.v02.config import CONFIG_ENV_VAR


def fixture_model_ids() -> tuple[str, ...]:
    """The models the embedded kit serves (none when the kit is not installed)."""
    kit = find_kit()
    return kit.model_ids if kit is not None else ()


def tokenizer_source(hf_checkpoint: str | None, tokenizer_path: str | None) -> str | None:
    """The tokenizer a run loads: ``--sglang-tokenizer-path`` if given, else the checkpoint."""
    return tokenizer_path or hf_checkpoint


def is_fixture_model(model: str | None) -> bool:
    return model is not None and model in fixture_model_ids()


def use_fixture_tokenizers(environ: MutableMapping[str, str] | None = None) -> None:
    """Build the offline fixture tokenizers (cached) and point Hugging Face libraries at them.

    Without the kit there is nothing to build: the run uses whatever tokenizers the
    environment provides (a real deployment's Hugging Face cache).
    """
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
