"""Start a real SGLang server as a subprocess, wait until it generates, and always stop it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx

from benchmarks.gpu.model_dir import MODEL_ID


class ServerStartError(RuntimeError):
    """SGLang exited or did not answer in time; the message carries the end of its log."""


@dataclass(frozen=True)
class ServerPlan:
    model_dir: Path
    port: int
    host: str = "127.0.0.1"
    mem_fraction_static: float = 0.85
    max_running_requests: int = 512
    cuda_graph_max_bs: int = 512
    context_length: int = 8192
    extra_args: tuple[str, ...] = ()

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"


def sglang_command(plan: ServerPlan, python: str = sys.executable) -> list[str]:
    """The launch command: random weights, the project's tokenizer, bound to loopback only."""
    return [
        python, "-m", "sglang.launch_server",
        "--model-path", str(plan.model_dir),
        "--tokenizer-path", str(plan.model_dir),
        "--served-model-name", MODEL_ID,
        "--load-format", "dummy",
        "--host", plan.host,
        "--port", str(plan.port),
        "--mem-fraction-static", str(plan.mem_fraction_static),
        "--max-running-requests", str(plan.max_running_requests),
        "--cuda-graph-max-bs", str(plan.cuda_graph_max_bs),
        "--context-length", str(plan.context_length),
        "--log-level", "warning",
        *plan.extra_args,
    ]  # fmt: skip


def _log_tail(path: Path, limit: int = 4000) -> str:
    try:
        return path.read_text(errors="replace")[-limit:]
    except OSError:
        return "(no log)"


def _poll(
    what: str,
    url: str,
    process: subprocess.Popen[bytes],
    log_path: Path,
    ready: Callable[[httpx.Client], bool],
    *,
    timeout_s: float,
    request_timeout_s: float,
    interval_s: float,
) -> bool:
    """Ask ``ready`` every ``interval_s`` until it says yes (True) or ``timeout_s`` has passed
    (False); raise if ``process`` exits meanwhile."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(base_url=url, timeout=request_timeout_s) as client:
        while time.monotonic() < deadline:
            if process.poll() is not None:
                raise ServerStartError(
                    f"{what} exited with code {process.returncode} while starting; "
                    f"log tail:\n{_log_tail(log_path)}"
                )
            if ready(client):
                return True
            time.sleep(interval_s)
    return False


def wait_until_generating(
    base_url: str, process: subprocess.Popen[bytes], log_path: Path, timeout_s: float
) -> float:
    """Poll until a one-token generation succeeds; return the seconds it took."""
    started = time.monotonic()
    probe = {
        "input_ids": [151644, 872, 198],
        "sampling_params": {"max_new_tokens": 1, "temperature": 0},
    }

    def generates(client: httpx.Client) -> bool:
        try:
            return client.post("/generate", json=probe).status_code == 200
        except httpx.TransportError:
            return False  # not listening yet

    if _poll(
        "SGLang",
        base_url,
        process,
        log_path,
        generates,
        timeout_s=timeout_s,
        request_timeout_s=10.0,
        interval_s=2.0,
    ):
        return time.monotonic() - started
    raise ServerStartError(
        f"SGLang did not answer a generation within {timeout_s:.0f} s (raise --server-timeout "
        "if the "
        f"machine is slow to capture CUDA graphs); log tail:\n{_log_tail(log_path)}"
    )


def stop_process(process: subprocess.Popen[bytes], grace_s: float = 30.0) -> None:
    """SIGTERM the server's process group, then SIGKILL it if it has not gone after ``grace_s``."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait(timeout=grace_s)
    except ProcessLookupError:
        pass


@contextmanager
def _logged_process(
    command: list[str], log_path: Path, env: Mapping[str, str] | None = None
) -> Iterator[subprocess.Popen[bytes]]:
    """Run ``command`` in a session of its own (so its children stop with it), its output
    into ``log_path``; always stop it on exit."""
    log_path.parent.mkdir(parents=True, exist_ok=True)
    with log_path.open("wb") as log:
        process = subprocess.Popen(
            command, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        try:
            yield process
        finally:
            stop_process(process)


@contextmanager
def sglang_server(
    plan: ServerPlan, log_path: Path, *, timeout_s: float, env: Mapping[str, str] | None = None
) -> Iterator[tuple[str, float]]:
    """Yield ``(base_url, startup_seconds)`` of a running server; always stop it on exit."""
    # The server's own children (scheduler, detokenizer) stop with it.
    with _logged_process(sglang_command(plan), log_path, {**os.environ, **(env or {})}) as process:
        yield plan.base_url, wait_until_generating(plan.base_url, process, log_path, timeout_s)


def router_command(
    worker_url: str, port: int, *, policy: str = "cache_aware", python: str = sys.executable
) -> list[str]:
    """The Rust sglang-router in front of the worker, as Miles starts it (its default policy)."""
    return [
        python, "-m", "sglang_router.launch_router",
        "--host", "127.0.0.1",
        "--port", str(port),
        "--worker-urls", worker_url,
        "--policy", policy,
    ]  # fmt: skip


def wait_until_routing(
    router_url: str, process: subprocess.Popen[bytes], log_path: Path, timeout_s: float
) -> None:
    """Poll (bounded) until the router lists a healthy worker."""

    def routes(client: httpx.Client) -> bool:
        try:
            workers = client.get("/workers").json().get("workers", [])
        except (httpx.HTTPError, ValueError, AttributeError):
            workers = []
        return bool(workers) and all(w.get("is_healthy") for w in workers)

    if not _poll(
        "sglang-router",
        router_url,
        process,
        log_path,
        routes,
        timeout_s=timeout_s,
        request_timeout_s=5.0,
        interval_s=0.5,
    ):
        raise ServerStartError(
            f"sglang-router listed no healthy worker within {timeout_s:.0f} s; log tail:\n"
            f"{_log_tail(log_path)}"
        )


@contextmanager
def sglang_router(
    worker_url: str, port: int, log_path: Path, *, timeout_s: float = 60.0
) -> Iterator[str]:
    """Yield the URL of a Rust sglang-router in front of ``worker_url``; always stop it."""
    router_url = f"http://127.0.0.1:{port}"
    with _logged_process(router_command(worker_url, port), log_path) as process:
        wait_until_routing(router_url, process, log_path, timeout_s)
        yield router_url


def free_port(host: str = "127.0.0.1") -> int:
    import socket

    with socket.socket() as sock:
        sock.bind((host, 0))
        return int(sock.getsockname()[1])


def format_command(command: Sequence[str]) -> str:
    import shlex

    return " ".join(shlex.quote(part) for part in command)
