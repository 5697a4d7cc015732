"""A pytest plugin for runs against Miles' own adapter: what Miles' rollout process sets up first.

Miles' rollout manager creates the process-wide HTTP client of ``miles.utils.http_utils``
before it calls a rollout function, and Miles' adapter posts through it; outside Miles nothing
creates it. Loaded with ``-p miles_verifiers_conformance.upstream.miles_process`` by ``python -m
miles_verifiers_conformance.upstream``, never in the default run.
"""

from __future__ import annotations

from argparse import Namespace

import pytest


class NoReplacementError(Exception):
    """Stands for the bounded-replacement error of an adapter that has none.

    Miles' adapter resamples until its batch is full, without bound, so nothing it raises may
    count as that error; the suite's deadline then reports the endless resampling as a hang.
    """


def pytest_configure(config: pytest.Config) -> None:
    from tests_miles.miles_env import install_sglang_shim

    install_sglang_shim()  # Miles' modules import an SGLang module no released wheel has
    from miles.utils.http_utils import init_http_client

    from miles_verifiers_testkit.miles import miles_args

    args = vars(miles_args())
    # The two eval-engine values Miles' parser adds and the test kit has no use for.
    args.setdefault("eval_num_gpus", 0)
    args.setdefault("eval_num_gpus_per_engine", 1)
    init_http_client(Namespace(**args))
