"""What the trainer-side backend tests share: a bounded scenario runner, a worker setup that
nothing reads, and one call with one group to run (stand-ins, no engine)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any

from miles_verifiers.protocol.messages import (
    CleanupSpec,
    GroupRequest,
    RendererSpecModel,
    WorkerSetup,
)
from miles_verifiers.trainer.backends.call import WorkerCallScope

# Bounds each scenario (a hang fails the test instead of stalling the suite).
SCENARIO_BOUND_S = 20.0


def run(scenario: Awaitable[Any], bound_s: float = SCENARIO_BOUND_S) -> Any:
    """``asyncio.run(scenario)``, failing once it has run ``bound_s`` seconds."""

    async def bounded() -> Any:
        return await asyncio.wait_for(scenario, bound_s)

    return asyncio.run(bounded())


def unused_setup(**fields: Any) -> WorkerSetup:
    """A worker setup with placeholder values (``fields`` replace them)."""
    values: dict[str, Any] = {
        "config_path": "unused.toml",
        "config_text": "",
        "expected_tasks": 1,
        "renderer": RendererSpecModel(tokenizer_source="unused", identity=None),
        "transport": {},
        "cleanup": CleanupSpec(abort_s=1, grace_s=1, shutdown_s=1, handler_s=1),
    }
    return WorkerSetup(**{**values, **fields})


def make_call(pool: Any, call_id: str = "c1") -> WorkerCallScope:
    """A train call on ``pool`` with one sampling option per group and no transport."""
    return WorkerCallScope(
        pool=pool,
        call_id=call_id,
        mode="train",
        transport=None,
        sampling_for=lambda slot: [{}],
        deadline_s=1.0,
        engine_url="http://127.0.0.1:1",
        model="unused",
        max_concurrency=1,
    )


def group(call: WorkerCallScope) -> GroupRequest:
    """The request for the first group of ``call``."""
    return GroupRequest(call_id=call.call_id, slot=0, task_index=0, sampling=[{}], deadline_s=1)
