"""The episode side construction talks to, chosen once: this process, local workers or Ray.

Construction asks each to ``describe`` the taskset, then to ``start`` the backend the calls run
on. Nothing here imports Verifiers: the workers' description comes from a process their
template forks.
"""

from __future__ import annotations

import contextlib
import functools
import os
import select
import signal
import tempfile
import time
from collections.abc import Callable, Mapping
from typing import Any

from miles_verifiers.errors import SetupError
from miles_verifiers.protocol import procs
from miles_verifiers.protocol.messages import (
    CleanupSpec,
    DescribeRequest,
    Description,
    Refused,
    RendererSpecModel,
    Request,
    WorkerSetup,
    read_reply,
)
from miles_verifiers.trainer.backends.in_process import InProcessEpisodes
from miles_verifiers.trainer.backends.local import LocalWorker, WorkerTemplate
from miles_verifiers.trainer.backends.pool import (
    LinkStarter,
    PoolLimits,
    WorkerLostError,
    WorkerPool,
)

# Seconds on top of the episode deadline and its wind-down before a worker counts as hung.
ANSWER_SLACK_S = 5.0
# Loading a taskset and a tokenizer in a fresh interpreter; far more means something hangs.
DESCRIBE_TIMEOUT_S = 300.0
# From the describe step's last output to its exit (it only flushes and exits).
DESCRIBE_EXIT_S = 5.0
# Tokenizers the template preloads per fork: a worker's first renderer's and its loop's.
PRELOADED_TOKENIZERS = 2
PYTHON_SETTING = "MILES_VERIFIERS_EPISODE_WORKER_PYTHON"


class EpisodeSideError(SetupError, RuntimeError):
    """The episode side refused to describe the taskset for a reason with no class here."""


def _as_setup_error(refused: Refused) -> SetupError:
    """The episode side's error as the same class here, else its nearest base known here."""
    known: dict[str, type[SetupError]] = {}
    pending: list[type[SetupError]] = [SetupError]
    while pending:  # every SetupError class here, by name
        cls = pending.pop()
        known.setdefault(cls.__name__, cls)
        pending.extend(cls.__subclasses__())
    if refused.error_type in known:
        cls, message = known[refused.error_type], refused.message
    else:
        base = next((known[name] for name in refused.error_bases if name in known), SetupError)
        cls = EpisodeSideError if base is SetupError else base
        message = f"{refused.error_type}: {refused.message}"
    error = cls.__new__(cls)
    Exception.__init__(error, message)
    return error


def describe_elsewhere(
    python: str, request: DescribeRequest, template: WorkerTemplate | None = None
) -> Description:
    """The description from a process forked by ``template``, else by one with ``python``."""
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
    """The describe step's whole output and how it ended (bounded); the process is gone after."""
    try:
        pid, stdin, stdout = template.fork(
            template.child_environ(), entry="describe", stderr=stderr
        )
    except WorkerLostError as error:
        return b"", f"could not start ({error})"
    ref = procs.ref_of(pid)
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


def choose_episode_side(settings: Any, *, describe_only: bool = False) -> EpisodeSide:
    """Where the episodes run; ``describe_only`` (``check``) keeps nothing running for workers."""
    python = settings.episode_python
    if python is None:
        return InProcessEpisodes()
    template = None if describe_only else WorkerTemplate(settings.episode_worker_python)
    return EpisodeWorkers(python, template, ray=settings.episode_worker_backend == "ray")


class EpisodeWorkers:
    """Local worker processes, forked by the template that described, or Ray actors."""

    def __init__(self, python: str, template: WorkerTemplate | None, *, ray: bool) -> None:
        self.python = python
        self._template = template
        self._ray = ray

    def describe(self, request: DescribeRequest) -> Description:
        return describe_elsewhere(self.python, request, self._template)

    def start(self, setup: WorkerSetup, description: Description, settings: Any) -> WorkerPool:
        on_close: Callable[[], None] | None = None
        start: LinkStarter
        if self._ray:
            from miles_verifiers.trainer.backends.ray import start_ray_worker

            self.close()
            start = functools.partial(start_ray_worker, python=settings.episode_worker_python)
        else:
            template = self._template or WorkerTemplate(settings.episode_worker_python)
            start = functools.partial(LocalWorker.start, template=template)
            on_close = template.close
        limits = PoolLimits(
            count=settings.episode_workers,
            restarts_per_call=settings.episode_worker_restarts,
            # Past its deadline a worker still cancels the episode and aborts its requests.
            answer_margin_s=settings.cleanup_grace_s + settings.abort_timeout_s + ANSWER_SLACK_S,
        )
        pool = WorkerPool(
            limits,
            setup,
            start,
            on_close=on_close,
            expected_versions=description.versions,
        )
        self._template = None  # the pool owns it now (Ray's: closed above)
        return pool

    def close(self) -> None:
        if self._template is not None:
            self._template.close()


EpisodeSide = InProcessEpisodes | EpisodeWorkers


def worker_setup(
    config_path: str,
    config_text: str,
    description: Description,
    renderer: RendererSpecModel,
    transport: Mapping[str, Any],
    cleanup: CleanupSpec,
) -> WorkerSetup:
    """The setup message (the config as text: workers need not see the trainer's files)."""
    return WorkerSetup(
        config_path=config_path,
        config_text=config_text,
        expected_tasks=len(description.tasks),
        renderer=renderer,
        transport={
            mode: template.model_dump(mode="json", exclude={"engine_url", "rid_prefix"})
            for mode, template in transport.items()
        },
        cleanup=cleanup,
    )
