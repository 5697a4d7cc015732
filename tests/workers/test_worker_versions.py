"""What each side runs is on show: the workers report their Python, Verifiers, Renderers and
protocol; a worker whose hello differs from what construction described stops the call naming
both, and a worker that matches runs its groups."""

from __future__ import annotations

from typing import Any

import pytest

from miles_verifiers.protocol.messages import (
    PROTOCOL_VERSION,
    Done,
    GroupRequest,
    GroupResult,
    Ready,
    Reply,
    WorkerSetup,
    read_request,
)
from miles_verifiers.protocol.versions import (
    WorkerVersionsError,
    process_versions,
    version_line,
)
from miles_verifiers.trainer.backends.pool import PoolLimits, WorkerPool
from tests.workers.scenarios import group, make_call, run, unused_setup

DESCRIBED = {"python": "3.11.7", "verifiers": "0.4.0", "renderers": "0.1.12", "protocol": "2.1"}


class HelloWorker:
    """Answers its setup with a hello reporting ``versions``, everything else at once."""

    def __init__(self, versions: dict[str, str]) -> None:
        self.versions = versions
        self.stopped = False
        self.groups = 0

    @property
    def alive(self) -> bool:
        return not self.stopped

    @property
    def description(self) -> str:
        return "stand-in worker 0.1"

    async def request(self, request_id: int, payload: bytes, *, timeout_s: float) -> bytes:
        body = read_request(payload).body
        reply: Any = Done()
        if isinstance(body, WorkerSetup):
            protocol = self.versions.get("protocol", PROTOCOL_VERSION)
            reply = Ready(protocol=protocol, versions=self.versions)
        elif isinstance(body, GroupRequest):
            self.groups += 1
            reply = GroupResult(traces=[])
        return Reply(id=request_id, body=reply).model_dump_json().encode()

    def kill(self) -> None:
        self.stopped = True

    async def stop(self) -> None:
        self.stopped = True


def run_one_group(worker: HelloWorker) -> None:
    async def start(name: str) -> HelloWorker:
        return worker

    limits = PoolLimits(count=1, restarts_per_call=0)
    pool = WorkerPool(limits, unused_setup(), start, expected_versions=DESCRIBED)
    call = make_call(pool)
    run(pool.run_group(call, group(call)))


def test_a_worker_running_another_verifiers_than_described_stops_the_call_naming_both() -> None:
    worker = HelloWorker({**DESCRIBED, "verifiers": "0.4.1"})

    with pytest.raises(WorkerVersionsError) as raised:
        run_one_group(worker)

    message = str(raised.value)
    assert "verifiers 0.4.1 (described: 0.4.0)" in message
    assert "MILES_VERIFIERS_EPISODE_WORKER_PYTHON" in message
    assert worker.stopped and worker.groups == 0


def test_a_worker_speaking_another_protocol_minor_than_described_stops_the_call() -> None:
    worker = HelloWorker({**DESCRIBED, "protocol": "2.0"})

    with pytest.raises(WorkerVersionsError, match=r"protocol 2\.0 \(described: 2\.1\)"):
        run_one_group(worker)


def test_a_worker_running_what_was_described_runs_its_groups() -> None:
    worker = HelloWorker({**DESCRIBED, "miles-verifiers": "0.5.0"})  # extra names: not compared

    run_one_group(worker)

    assert worker.groups == 1


def test_a_side_reports_its_python_verifiers_renderers_and_protocol() -> None:
    versions = process_versions()

    assert versions["protocol"] == PROTOCOL_VERSION
    assert {"python", "miles-verifiers"} <= set(versions)


def test_a_version_line_names_what_is_not_installed() -> None:
    line = version_line({"python": "3.11.7", "verifiers": "0.2.0", "protocol": "2.1"})

    assert line == "python 3.11.7, verifiers 0.2.0, renderers not installed, protocol 2.1"


def test_a_run_on_workers_records_the_versions_their_interpreter_described() -> None:
    import sys
    from types import SimpleNamespace

    from miles_verifiers.trainer.rollout import AdapterSettings, run_versions

    settings = AdapterSettings(episode_worker_python=sys.executable)

    versions = run_versions(SimpleNamespace(versions=DESCRIBED), settings)  # type: ignore[arg-type]

    assert versions["episodes"] == DESCRIBED
    assert versions["episode_python"] == sys.executable
    assert versions["trainer"] == process_versions()
