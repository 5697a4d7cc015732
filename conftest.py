"""Session set-up shared by tests/, conformance/ and benchmarks/.

The exact tokenizers are rebuilt (or reused, by content hash) before anything imports
huggingface_hub or transformers, because both read their cache and offline settings at
import time. Every test then loads ``Qwen/Qwen3-0.6B`` and friends by hub id, offline.
"""

from __future__ import annotations

import os
from collections.abc import Generator

import pytest


@pytest.hookimpl(wrapper=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> Generator[None, int, int]:
    """``-n auto`` starts one worker more than pytest-xdist counts cores: much of the suite
    waits (on the processes it starts, engine latency, deadlines), and a third worker on 2
    cores fills those waits. ``PYTEST_XDIST_AUTO_NUM_WORKERS`` is taken as given."""
    cores = yield
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return cores
    return cores + 1


def pytest_configure(config: pytest.Config) -> None:
    from miles_verifiers_testkit.tokenizers import build_all, offline_environ

    environ = offline_environ()
    os.environ.update(environ)
    build_all()


def _signal_state() -> tuple:
    """SIGINT's and SIGTERM's Python handlers, whether the OS ignores them (C code can set that
    alone; a C library's own handler, as torch installs, is fine), and the blocked signals of
    this (the main) thread."""
    import ctypes
    import signal

    libc = ctypes.CDLL(None)
    state = []
    for signum in (signal.SIGINT, signal.SIGTERM):
        action = ctypes.create_string_buffer(256)  # a struct sigaction; its handler comes first
        libc.sigaction(signum, None, action)
        ignored = ctypes.c_void_p.from_buffer(action).value == signal.SIG_IGN
        state.append((signal.getsignal(signum), ignored))
    return tuple(state), frozenset(signal.pthread_sigmask(signal.SIG_BLOCK, []))


def _take_ctrl_c_as_an_interactive_run_does() -> None:
    """A shell starts a background job (``tox &``) with SIGINT ignored, and every process a
    test starts inherits that, so the Ctrl-C tests would interrupt nothing and wait out their
    bounds: the suite handles Ctrl-C as it does in a terminal."""
    import signal

    if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
        signal.signal(signal.SIGINT, signal.default_int_handler)


_take_ctrl_c_as_an_interactive_run_does()
_SESSION_SIGNALS = _signal_state()


@pytest.fixture(autouse=True)
def _signals_left_as_found():
    # A test or fixture that leaves SIGINT ignored or blocked breaks every later Ctrl-C test
    # of its xdist worker (children inherit both), far from the cause: fail where it happened.
    # Compared with the session's start, so a module fixture's change is caught too.
    import signal

    def check(when: str) -> None:
        now = _signal_state()
        if now != _SESSION_SIGNALS:
            ((sigint, _), (sigterm, _)), mask = _SESSION_SIGNALS
            signal.signal(signal.SIGINT, sigint)
            signal.signal(signal.SIGTERM, sigterm)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            pytest.fail(f"signal handling changed {when}: {_SESSION_SIGNALS} -> {now}")

    check("before this test (by a fixture of a wider scope, or an earlier test's teardown)")
    yield
    check("by this test")
