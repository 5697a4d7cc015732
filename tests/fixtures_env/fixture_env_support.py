"""Builders shared by the fixture taskset tests: hand-made traces and a scripted model client."""

from __future__ import annotations

import asyncio
import itertools
import json
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import verifiers.v1 as vf
from verifiers.v1 import graph
from verifiers.v1.clients.train import serialize_completion

from miles_verifiers_testkit.harness.protocol import find_questions, format_answer

CONFIG_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "configs"

Policy = Callable[[list[vf.Message], list[dict[str, Any]]], vf.AssistantMessage]


def reply(content: str | None = None, *calls: tuple[str, dict[str, Any]]) -> vf.AssistantMessage:
    """An assistant message; each call is ``(tool name, arguments)``."""
    tool_calls = [
        vf.ToolCall(id=f"call_{i}", name=name, arguments=json.dumps(args))
        for i, (name, args) in enumerate(calls)
    ]
    return vf.AssistantMessage(content=content, tool_calls=tool_calls or None)


def response(message: vf.AssistantMessage) -> vf.Response:
    finish = "tool_calls" if message.tool_calls else "stop"
    return vf.Response(
        id="scripted", created=0, model="scripted", message=message, finish_reason=finish
    )


def new_trace(data: vf.TaskData, state: vf.State | None = None) -> vf.Trace:
    return vf.Trace(task=vf.TraceTask(type="Hand", data=data), state=state or vf.State())


def commit(trace: vf.Trace, prompt: list[vf.Message], message: vf.AssistantMessage) -> None:
    """Record one model turn with Verifiers' own graph code, as the interception server does."""
    graph.prepare_turn(trace, prompt).commit(response(message))


def conversation(
    data: vf.TaskData,
    *turns: tuple[list[vf.Message], vf.AssistantMessage],
    state: vf.State | None = None,
) -> vf.Trace:
    """A linear trace: each turn adds its new input messages, then the model's reply."""
    trace = new_trace(data, state)
    prompt: list[vf.Message] = []
    for new_messages, message in turns:
        prompt = [*prompt, *new_messages]
        commit(trace, prompt, message)
        prompt = [*prompt, message]
    return trace


def user(text: str) -> vf.UserMessage:
    return vf.UserMessage(content=text)


def protocol_policy(prompt: list[vf.Message], tools: list[dict[str, Any]]) -> vf.AssistantMessage:
    """Answers the way the fixture protocol expects of a good model."""
    last = prompt[-1]
    if isinstance(last, vf.ToolMessage):
        return reply(f"The tool says {last.content}. {format_answer(int(str(last.content)))}")
    text = vf.types.content_text(last.content) if last.content else ""
    questions = find_questions(text)
    if tools and "Use the calculator tool" in text:
        question = questions[-1]
        return reply(None, ("calculator_add", {"a": question.a, "b": question.b}))
    return reply(f"Working it out. {format_answer(questions[-1].answer)}" if questions else "?")


class ScriptedClient(vf.Client):
    """A Verifiers model client whose replies come from a policy function.

    It stands in for a language model (none can run here) behind the real interception
    server: it receives the typed prompt Verifiers resolved for the turn and returns a
    ``Response`` whose ``raw`` is the OpenAI chat.completion the harness's SDK reads, built
    with Verifiers' own serializer. Every prompt it saw is kept in ``prompts``, the tools
    offered with it in ``offered_tools``.
    """

    def __init__(self, policy: Policy = protocol_policy, fail_with: Exception | None = None):
        self.policy = policy
        self.fail_with = fail_with
        self.prompts: list[list[vf.Message]] = []
        self.offered_tools: list[list[dict[str, Any]]] = []
        self._ids = itertools.count()

    async def get_response(
        self,
        dialect: Any,
        body: dict,
        model: str,
        sampling_args: vf.SamplingConfig,
        session_id: str | None = None,
        turn: graph.PendingTurn | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> vf.Response:
        prompt = list(turn.prompt) if turn is not None else dialect.parse_request(body)[0]
        self.prompts.append(prompt)
        self.offered_tools.append(list(body.get("tools") or []))
        if self.fail_with is not None:
            raise self.fail_with
        result = response(self.policy(prompt, self.offered_tools[-1]))
        result.id = f"scripted-{next(self._ids)}"
        result.raw = serialize_completion(result, model)
        return result


def model_context(client: vf.Client) -> vf.ModelContext:
    return vf.ModelContext(model="scripted", client=client, sampling=vf.SamplingConfig())


def load_config(name: str, **overrides: dict[str, Any]) -> vf.EnvConfig:
    """A fixture EnvConfig from fixtures/configs/<name>.toml, with tables updated by key."""
    raw = tomllib.loads((CONFIG_DIR / f"{name}.toml").read_text())
    for table, values in overrides.items():
        if isinstance(values, dict):
            raw[table] = {**raw.get(table, {}), **values}
        else:
            raw[table] = values
    return vf.EnvConfig.model_validate(raw)


async def run_episode(
    config: vf.EnvConfig, client: vf.Client, *, task_index: int = 0, n: int = 1
) -> list[vf.Trace]:
    env = vf.Environment(config)
    task = env.taskset.load()[task_index]
    async with env.serving():
        episode = env.episode(task, model_context(client), n=n)
        return await asyncio.wait_for(episode.run(), timeout=120)


class ToolsetServer:
    """Serves a Verifiers Toolset over MCP streamable HTTP on 127.0.0.1, inside this process.

    Uses the toolset's own registration, so the tools, names and schemas are the ones its
    ``python -m`` server would expose; only the process boundary is skipped.
    """

    def __init__(self, toolset: vf.Toolset) -> None:
        self.toolset = toolset
        self.url = ""
        self._server: Any = None
        self._task: asyncio.Task | None = None

    async def __aenter__(self) -> ToolsetServer:
        import socket

        import uvicorn
        from mcp.server.fastmcp import FastMCP
        from mcp.server.transport_security import TransportSecuritySettings

        mcp = FastMCP(
            self.toolset.server_name,
            json_response=True,
            stateless_http=True,
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
        )
        self.toolset._register(mcp)
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        sock.bind(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{sock.getsockname()[1]}/mcp"
        self._server = uvicorn.Server(
            uvicorn.Config(mcp.streamable_http_app(), log_level="warning")
        )
        self._task = asyncio.create_task(self._server.serve(sockets=[sock]))
        async with asyncio.timeout(30):
            while not self._server.started:
                if self._task.done():
                    self._task.result()
                await asyncio.sleep(0.02)
        return self

    async def __aexit__(self, *exc: object) -> None:
        self._server.should_exit = True
        if self._task is not None:
            await asyncio.wait_for(self._task, timeout=30)
