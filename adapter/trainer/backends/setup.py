"""The trainer side of the seam: ask the episode side to describe the taskset, build the pool.

Neither function imports Verifiers or Renderers: the description comes from a process forked by the
workers' template (started with the workers' interpreter), and the pool only exchanges protocol messages.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import tempfile
import time
from typing import Any

from miles_verifiers.errors import SetupError
from miles_verifiers.protocol.messages import (
    CleanupSpec,
    DescribeRequest,
    Description,
    Refused,
    Request,
    WorkerSetup,
    read_reply,
)
from miles_verifiers.trainer.backends import procs
from miles_verifiers.trainer.backends.link import WorkerLostError
from miles_verifiers.trainer.backends.local import LocalWorker, WorkerTemplate
from miles_verifiers.trainer.backends.pool import PoolLimits, WorkerPool

# Seconds on top of the episode deadline and its wind-down before a worker counts as hung.
ANSWER_SLACK_S = 5.0
# Loading a taskset and a tokenizer in a fresh interpreter; far more means something hangs.
DESCRIBE_TIMEOUT_S = 300.0
# From the describe step's last output to its exit (it only flushes and exits).
DESCRIBE_EXIT_S = 5.0
# Tokenizers the template loads for each process it forks: what a worker loads as it starts
# (its first renderer and the event loop's); a larger pool loads the rest in the background.
PRELOADED_TOKENIZERS = 2
PYTHON_SETTING = "MILES_VERIFIERS_EPISODE_WORKER_PYTHON"


class EpisodeSideError(SetupError, RuntimeError):
    """The episode side refused to describe the taskset for a reason with no class here."""


def _setup_error_classes() -> dict[str, type[SetupError]]:
    found: dict[str, type[SetupError]] = {}
    pending: list[type[SetupError]] = [SetupError]
    while pending:
        cls = pending.pop()
        found.setdefault(cls.__name__, cls)
        pending.extend(cls.__subclasses__())
    return found


def _as_setup_error(refused: Refused) -> SetupError:
    """The construction error the episode side raised, as the same class where it is known here
    (its message unchanged), so a check reads the same whichever side made it."""
    cls = _setup_error_classes().get(refused.error_type)
    if cls is None:
        return EpisodeSideError(f"{refused.error_type}: {refused.message}")
    error = cls.__new__(cls)
    Exception.__init__(error, refused.message)
    return error


def describe_elsewhere(
    python: str, request: DescribeRequest, template: WorkerTemplate | None = None
) -> Description:
    """The episode side's description, from a process forked from ``template`` (the workers'
    own, kept running for them), else from a template of its own started with ``python``."""
    payload = Request(id=1, body=request).model_dump_json().encode()
    own = template is None
    template = template or WorkerTemplate(python)
    if request.renderer is not None:
        # A template of its own forks the describe step only, which loads one.
        copies = 1 if own else min(request.renderer.pool_size, PRELOADED_TOKENIZERS)
        template.preload_tokenizer(request.renderer.tokenizer_source, copies)
    try:
        with tempfile.TemporaryFile() as errors:
            output, ended = _run_describe(template, payload, errors.fileno())
            errors.seek(0)
            tail = errors.read().decode(errors="replace").strip().splitlines()[-5:]
    finally:
        if own:
            template.close()
    if not output:
        raise EpisodeSideError(
            f"the episode side ({python}) {ended} before describing the taskset. Fix: install "
            "miles-verifiers and the taskset packages in that environment (see the README), "
            f"with {PYTHON_SETTING} naming its python. Its last output: "
            f"{' | '.join(tail) or 'none'}"
        )
    body = read_reply(output).body
    if isinstance(body, Refused):
        raise _as_setup_error(body)
    if not isinstance(body, Description):
        raise EpisodeSideError(f"the episode side answered a describe request with {body.kind}")
    return body


def _run_describe(template: WorkerTemplate, payload: bytes, stderr: int) -> tuple[bytes, str]:
    """The describe step's whole output, and how it ended; bounded by DESCRIBE_TIMEOUT_S. The
    process is gone when this returns: construction leaves only the template running."""
    try:
        pid, stdin, stdout = template.fork(
            template.child_environ(), entry="describe", stderr=stderr
        )
    except WorkerLostError as error:
        return b"", f"could not start ({error})"
    seen = procs.stat_of(pid)
    ref = procs.ProcessRef(pid, seen.start) if seen else None
    deadline = time.monotonic() + DESCRIBE_TIMEOUT_S
    chunks: list[bytes] = []
    try:
        with contextlib.suppress(BrokenPipeError), os.fdopen(stdin, "wb") as writer:
            writer.write(payload)  # read whole before anything is written back
        while (left := deadline - time.monotonic()) > 0:
            if not select.select([stdout], [], [], left)[0]:
                continue
            chunk = os.read(stdout, 1 << 16)
            if not chunk:
                # Its output closes just before it exits: give it a moment, then make sure.
                exit_by = time.monotonic() + DESCRIBE_EXIT_S
                while ref is not None and procs.alive(ref) and time.monotonic() < exit_by:
                    time.sleep(0.01)
                return b"".join(chunks), "ended"
            chunks.append(chunk)
    finally:
        os.close(stdout)
        if ref is not None:
            procs.send([ref], signal.SIGKILL)
    raise EpisodeSideError(
        f"the episode side ({template.python}) did not describe the taskset within "
        f"{DESCRIBE_TIMEOUT_S:.0f} s. Fix: check that its taskset loads offline."
    )


def worker_setup(run: Any) -> WorkerSetup:
    """The setup message: the config as text (workers need not see the trainer's files, only
    the taskset packages), the renderer, transport templates and cleanup limits."""
    path = run.config_path
    cleanup = run.settings.cleanup
    return WorkerSetup(
        config_path=str(path),
        config_text=path.read_text(encoding="utf-8"),
        expected_tasks=len(run.description.tasks),
        renderer=run.renderer,
        transport={
            mode: template.model_dump(mode="json", exclude={"engine_url", "rid_prefix"})
            for mode, template in run.transport.items()
        },
        cleanup=CleanupSpec(
            abort_s=cleanup.abort_s,
            grace_s=cleanup.grace_s,
            shutdown_s=cleanup.shutdown_s,
            handler_s=cleanup.handler_s,
        ),
    )


def build_pool(run: Any, template: WorkerTemplate | None = None) -> WorkerPool:
    """The workers' pool; local workers are forked from ``template`` (the describe step's, when
    there was one), which the pool then owns. Each worker must report the versions the
    description reported."""
    settings = run.settings
    limits = PoolLimits(
        count=settings.episode_workers,
        restarts_per_call=settings.episode_worker_restarts,
        # Past its deadline a worker still cancels the episode and aborts its requests.
        answer_margin_s=settings.cleanup_grace_s + settings.abort_timeout_s + ANSWER_SLACK_S,
    )
    python = settings.episode_worker_python
    if settings.episode_worker_backend == "ray":
        from miles_verifiers.trainer.backends.ray import start_ray_worker

        if template is not None:  # actors are not forked: it served the describe step only
            template.close()
        return WorkerPool(
            limits,
            worker_setup(run),
            functools.partial(start_ray_worker, python=python),
            expected_versions=run.description.versions,
        )
    template = template or WorkerTemplate(python)
    return WorkerPool(
        limits,
        worker_setup(run),
        functools.partial(LocalWorker.start, template=template),
        on_close=template.close,
        expected_versions=run.description.versions,
    )
