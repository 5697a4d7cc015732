"""The worker template: an interpreter that has imported what episodes need and forks each
local episode worker on request, so none pays Verifiers' seconds of imports again.

Its stdin is one end of a ``SOCK_SEQPACKET`` pair; each message names an entry and its
environment (JSON) with the child's standard streams attached, and is answered with the pid.
Fork safety: only library modules are imported (and tokenizers loaded), no thread or loop is
started. It exits when the socket closes; SIGCHLD is ignored so the kernel reaps the children.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import os
import signal
import socket
import sys
import traceback
from typing import Any

# What a fork runs: the module whose main() it calls.
ENTRIES = {
    "worker": "miles_verifiers.episodes.child",
    "describe": "miles_verifiers.episodes.describe",
}
# Imported before the first fork; one that fails is left to the worker to report. The
# tokenization_auto module is most of a first tokenizer load's cost (0.6 s of CPU).
PRELOADED = (
    "verifiers",
    "verifiers.v1",
    "renderers",
    "transformers",
    "transformers.models.auto.tokenization_auto",
    *ENTRIES.values(),
)
# An entry and its environment, as one datagram.
MAX_MESSAGE = 1 << 20


def _run_entry(channel: socket.socket, fds: list[int], message: dict[str, Any]) -> None:
    """In the forked child: the descriptors become the standard streams, then the entry runs."""
    code = 1
    try:
        channel.detach()  # fd 0; the dup2 below replaces it
        os.setsid()
        signal.signal(signal.SIGCHLD, signal.SIG_DFL)
        for target, fd in enumerate(fds):  # received above 2: the standard streams are open
            os.dup2(fd, target)
        for fd in fds:
            os.close(fd)
        os.environ.clear()
        os.environ.update(message["environ"])
        importlib.import_module(ENTRIES[message["entry"]]).main()
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        with contextlib.suppress(Exception):
            sys.stderr.flush()
        os._exit(code)


def serve(channel: socket.socket) -> None:
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, MAX_MESSAGE, 3)
        except OSError:
            return
        if not message:
            return
        pid = 0  # answered for a malformed message
        if len(fds) in (2, 3):
            pid = os.fork()
            if pid == 0:
                _run_entry(channel, fds, json.loads(message))
        for fd in fds:
            os.close(fd)
        channel.send(str(pid).encode())


def main() -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {__name__}")
    parser.add_argument("--tokenizer", help="a tokenizer source to load before forking")
    parser.add_argument("--copies", type=int, default=1)
    options = parser.parse_args()
    for name in PRELOADED:
        with contextlib.suppress(Exception):
            importlib.import_module(name)
    if options.tokenizer:
        from miles_verifiers.episodes.preloaded import preload

        preload(options.tokenizer, options.copies)
    serve(socket.socket(fileno=0))


if __name__ == "__main__":
    main()
