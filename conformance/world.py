"""The world an adapter lives in during a conformance test: Miles around it, the engine behind it.

``MilesWorld`` builds the adapter the way Miles' rollout manager does (constructor input
first, engine address set afterwards on the same args) and calls it the way Miles does (from
a worker thread, coroutines on one persistent loop), with a deadline per call. The engine is
the project's loopback SGLang engine, wrapped so the suite can see every ``/generate`` call it
received and what it answered; nothing of the adapter's internals is looked at.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import threading
import time
from argparse import Namespace
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomli_w
from miles_verifiers.fixtures.engine import FaultPlan, LatencyModel, LoopbackEngine, PolicyConfig

from conformance.miles_side import MilesLoop, call_from_worker_thread, point_at_engine

CONFIG_ENV_VAR = "VERIFIERS_CONFIG"
FIXTURE_CONFIGS = Path(__file__).resolve().parents[1] / "fixtures" / "configs"
DEFAULT_DEADLINE_S = 120.0
QUIET_WAIT_S = 15.0


# -- the engine, observed --------------------------------------------------------------


@dataclass(frozen=True)
class GenerateCall:
    """One ``/generate`` HTTP call as the engine received and answered it."""

    request: Any  # the decoded JSON body (None when it was not JSON)
    status: int
    response: Any
    fault: str | None

    @property
    def sampling_params(self) -> Mapping[str, Any]:
        params = self.request.get("sampling_params") if isinstance(self.request, dict) else None
        return params if isinstance(params, dict) else {}

    @property
    def input_ids(self) -> list[int]:
        ids = self.request.get("input_ids") if isinstance(self.request, dict) else None
        return list(ids) if isinstance(ids, list) and all(isinstance(i, int) for i in ids) else []

    @property
    def output(self) -> tuple[list[int], list[float]]:
        """Sampled ids and logprobs of a served single request (empty otherwise)."""
        if self.status != 200 or not isinstance(self.response, dict):
            return [], []
        triples = self.response.get("meta_info", {}).get("output_token_logprobs") or []
        return [int(t[1]) for t in triples], [float(t[0]) for t in triples]

    @property
    def finish_type(self) -> str | None:
        if not isinstance(self.response, dict):
            return None
        reason = self.response.get("meta_info", {}).get("finish_reason")
        return reason.get("type") if isinstance(reason, dict) else reason


class RecordingEngine(LoopbackEngine):
    """The loopback engine, keeping a log of every ``/generate`` and abort call it served."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._log_lock = threading.Lock()
        self._calls: list[GenerateCall] = []
        self._aborts = 0

    async def generate(self, body: bytes | Any) -> Any:
        result = await super().generate(body)
        try:
            request = json.loads(body) if isinstance(body, (bytes, bytearray, str)) else body
        except ValueError:
            request = None
        fault = result.fault.value if result.fault is not None else None
        with self._log_lock:
            self._calls.append(
                GenerateCall(request, result.status, copy.deepcopy(result.body), fault)
            )
        return result

    def abort(self, rid: str = "", abort_all: bool = False) -> int:
        with self._log_lock:
            self._aborts += 1
        return super().abort(rid, abort_all)

    def calls(self) -> list[GenerateCall]:
        with self._log_lock:
            return list(self._calls)

    def request_count(self) -> int:
        """Every ``/generate`` and ``/abort_request`` call since the last reset."""
        with self._log_lock:
            return len(self._calls) + self._aborts

    def reset(
        self,
        *,
        policy: PolicyConfig | None = None,
        faults: FaultPlan | None = None,
        latency: LatencyModel | None = None,
    ) -> None:
        """Forget the log and put the knobs back (defaults unless given).

        Waits (bounded) for requests still in flight from an earlier test, so they cannot
        land in this test's log.
        """
        deadline = time.monotonic() + QUIET_WAIT_S
        while self.in_flight and time.monotonic() < deadline:
            time.sleep(0.02)
        self.set_policy(policy or PolicyConfig())
        self.set_faults(faults or FaultPlan())
        self.set_latency(latency or LatencyModel())
        with self._log_lock:
            self._calls.clear()
            self._aborts = 0


class EnginePool:
    """Several recording workers seen as one engine (behind a router): resets reach every
    worker, and the log is every worker's log."""

    def __init__(self, engines: Sequence[RecordingEngine]) -> None:
        self.engines = tuple(engines)

    def reset(self, **knobs: Any) -> None:
        for engine in self.engines:
            engine.reset(**knobs)

    def calls(self) -> list[GenerateCall]:
        return [call for engine in self.engines for call in engine.calls()]

    def request_count(self) -> int:
        return sum(engine.request_count() for engine in self.engines)

    @property
    def in_flight(self) -> int:
        return sum(engine.in_flight for engine in self.engines)


# -- fixture configs ---------------------------------------------------------------------


def write_config(
    directory: Path,
    name: str,
    *,
    taskset: Mapping[str, Any] | None = None,
    harness: Mapping[str, Any] | None = None,
    top: Mapping[str, Any] | None = None,
) -> Path:
    """A copy of ``fixtures/configs/<name>.toml`` with some values changed, as a new file."""
    import tomllib

    data = tomllib.loads((FIXTURE_CONFIGS / f"{name}.toml").read_text(encoding="utf-8"))
    data.update(top or {})
    data["taskset"] = {**data.get("taskset", {}), **(taskset or {})}
    if harness:
        data["harness"] = {**data.get("harness", {}), **harness}
    directory.mkdir(parents=True, exist_ok=True)
    digest = hashlib.sha1(json.dumps(data, sort_keys=True).encode()).hexdigest()[:12]
    path = directory / f"{name}-{digest}.toml"
    path.write_text(tomli_w.dumps(data), encoding="utf-8")
    return path


def load_task_data(config_path: Path) -> list[Any]:
    """Every task's data, in load order, read through Verifiers' own API."""
    import tomllib

    from verifiers.v1 import EnvConfig, Environment

    config = EnvConfig.model_validate(tomllib.loads(config_path.read_text(encoding="utf-8")))
    return [task.data for task in Environment(config).taskset.load()]


def task_prompts(config_path: Path) -> list[str]:
    """The prompt text of every task, in load order."""
    return [str(data.prompt) for data in load_task_data(config_path)]


def env_id(config_path: Path) -> str:
    import tomllib

    from verifiers.v1 import EnvConfig

    return EnvConfig.model_validate(tomllib.loads(config_path.read_text(encoding="utf-8"))).env_id


def prompt_matches(sample_prompt: Any, text: str) -> bool:
    """Whether a ``Sample.prompt`` (a string or a list of messages) holds the task text."""
    return text in (sample_prompt if isinstance(sample_prompt, str) else str(sample_prompt))


def identify(sample: Any, prompts: Sequence[str]) -> str | None:
    """The task prompt a sample was generated for, or None."""
    for text in prompts:
        if prompt_matches(sample.prompt, text):
            return text
    return None


# -- Miles around the adapter ----------------------------------------------------------------


@dataclass
class MilesWorld:
    """Builds and calls rollout functions the way Miles does, against the recording engine."""

    adapter_class: type
    contract: Any
    engine: RecordingEngine
    host: str
    port: int
    loop: MilesLoop
    deadline_s: float = DEFAULT_DEADLINE_S
    # "<topology>@<sglang version>" when the engine is a production-like deployment.
    deployment: str = "loopback"

    @contextmanager
    def config_env(self, config_path: Path | str | None) -> Iterator[None]:
        """``VERIFIERS_CONFIG`` as the rollout manager's environment would carry it."""
        previous = os.environ.get(CONFIG_ENV_VAR)
        if config_path is None:
            os.environ.pop(CONFIG_ENV_VAR, None)
        else:
            os.environ[CONFIG_ENV_VAR] = str(config_path)
        try:
            yield
        finally:
            if previous is None:
                os.environ.pop(CONFIG_ENV_VAR, None)
            else:
                os.environ[CONFIG_ENV_VAR] = previous

    def construct(self, args: Namespace, config_path: Path | str | None) -> Any:
        """The rollout manager's construction step: no engine address yet."""
        with self.config_env(config_path):
            return self.adapter_class(
                self.contract.RolloutFnConstructorInput(args=args, data_source=None)
            )

    def start(self, args: Namespace, config_path: Path | str) -> Any:
        """Construct, then set the engine address on the same args, as Miles does."""
        fn = self.construct(args, config_path)
        point_at_engine(args, self.host, self.port)
        return fn

    def connect(self, args: Namespace) -> None:
        point_at_engine(args, self.host, self.port)

    def train(self, fn: Any, rollout_id: int, weight_version: int | None = None) -> Any:
        rollout_input = self.contract.RolloutFnTrainInput(
            rollout_id=rollout_id, weight_version=weight_version
        )
        return call_from_worker_thread(fn, rollout_input, self.loop, self.deadline_s)

    def evaluate(self, fn: Any, rollout_id: int) -> Any:
        rollout_input = self.contract.RolloutFnEvalInput(rollout_id=rollout_id)
        return call_from_worker_thread(fn, rollout_input, self.loop, self.deadline_s)
