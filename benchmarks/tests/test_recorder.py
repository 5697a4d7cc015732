from __future__ import annotations

from benchmarks.recorder import Recorder


def test_result_keeps_the_machine_and_commit_taken_when_the_run_started() -> None:
    started = {"cpu": "x", "cores": 2, "commit": "a" * 40, "dirty": False}
    recorder = Recorder(machine=dict(started))
    recorder.record("k", [1.0], group="g", label="l", unit="u")
    assert recorder.result().machine == started


def test_result_without_a_start_snapshot_describes_the_machine_when_written() -> None:
    recorder = Recorder()
    recorder.record("k", [1.0], group="g", label="l", unit="u")
    assert {"commit", "dirty", "cores"} <= set(recorder.result().machine)
