"""The episode worker's generation for Verifiers 0.2.0: ``Environment`` groups and the project's
own ``TrainClient``. A group is one episode of ``n`` rollouts, each with its own model context
(so its own sampling seed); the episode's failure is every rollout's verdict.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from miles_verifiers.episodes.calls import EnvironmentPool
from miles_verifiers.episodes.describe import describe_tasks
from miles_verifiers.episodes.v02.upstream import set_rollout_context
from miles_verifiers.episodes.worker import Built, OpenCall
from miles_verifiers.protocol.config_file import parse_config_text
from miles_verifiers.protocol.messages import (
    CallStart,
    DescribeRequest,
    EpisodeErrorRecord,
    GroupRequest,
    GroupResult,
    ReplyBody,
    WorkerSetup,
)
from miles_verifiers.protocol.records import trace_record


def load(config_path: str, config_text: str) -> tuple[Any, Any]:
    """The validated config and the loaded taskset, from the config's text."""
    from miles_verifiers.episodes.v02.config import env_config_from_data, load_taskset

    path = Path(config_path)
    config = env_config_from_data(parse_config_text(config_text, path), path)
    return config, load_taskset(config)


def build(setup: WorkerSetup) -> Built:
    """Load the config, the taskset and the renderer pool with the worker's own packages."""
    return assemble(setup, *load(setup.config_path, setup.config_text))


def assemble(setup: WorkerSetup, config: Any, loaded: Any) -> Built:
    """What ``setup`` builds, from a config and taskset already loaded."""
    from verifiers.v1 import Environment

    from miles_verifiers.episodes.v02.clients import shared_renderer_pool

    environments = EnvironmentPool(lambda: Environment(config), first=loaded.environment)
    return Built(setup, loaded.tasks, environments, shared_renderer_pool(setup.renderer))


@dataclass
class Generation02:
    """Verifiers 0.2.0. ``keeps_described``: the setup follows the describe step in this process
    (the trainer's), so describing builds the shared renderer pool and its loads serve the setup."""

    builder: Callable[[WorkerSetup], Any] = build
    keeps_described: bool = False
    # What describing loaded: ((config path, config text), config, taskset).
    _described: tuple[tuple[str, str], Any, Any] | None = None

    def build(self, setup: WorkerSetup) -> Built:
        kept, self._described = self._described, None
        if kept is None or kept[0] != (setup.config_path, setup.config_text):
            return self.builder(setup)
        return assemble(setup, kept[1], kept[2])

    def describe(self, request: DescribeRequest) -> ReplyBody:
        """Load and describe the config, the taskset and a renderer as the workers will."""
        from miles_verifiers.versions import require_supported_versions

        # Checked before importing this side's Verifiers, which runs the episodes.
        require_supported_versions()
        from miles_verifiers.episodes.v02.clients import load_one_renderer, shared_renderer_pool

        config, loaded = load(request.config_path, request.config_text)
        described = describe_tasks(
            request,
            loaded.tasks,
            (lambda spec: shared_renderer_pool(spec).vocab_size)
            if self.keeps_described
            else load_one_renderer,
            env_id=str(getattr(config, "env_id", None) or config.taskset.id),
            has_group_reward=loaded.has_group_reward,
        )
        if self.keeps_described:
            self._described = ((request.config_path, request.config_text), config, loaded)
        return described

    def open_call(self, built: Built, start: CallStart, transport: Any) -> tuple[Any, str]:
        from miles_verifiers.episodes.v02.clients import MilesTrainClient

        return MilesTrainClient(transport, built.renderer_pool, built.setup.renderer), ""

    def close_call(self, call_id: str) -> None:
        pass

    async def run_group(self, built: Built, call: OpenCall, request: GroupRequest) -> GroupResult:
        """Never raises for the episode's own failures (a refused task, a group reward raising,
        the deadline): the rollouts it reached carry them; cancellation propagates."""
        task = built.tasks[request.task_index]
        contexts = _contexts(call, request.sampling)
        episode = None
        failure: Literal["episode_error", "episode_timeout"] | None = None
        error: EpisodeErrorRecord | None = None
        try:
            episode = call.environment.episode(task, contexts[0], n=len(contexts))
            for rollout, context in zip(episode.rollouts, contexts, strict=True):
                # Verifiers reads the context when the rollout starts, so per-rollout seeds go here.
                set_rollout_context(rollout, context)
            async with asyncio.timeout(request.deadline_s):
                traces = tuple(await episode.run(call.semaphore))
        except TimeoutError:
            failure = "episode_timeout"
            error = EpisodeErrorRecord(
                type="EpisodeTimeoutError",
                message=f"the episode of task {getattr(task.data, 'idx', '?')} ran past its "
                f"deadline of {request.deadline_s:g} s and was cancelled",
                timeout=True,
            )
        except Exception as exc:
            failure, error = "episode_error", _error_record(exc)
        if failure is not None:
            # Those its rollouts had reached (maybe fewer, maybe unscored).
            rollouts = episode.rollouts if episode is not None else ()
            traces = tuple(r.trace for r in rollouts if getattr(r, "trace", None) is not None)
        usage = call.transport.prefix_cache_usage
        return GroupResult(
            traces=[
                trace_record(t, usage).model_copy(update={"episode_error": error, "rollout": k})
                for k, t in enumerate(traces)
            ],
            failure=failure,
            error=error,
        )


def _contexts(call: OpenCall, sampling: list[dict[str, Any]]) -> list[Any]:
    from verifiers.v1 import ModelContext, SamplingConfig

    def context(values: dict[str, Any]) -> Any:
        return ModelContext(
            model=call.start.model,
            client=call.client,
            sampling=SamplingConfig.model_validate(values),
        )

    # Rollouts without their own seed share one context, as in the trainer process.
    if all(values == sampling[0] for values in sampling):
        return [context(sampling[0])] * len(sampling)
    return [context(values) for values in sampling]


def _error_record(error: BaseException) -> EpisodeErrorRecord:
    # The same two fields describe_error reads, so the trainer describes it identically.
    message = getattr(error, "message", None)
    return EpisodeErrorRecord(
        type=getattr(error, "type", None) or type(error).__name__,
        message=str(error) if message is None else str(message),
    )
