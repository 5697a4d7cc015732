"""The episode side's description of a taskset, and its one-shot process (:func:`main`).

What only a loaded taskset can tell (the config, the tasks, their prompts, group rewards, the
tokenizer) is checked where the episodes run, so the trainer side never imports Verifiers or
Renderers; the trainer's own process keeps what it loaded for the setup.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from miles_verifiers.protocol.messages import DescribeRequest, Description
from miles_verifiers.protocol.records import task_record
from miles_verifiers.protocol.versions import process_versions


def describe_loaded(
    config: Any, loaded: Any, renderer_identity: str | None, vocab_size: int | None
) -> Description:
    """The description of a taskset already loaded (its prompts are checked here)."""
    from miles_verifiers.episodes.content import check_task_prompts

    # A media part would be dropped on the token path; refuse it before anything is sent.
    check_task_prompts(loaded.tasks)
    return Description(
        env_id=str(getattr(config, "env_id", None) or config.taskset.id),
        tasks=[task_record(task) for task in loaded.tasks],
        has_group_reward=loaded.has_group_reward,
        renderer_identity=renderer_identity,
        vocab_size=vocab_size,
        versions=process_versions(),
    )


def load_config_and_taskset(config_path: str, config_text: str) -> tuple[Any, Any]:
    """The validated config and the loaded taskset, from the config's text."""
    from miles_verifiers.episodes.v02.config import env_config_from_data, load_taskset
    from miles_verifiers.protocol.config_file import parse_config_text

    path = Path(config_path)
    config = env_config_from_data(parse_config_text(config_text, path), path)
    return config, load_taskset(config)


def load_and_describe(
    request: DescribeRequest, vocab_size_of: Callable[[Any], int | None]
) -> tuple[Description, Any, Any]:
    """Load and describe the config, the taskset and a renderer as the workers will; also the
    config and taskset. ``vocab_size_of`` loads a spec's renderer, giving its vocabulary."""
    from miles_verifiers.versions import require_supported_versions

    # Checked before importing this side's Verifiers, which runs the episodes.
    require_supported_versions()
    from miles_verifiers.episodes.v02.clients import identify_renderer

    config, loaded = load_config_and_taskset(request.config_path, request.config_text)
    identity = identify_renderer(request.hf_checkpoint, request.tokenizer_path)
    vocab_size = None
    if request.renderer is not None:
        vocab_size = vocab_size_of(request.renderer.model_copy(update={"identity": identity}))
    return describe_loaded(config, loaded, identity, vocab_size), config, loaded


def describe(request: DescribeRequest) -> Description:
    """The description a one-shot describe step gives: it loads one renderer, not a pool."""
    from miles_verifiers.episodes.v02.clients import load_one_renderer

    return load_and_describe(request, load_one_renderer)[0]


def main() -> None:
    """Answer the one request on stdin with one reply on stdout (nothing else is written)."""
    from miles_verifiers.episodes.child import protocol_stdout
    from miles_verifiers.episodes.worker import WorkerHandler

    out = protocol_stdout()
    reply = asyncio.run(WorkerHandler().handle_frame(sys.stdin.buffer.read()))
    with os.fdopen(out, "wb") as stream:
        stream.write(reply)
