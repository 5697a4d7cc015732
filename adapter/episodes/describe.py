"""The episode side's description of a taskset, and its one-shot process (:func:`main`): what
only a loaded taskset can tell is checked where the episodes run, so the trainer side never
imports Verifiers or Renderers.
"""

from __future__ import annotations

import asyncio
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from miles_verifiers.protocol.messages import DescribeRequest, Description, RendererSpecModel
from miles_verifiers.protocol.records import task_record
from miles_verifiers.protocol.versions import process_versions


def describe_tasks(
    request: DescribeRequest,
    tasks: Sequence[Any],
    vocab_size_of: Callable[[RendererSpecModel], int | None],
    **fields: Any,
) -> Description:
    """The description of a loaded taskset's ``tasks`` (their prompts checked first) and of the
    renderer the request names: ``vocab_size_of`` loads it, as the episodes will."""
    from miles_verifiers.episodes.content import check_task_prompts
    from miles_verifiers.episodes.v02.clients import identify_renderer

    # A media part would be dropped on the token path; refuse it before anything is sent.
    check_task_prompts(tasks)
    identity = identify_renderer(request.hf_checkpoint, request.tokenizer_path)
    spec = request.renderer
    return Description(
        tasks=[task_record(task) for task in tasks],
        renderer_identity=identity,
        vocab_size=None
        if spec is None
        else vocab_size_of(spec.model_copy(update={"identity": identity})),
        versions=process_versions(),
        **fields,
    )


def main() -> None:
    """Answer the one request on stdin with one reply on stdout (nothing else is written)."""
    from miles_verifiers.episodes.child import protocol_stdout
    from miles_verifiers.episodes.worker import WorkerHandler

    out = protocol_stdout()
    reply = asyncio.run(WorkerHandler().handle_frame(sys.stdin.buffer.read()))
    with os.fdopen(out, "wb") as stream:
        stream.write(reply)
