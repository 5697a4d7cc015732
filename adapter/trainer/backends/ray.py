"""The Ray backend: each worker is a Ray actor around the same handler a local worker runs.

Actors join Miles' cluster when Ray is initialised or ``RAY_ADDRESS`` names one, else a local
Ray starts. An actor is the subreaper of what it starts; stopping one asks it to shut down
(end its calls and what it started, bounded), then kills it.
"""

from __future__ import annotations

import asyncio
import importlib.util
import logging
import os
import sys
import threading
from pkgutil import resolve_name
from typing import Any

from miles_verifiers.errors import SetupError
from miles_verifiers.protocol import procs
from miles_verifiers.protocol.messages import HANDLER
from miles_verifiers.trainer.backends.pool import WorkerLostError

logger = logging.getLogger(__name__)

BACKEND_SETTING = "MILES_VERIFIERS_EPISODE_WORKER_BACKEND"
# Groups one actor serves at once (Ray's async actors run this many calls concurrently).
ACTOR_CONCURRENCY = 10_000
_init_guard = threading.Lock()


class RayNotInstalledError(SetupError, ImportError):
    """The Ray backend was asked for, but Ray is not installed."""


def require_ray() -> None:
    if importlib.util.find_spec("ray") is None:
        raise RayNotInstalledError(
            f"{BACKEND_SETTING}=ray asks for episode workers as Ray actors, but Ray is not "
            "installed in this environment. Fix: pip install 'miles-verifiers[ray]', or set "
            f"{BACKEND_SETTING}=local to run the workers as local processes."
        )


def _ensure_ray() -> Any:
    import ray

    with _init_guard:
        if not ray.is_initialized():
            ray.init(
                address=os.environ.get("RAY_ADDRESS") or None,
                ignore_reinit_error=True,
                include_dashboard=False,
                log_to_driver=True,
            )
    return ray


class _EpisodeWorkerActor:
    """The actor body: one handler, request bytes in, reply bytes out."""

    def __init__(self, python: str | None = None) -> None:
        path = os.environ.get("PATH")
        os.environ["PATH"] = procs.path_with_bin_first(python or sys.executable, path)
        procs.become_child_subreaper()
        self._handler = resolve_name(HANDLER)()

    async def handle(self, payload: bytes) -> bytes:
        return await self._handler.handle_frame(payload)

    async def shutdown(self) -> None:
        """End every call (closing its environment), then what this actor started."""
        try:
            async with asyncio.timeout(procs.EXIT_GRACE_S):
                await self._handler.close()
        finally:
            started = procs.descendants(os.getpid())
            await asyncio.to_thread(procs.end, started, procs.DESCENDANT_GRACE_S)

    async def ping(self) -> bool:
        return True


class RayWorker:
    """One actor; a Ray error or a missing answer marks it lost."""

    def __init__(self, actor: Any, name: str) -> None:
        self._actor = actor
        self._name = name
        self._lost: str | None = None

    @property
    def alive(self) -> bool:
        return self._lost is None

    @property
    def description(self) -> str:
        return f"episode worker actor {self._name}"

    async def request(self, request_id: int, payload: bytes, *, timeout_s: float) -> bytes:
        if self._lost is not None:
            raise WorkerLostError(f"{self.description} is gone: {self._lost}")
        import ray

        ref = self._actor.handle.remote(payload)
        try:
            async with asyncio.timeout(timeout_s):
                result: bytes = await ref
                return result
        except TimeoutError as error:
            raise WorkerLostError(
                f"{self.description} did not answer within {timeout_s:g} s"
            ) from error
        except ray.exceptions.RayActorError as error:
            self._lost = f"the actor died ({type(error).__name__})"
            raise WorkerLostError(f"{self.description} was lost: {self._lost}") from error
        except asyncio.CancelledError:
            ray.cancel(ref)
            raise

    def kill(self) -> None:
        """Ask the actor to shut down (bounded), then kill it; blocking, any thread."""
        self._lost = self._lost or "it was stopped"
        try:
            import ray

            if ray.is_initialized():
                try:
                    ray.get(self._actor.shutdown.remote(), timeout=procs.STOP_BOUND_S)
                finally:
                    ray.kill(self._actor, no_restart=True)
        except Exception as error:  # stopping must not raise at close or exit
            logger.debug("stopping %s failed: %r", self.description, error)

    async def stop(self) -> None:
        """:meth:`kill` without blocking the event loop."""
        await asyncio.to_thread(self.kill)


async def start_ray_worker(name: str, python: str | None = None) -> RayWorker:
    """Start an actor; with ``python``, in that interpreter (Ray's ``py_executable``)."""
    ray = await asyncio.to_thread(_ensure_ray)
    actor_class = ray.remote(max_restarts=0, max_concurrency=ACTOR_CONCURRENCY)(_EpisodeWorkerActor)
    if python is not None:
        actor_class = actor_class.options(runtime_env={"py_executable": python})
    # Default resources: an actor needs a CPU to be placed but holds none while it runs.
    actor = actor_class.remote(python)
    try:
        await asyncio.wait_for(actor.ping.remote(), 300.0)
    except Exception as error:
        ray.kill(actor, no_restart=True)
        raise WorkerLostError(f"episode worker actor {name} did not start: {error!r}") from error
    return RayWorker(actor, name)
