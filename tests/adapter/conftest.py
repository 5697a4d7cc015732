"""Shared builders for the adapter "rooms" tests.

Traces are built with verifiers' own graph code (``prepare_turn`` + ``commit``), the path a
real episode takes, with token ids chosen by the test: conversion only looks at ids, masks
and log-probs, so no tokenizer or engine is needed to exercise it.
"""

from __future__ import annotations

import argparse
import importlib
import itertools
import sys
import textwrap
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path

import pytest
import verifiers.v1 as vf
from miles_verifiers_testkit.miles import miles_args as kit_miles_args
from verifiers.v1 import graph

_ids = itertools.count(1000)


def _response(
    content: str, completion: Sequence[int], prompt_ids: Sequence[int], finish: str | None
) -> vf.Response:
    return vf.Response(
        id="resp",
        created=0,
        model="policy",
        message=vf.AssistantMessage(content=content),
        finish_reason=finish,
        tokens=vf.TurnTokens(
            prompt_ids=list(prompt_ids),
            completion_ids=list(completion),
            completion_logprobs=[-0.5 - 0.01 * i for i in range(len(completion))],
        ),
    )


class TraceBuilder:
    """Commits turns onto a real ``vf.Trace`` the way the interception server does."""

    def __init__(self, data: vf.TaskData) -> None:
        self.trace = vf.Trace(task=vf.TraceTask(type="Task", data=data))

    def turn(
        self,
        prompt: list[vf.Message],
        reply: str,
        *,
        prompt_ids: Sequence[int],
        completion_ids: Sequence[int],
        finish: str | None = "stop",
        spans: list[tuple[int, int] | None] | None = None,
    ) -> TraceBuilder:
        pending = graph.prepare_turn(self.trace, prompt)
        response = _response(reply, completion_ids, prompt_ids, finish)
        if spans is not None:
            response.tokens.message_spans = spans
        pending.commit(response)
        return self


def fresh_ids(count: int) -> list[int]:
    return [next(_ids) for _ in range(count)]


@pytest.fixture
def task_data() -> vf.WireTaskData:
    return vf.WireTaskData(idx=7, prompt="What is 2 + 3?", answer=5)


@pytest.fixture
def single_turn_trace(task_data: vf.WireTaskData) -> vf.Trace:
    """One user message (4 prompt tokens + 2 scaffold) and a 3-token sampled reply."""
    user = vf.UserMessage(content="What is 2 + 3?")
    builder = TraceBuilder(task_data).turn(
        [user],
        "5",
        prompt_ids=[11, 12, 13, 14, 15, 16],
        completion_ids=[21, 22, 23],
        spans=[(0, 4)],
    )
    builder.trace.record_reward("correct", 1.0)
    builder.trace.record_reward("brevity", 0.5, weight=0.5)
    builder.trace.record_metric("reply_chars", 1.0)
    builder.trace.stop("agent_completed")
    return builder.trace


@pytest.fixture
def two_turn_trace(task_data: vf.WireTaskData) -> vf.Trace:
    """A user turn, a reply, then a tool result and a second reply on the same branch."""
    user = vf.UserMessage(content="What is 2 + 3?")
    first = vf.AssistantMessage(content="calling")
    tool = vf.ToolMessage(content="5", tool_call_id="call-1")
    builder = TraceBuilder(task_data)
    builder.turn([user], "calling", prompt_ids=[1, 2, 3, 4], completion_ids=[5, 6], spans=[(0, 3)])
    # Turn 2 extends turn 1's tokens: prompt = turn 1 (prompt + completion) + tool + scaffold.
    builder.turn(
        [user, first, tool],
        "5",
        prompt_ids=[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        completion_ids=[31, 32],
        spans=[(0, 3), None, (6, 9)],
    )
    builder.trace.record_reward("correct", 1.0)
    builder.trace.stop("agent_completed")
    return builder.trace


@pytest.fixture
def build_trace() -> Callable[[vf.TaskData], TraceBuilder]:
    return TraceBuilder


# -- a tiny installed-on-the-fly taskset, for config tests -------------------------------------

_TASKSET_SOURCE = """
import verifiers.v1 as vf


class TinyData(vf.TaskData):
    answer: str


class TinyTask(vf.Task[TinyData]):
    @vf.reward
    async def correct(self, task, trace) -> float:
        return float(trace.last_reply == task.answer)
{group_reward}

class TinyConfig(vf.TasksetConfig):
    count: int = 3
    fail: bool = False


class TinyTaskset(vf.Taskset[TinyTask, TinyConfig]):
    def load(self):
        if self.config.fail:
            raise RuntimeError("dataset shard missing")
        return [
            TinyTask(TinyData(idx=i, prompt=f"{{i}} + 1?", answer=str(i + 1)), self.config.task)
            for i in range(self.config.count)
        ]


__all__ = ["TinyTaskset"]
"""

_GROUP_REWARD = """
    @vf.group_reward
    async def rank(self, task, traces) -> list[float]:
        return [0.0 for _ in traces]
"""


@pytest.fixture
def make_taskset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[..., str]:
    """Write a taskset package under tmp_path, put it on sys.path, return its id."""
    root = tmp_path / "plugins"
    root.mkdir()
    monkeypatch.syspath_prepend(str(root))
    created: list[str] = []

    def make(name: str = "mvtest_tiny", *, group_reward: bool = False) -> str:
        package = root / name
        package.mkdir()
        body = _TASKSET_SOURCE.format(group_reward=_GROUP_REWARD if group_reward else "")
        (package / "__init__.py").write_text(textwrap.dedent(body))
        importlib.invalidate_caches()
        created.append(name)
        return name.replace("_", "-")

    yield make
    for name in created:
        for module in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[module]


@pytest.fixture
def write_config(tmp_path: Path) -> Callable[[str, str], Path]:
    def write(text: str, name: str = "env.toml") -> Path:
        path = tmp_path / name
        path.write_text(textwrap.dedent(text))
        return path

    return write


# A Miles namespace the adapter accepts (the test kit's, with Miles' defaults); keyword
# arguments change attributes.
miles_args = partial(
    kit_miles_args,
    rollout_batch_size=4,
    n_samples_per_prompt=2,
    n_samples_per_eval_prompt=2,
    rollout_max_response_len=128,
    rollout_num_gpus=2,
    num_rollout=10,
)


@pytest.fixture
def make_args() -> Callable[..., argparse.Namespace]:
    return miles_args
