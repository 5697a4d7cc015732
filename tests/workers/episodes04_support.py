"""Whole Verifiers 0.4 episodes of a fixture environment, run by Verifiers' own ``env.slots()``
and ``env.run_slot()`` in the episodes' interpreter, against a scripted OpenAI-compatible model
that answers every question right. Imported by the scripts ``test_fixture_faults04.py`` runs
there (only the standard library, Verifiers and what Verifiers installs).

``python episodes04_support.py CONFIG TASKSET_JSON TASK_INDEX N`` prints one JSON line: per slot,
what Verifiers recorded of its episode and of each trace.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import sys
import threading
import time
import tomllib
from pathlib import Path
from typing import Any

KEY_VAR = "MV_SCRIPTED_MODEL_KEY"


def _answer(messages: list[dict[str, Any]]) -> str:
    from miles_verifiers_testkit.protocol import find_questions, format_answer

    for message in reversed(messages):
        content = message.get("content")
        text = content if isinstance(content, str) else json.dumps(content)
        if message.get("role") == "user" and (questions := find_questions(text)):
            return format_answer(questions[-1].answer)
    return "I do not know."


def serve_scripted_model() -> str:
    """A chat-completions endpoint on a loopback port, served from a daemon thread; its URL."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    async def complete(request: Request) -> JSONResponse:
        body = await request.json()
        text = _answer(body.get("messages", []))
        return JSONResponse(
            {
                "id": "scripted",
                "object": "chat.completion",
                "created": 0,
                "model": body.get("model", "scripted"),
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": text},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2},
            }
        )

    app = Starlette(routes=[Route("/v1/chat/completions", complete, methods=["POST"])])
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    deadline = time.monotonic() + 30
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("the scripted model did not start")
        time.sleep(0.01)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/v1"


def _errors(errors: list[Any]) -> list[dict[str, str]]:
    return [{"type": e.type, "message": e.message} for e in errors]


def summarise(episode: Any) -> dict[str, Any]:
    return {
        "ok": episode.ok,
        "is_timeout": episode.is_timeout,
        "errors": _errors(episode.errors),
        "traces": [
            {
                "agent": trace.agent.name if trace.agent is not None else None,
                "trainable": trace.agent.trainable if trace.agent is not None else True,
                "ok": trace.ok,
                "is_timeout": trace.is_timeout,
                "stop": trace.stop_condition,
                "errors": _errors(trace.errors),
                "reward": trace.reward,
                "turns": trace.num_turns,
            }
            for trace in episode.traces
        ],
    }


async def run_task(config: Path, taskset: dict[str, Any], task_index: int, n: int) -> list[Any]:
    import verifiers.v1 as vf

    data = tomllib.loads(config.read_text(encoding="utf-8"))
    data["taskset"] = {**data["taskset"], **taskset}
    env = vf.load_environment(vf.resolve_env_config(data))
    task = list(env.taskset)[task_index]
    os.environ.setdefault(KEY_VAR, "scripted")
    context = vf.ModelContext(
        model="scripted",
        client=vf.EvalClientConfig(base_url=serve_scripted_model(), api_key_var=KEY_VAR),
    )
    async with env.serving():
        slots = env.slots(task, n)
        episodes = await asyncio.gather(*(env.run_slot(slot, context) for slot in slots))
    return [summarise(e) for e in episodes]


def main() -> None:
    config, taskset, task_index, n = sys.argv[1:5]
    slots = asyncio.run(run_task(Path(config), json.loads(taskset), int(task_index), int(n)))
    print(json.dumps(slots))


if __name__ == "__main__":
    main()
