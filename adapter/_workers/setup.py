"""Builds the worker pool of a rollout function from what its construction produced."""

from __future__ import annotations

import dataclasses
import sys
from typing import Any

from miles_verifiers._workers.pool import PoolLimits, WorkerPool
from miles_verifiers._workers.protocol import CleanupSpec, RendererSpecModel, WorkerSetup

# Seconds on top of the episode deadline and its wind-down before a worker counts as hung.
ANSWER_SLACK_S = 5.0


def worker_setup(run: Any) -> WorkerSetup:
    """The setup message: the config as text (workers need not see the trainer's files, only
    the taskset packages), the renderer, transport templates and cleanup limits."""
    path = run.prepared.config_path
    cleanup = run.settings.cleanup
    return WorkerSetup(
        config_path=str(path),
        config_text=path.read_text(encoding="utf-8"),
        expected_tasks=len(run.train.tasks),
        renderer=RendererSpecModel(**dataclasses.asdict(run.renderer_spec)),
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
        sys_path=[p for p in sys.path if p],
    )


def build_pool(run: Any) -> WorkerPool:
    settings = run.settings
    limits = PoolLimits(
        count=settings.episode_workers,
        restarts_per_call=settings.episode_worker_restarts,
        # Past its deadline a worker still cancels the episode and aborts its requests.
        answer_margin_s=settings.cleanup_grace_s + settings.abort_timeout_s + ANSWER_SLACK_S,
    )
    if settings.episode_worker_backend == "ray":
        from miles_verifiers._workers.ray_backend import start_ray_worker

        return WorkerPool(limits, worker_setup(run), start_ray_worker)
    from miles_verifiers._workers.local import LocalWorker

    return WorkerPool(limits, worker_setup(run), LocalWorker.start)
