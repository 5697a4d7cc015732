"""The episode worker settings and what a lost worker's group becomes."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from miles_verifiers import AdapterSettings, SetupError
from miles_verifiers.trainer.backends import ray as ray_backend
from miles_verifiers.trainer.backends.pool import WorkerLostError
from miles_verifiers.trainer.groups import GroupRun
from miles_verifiers.trainer.rollout import SettingsError
from miles_verifiers.trainer.scheduling import Outcome
from miles_verifiers.trainer.training import judge_group


def test_one_episode_worker_and_the_local_backend_are_the_defaults() -> None:
    settings = AdapterSettings()
    assert (settings.episode_workers, settings.episode_worker_backend) == (1, "local")


def test_zero_episode_workers_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MILES_VERIFIERS_EPISODE_WORKERS", "0")
    with pytest.raises(SettingsError, match="MILES_VERIFIERS_EPISODE_WORKERS"):
        AdapterSettings.from_environ()


def test_an_unknown_backend_is_refused_naming_the_variable(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("MILES_VERIFIERS_EPISODE_WORKER_BACKEND", "slurm")
    with pytest.raises(SettingsError, match="MILES_VERIFIERS_EPISODE_WORKER_BACKEND"):
        AdapterSettings.from_environ()


def test_the_ray_backend_without_ray_installed_names_the_setting_and_the_extra(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(ray_backend.importlib.util, "find_spec", lambda name: None)
    with pytest.raises(SetupError) as caught:
        ray_backend.require_ray()
    message = str(caught.value)
    assert "MILES_VERIFIERS_EPISODE_WORKER_BACKEND" in message
    assert "miles-verifiers[ray]" in message


def test_a_group_whose_worker_was_lost_is_dropped_as_worker_lost() -> None:
    run = GroupRun((), "worker_lost", WorkerLostError("episode worker 0.1 (pid 1) was lost"))
    verdict = asyncio.run(judge_group(run, 4, SimpleNamespace(), None, None))
    assert (verdict.outcome, verdict.reason) == (Outcome.DROPPED, "worker_lost")
    assert verdict.example_error is not None and "pid 1" in verdict.example_error
