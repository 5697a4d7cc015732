"""Fixtures for the runner tests."""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import pytest

from tests.runner.runner_support import build_parser


@pytest.fixture
def parse() -> Callable[[Sequence[str]], argparse.Namespace]:
    return lambda argv: build_parser().parse_args(list(argv))
