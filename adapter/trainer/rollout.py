"""The Miles rollout function: :class:`VerifiersRolloutFn` and the legacy :func:`generate_rollout`.

Construction runs every check (:mod:`~miles_verifiers.trainer.construction`) before any episode
can run; each call then runs in its own ``WorkerCallScope``, so training and evaluation calls may
overlap, while training calls are serialized along the task stream.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
import math
import os
import sys
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable, Coroutine, Mapping
from typing import Any, Literal

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from miles_verifiers.engine.client import EngineClient
from miles_verifiers.engine.proxies import ensure_loopback_bypass
from miles_verifiers.errors import SetupError
from miles_verifiers.protocol.messages import (
    CleanupSpec,
    Description,
)
from miles_verifiers.protocol.versions import process_versions, version_line
from miles_verifiers.trainer import construction
from miles_verifiers.trainer.backends.call import EpisodeBackend, WorkerCallScope
from miles_verifiers.trainer.backends.setup import EpisodeSide, choose_episode_side, worker_setup
from miles_verifiers.trainer.background_loop import BackgroundLoop
from miles_verifiers.trainer.contract.compat import Contract, contract, sample_field_names
from miles_verifiers.trainer.conversion import BranchPolicy
from miles_verifiers.trainer.engine_settings import engine_url_from_args, sampling_config_values
from miles_verifiers.trainer.evaluation import EvalSetup, evaluate
from miles_verifiers.trainer.groups import new_rid_prefix, rollout_seeds
from miles_verifiers.trainer.hooks import MilesHooks
from miles_verifiers.trainer.options import MilesOptions
from miles_verifiers.trainer.scheduling import CheckpointPlan, TaskOrder, TaskStream
from miles_verifiers.trainer.state_dir import claim as claim_state_dir
from miles_verifiers.trainer.training import TrainSetup, train_rollout

logger = logging.getLogger(__name__)

ENV_PREFIX = "MILES_VERIFIERS_"


class SettingsError(SetupError, ValueError):
    """A ``MILES_VERIFIERS_*`` environment variable has a value the adapter cannot use."""


class AdapterSettings(BaseSettings):
    """The adapter's own knobs, each settable as ``MILES_VERIFIERS_<FIELD>`` (keyword arguments
    win; an empty variable is unset). Durations must be finite: an endless wait would never end."""

    model_config = SettingsConfigDict(
        env_prefix=ENV_PREFIX, frozen=True, extra="forbid", env_ignore_empty=True
    )

    renderer_pool_size: int = Field(2, ge=1, le=64)  # tokenizer copies; past the cores, no gain
    # The deadline of one episode (a task's rollouts, scoring included).
    episode_timeout_s: float = Field(3600.0, gt=0, allow_inf_nan=False)
    # A training call dispatches at most this many times its first batch of groups.
    dispatch_budget_factor: int = Field(16, ge=1, le=10_000)
    eval_groups_in_flight: int = Field(64, ge=1)  # evaluation tasks running at once
    # In order: aborting a call's leftover requests, cancelled episodes stopping, the
    # environment's servers shutting down, interception servers awaiting leftover handlers.
    abort_timeout_s: float = Field(10.0, gt=0, allow_inf_nan=False)
    cleanup_grace_s: float = Field(10.0, gt=0, allow_inf_nan=False)
    shutdown_timeout_s: float = Field(15.0, gt=0, allow_inf_nan=False)
    handler_grace_s: float = Field(1.0, ge=0, allow_inf_nan=False)
    episode_workers: int = Field(1, ge=1, le=256)  # 1: the episodes run in this process
    episode_worker_backend: Literal["local", "ray"] = "local"  # child processes or Ray actors
    episode_worker_restarts: int = Field(8, ge=0, le=1000)  # per call; their groups are replaced
    # Another virtualenv's Python (its own Verifiers) to run the workers in, even with 1 worker.
    episode_worker_python: str | None = None
    # Unset: ``siblings`` where Miles' Sample has a ``rollout_id``, else ``reject`` (README).
    branch_policy: Literal["siblings", "reject"] | None = None

    @field_validator("episode_worker_python")
    @classmethod
    def _runnable(cls, value: str | None) -> str | None:
        if value is not None and not (os.path.isfile(value) and os.access(value, os.X_OK)):
            raise ValueError(
                f"{value!r} is not an executable file; name the python of the virtualenv the "
                "episodes run in (e.g. /opt/episodes-venv/bin/python)"
            )
        return value

    @property
    def episode_python(self) -> str | None:
        """The interpreter the workers run in, or None when the episodes run in this process."""
        if self.episode_workers == 1 and self.episode_worker_python is None:
            return None
        return self.episode_worker_python or sys.executable

    def resolved_branch_policy(self, sample_cls: type) -> BranchPolicy:
        """The branch policy in force with ``sample_cls`` (the Miles Sample in this process)."""
        can_train_siblings = "rollout_id" in sample_field_names(sample_cls)
        if self.branch_policy is None:
            return BranchPolicy.SIBLINGS if can_train_siblings else BranchPolicy.REJECT
        if self.branch_policy == "siblings" and not can_train_siblings:
            raise SettingsError(
                f"{ENV_PREFIX}BRANCH_POLICY is 'siblings', but this Miles' Sample has no "
                "rollout_id field, so it cannot train the branches of one rollout as one. "
                f"Fix: upgrade Miles, or set {ENV_PREFIX}BRANCH_POLICY=reject (or leave it unset)."
            )
        return BranchPolicy(self.branch_policy)

    @classmethod
    def from_environ(cls) -> AdapterSettings:
        """The settings from ``MILES_VERIFIERS_*``; a bad value names its variable."""
        try:
            return cls()
        except ValidationError as error:
            problems = "; ".join(
                f"{ENV_PREFIX}{str(e['loc'][0]).upper()}: {e['msg']}" for e in error.errors()
            )
            raise SettingsError(f"invalid miles-verifiers setting(s): {problems}.") from error

    @property
    def cleanup(self) -> CleanupSpec:
        return CleanupSpec(
            abort_s=self.abort_timeout_s,
            grace_s=self.cleanup_grace_s,
            shutdown_s=self.shutdown_timeout_s,
            handler_s=self.handler_grace_s,
        )


def _build_run(args: Any, settings: AdapterSettings) -> dict[str, Any]:
    """Construction's products (every check passed), with the ``contract``, the ``episodes``
    side that described the taskset, and each call's setup (``train``, ``eval``)."""
    chosen = contract()
    branch_policy = settings.resolved_branch_policy(chosen.Sample)
    logger.info(
        "multi-branch traces: %s (%s)",
        branch_policy.value,
        "every trainable branch is a sample sharing its rollout's rollout_id"
        if branch_policy is BranchPolicy.SIBLINGS
        else "a trace with several branches is an error",
    )
    episodes = choose_episode_side(settings)  # where the episodes run, chosen once
    given = construction.inputs(
        args,
        use_miles=chosen.source == "miles",
        dispatch_budget_factor=settings.dispatch_budget_factor,
        episodes=episodes,
        renderer_pool_size=settings.renderer_pool_size,
    )
    try:
        made = construction.build(given)  # every check, in order; raises at the first failure
    except BaseException:
        episodes.close()
        raise
    for warning in made["warnings"]:
        logger.warning("%s", warning)
    options: MilesOptions = made["options"]
    hooks: MilesHooks = made["hooks"]
    description: Description = made["description"]
    for note in getattr(description, "config_notes", None) or ():
        logger.warning("%s", note)  # what loading the config set aside (vf-eval run keys)
    versions = run_versions(description, settings)
    python = versions["episode_python"]
    logger.info(
        "versions: trainer %s; episodes (%s) %s",
        version_line(versions["trainer"]),
        "in this process" if python is None else f"workers of {python}",
        version_line(versions["episodes"]),
    )
    # Engine answers are checked against the vocabulary of the tokenizer that renders prompts.
    transport = {
        mode: template.model_copy(update={"vocab_size": description.vocab_size})
        for mode, template in made["transport"].items()
    }
    tasks = list(description.tasks)
    train = TrainSetup(
        order=TaskOrder(len(tasks), options.rollout_seed, options.rollout_shuffle),
        n_samples_per_prompt=options.n_samples_per_prompt,
        rollout_batch_size=options.rollout_batch_size,
        over_sampling_batch_size=options.over_sampling_batch_size,
        # A call's first batch is the over-sampling batch (never below the batch size).
        max_dispatched=settings.dispatch_budget_factor * options.over_sampling_batch_size,
        reward_key=options.train.reward_key,
        hooks=hooks,
        sample_cls=chosen.Sample,
        call_dynamic_filter=chosen.call_dynamic_filter,
        branch_policy=branch_policy,
        prefill_sampling={
            "temperature": options.train.temperature,
            "top_p": options.train.top_p,
            "top_k": options.train.top_k,
            "max_new_tokens": options.train.max_response_len,
        },
    )
    evaluation = EvalSetup(
        tasks=tasks,
        n_samples_per_eval_prompt=options.n_samples_per_eval_prompt,
        reward_key=options.eval.reward_key,
        max_groups_in_flight=settings.eval_groups_in_flight,
        env_id=description.env_id,
        hooks=hooks,
        sample_cls=chosen.Sample,
        branch_policy=branch_policy,
    )
    return {
        **made,
        "contract": chosen,
        "transport": transport,
        "episodes": episodes,
        "train": train,
        "eval": evaluation,
    }


def run_versions(description: Description, settings: AdapterSettings) -> dict[str, Any]:
    """What each side runs: ``trainer``, ``episodes`` (as the workers' interpreter reported) and
    ``episode_python`` (None: the episodes run in this process)."""
    trainer = process_versions()
    python = settings.episode_python
    episodes = trainer if python is None else dict(description.versions)
    return {"trainer": trainer, "episodes": episodes, "episode_python": python}


def _episode_backend(run: Mapping[str, Any], settings: AdapterSettings) -> EpisodeBackend:
    """The started episode backend (a worker gets the setup at a call's first group)."""
    if settings.episode_worker_backend == "ray":
        from miles_verifiers.trainer.backends.ray import require_ray

        require_ray()
    setup = worker_setup(
        str(run["config_path"]),
        run["config_path"].read_text(encoding="utf-8"),
        run["description"],
        run["renderer"],
        run["transport"],
        settings.cleanup,
    )
    episodes: EpisodeSide = run["episodes"]
    try:
        return episodes.start(setup, run["description"], settings)
    except BaseException:
        episodes.close()
        raise


class _LoopLock:
    """An ``asyncio.Lock`` per event loop (Miles keeps one loop, tests may use several)."""

    def __init__(self) -> None:
        self._guard = threading.Lock()
        self._locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock]
        self._locks = weakref.WeakKeyDictionary()

    def get(self) -> asyncio.Lock:
        with self._guard:
            return self._locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())


class VerifiersRolloutFn:
    """Miles' class-path rollout function for a Verifiers V1 taskset: a train input gives
    ``--rollout-batch-size`` groups in task order, an eval input every task's entries."""

    def __init__(self, input: Any, *, settings: AdapterSettings | None = None) -> None:
        self.args = input.args
        self.data_source = input.data_source
        self.settings = settings if settings is not None else AdapterSettings.from_environ()
        run = _build_run(self.args, self.settings)
        self._options: MilesOptions = run["options"]
        self._contract: Contract = run["contract"]
        self._hooks: MilesHooks = run["hooks"]
        self._model: str = run["model"]
        self._description: Description = run["description"]
        self._transport: Mapping[str, Any] = run["transport"]  # mode -> TransportSettings
        self._train: TrainSetup = run["train"]
        self._eval: EvalSetup = run["eval"]
        options = self._options
        # Refuse an unwritable or shared --save now, not after the first rollout's samples.
        self._release_save: Callable[[], Any] | None = None
        if options.save_dir and options.train_enabled:
            self._release_save = weakref.finalize(self, claim_state_dir(options.save_dir).release)
        self._stream = TaskStream(
            self._train.order,
            options.rollout_batch_size,
            options.save_dir,
            options.load_dir,
            n_samples_per_prompt=options.n_samples_per_prompt,
            over_sampling_batch_size=options.over_sampling_batch_size,
            plan=CheckpointPlan(options.save_interval, options.num_rollout),
        )
        self._train_lock = _LoopLock()
        self._warned_snapshot = False
        self._workers = _episode_backend(run, self.settings)
        # Workers are stopped on close(), when this instance is collected, and at exit.
        self._stop_workers = weakref.finalize(self, self._workers.close)

    def close(self) -> None:
        """Release the ``--save`` directory and stop the episode workers (also done on GC)."""
        self._stop_workers()
        if self._release_save is not None:
            self._release_save()

    @property
    def versions(self) -> dict[str, Any]:
        """What each side runs (``miles-verifiers rollout`` records it)."""
        return run_versions(self._description, self.settings)

    async def __call__(self, rollout_input: Any) -> Any:
        if getattr(rollout_input, "evaluation", False):
            return await self.evaluate(rollout_input)
        return await self.train(rollout_input)

    def _scope(self, mode: str) -> WorkerCallScope:
        # Harnesses reach Verifiers' interception server on localhost with clients that trust
        # the environment's proxy settings; loopback must never go to a proxy (it cannot reach
        # this machine, and each request carries the rollout's bearer secret and prompt).
        added = ensure_loopback_bypass(os.environ)
        if added:
            logger.info(
                "a proxy is configured but NO_PROXY lacked %s; added them so loopback traffic "
                "(the engine, the interception server) goes direct",
                ", ".join(added),
            )
        rid_prefix = new_rid_prefix(mode)
        settings = self._transport[mode].model_copy(update={"rid_prefix": rid_prefix})
        # The trainer's own transport: the served-model check and the backstop aborts.
        transport = EngineClient(settings)
        return WorkerCallScope(
            pool=self._workers,
            call_id=rid_prefix,
            mode=mode,
            transport=transport,
            sampling_for=self._sampling(mode),
            deadline_s=self.settings.episode_timeout_s,
            engine_url=engine_url_from_args(self.args),
            model=self._model,
            # The --sglang-server-concurrency bound is shared out among the workers.
            max_concurrency=math.ceil(
                self._options.max_concurrency / self.settings.episode_workers
            ),
            limits=self.settings.cleanup,
        )

    def _sampling(self, mode: str) -> Callable[[int], list[dict[str, Any]]]:
        """The sampling values of each rollout at ``slot`` (per-rollout seeds when
        --sglang-enable-deterministic-inference is on)."""
        options = self._options
        sampling = options.train if mode == "train" else options.eval
        n = options.n_samples_per_prompt if mode == "train" else options.n_samples_per_eval_prompt

        def sampling_for(slot: int) -> list[dict[str, Any]]:
            if not options.deterministic_inference:
                return [sampling_config_values(sampling)] * n
            return [
                sampling_config_values(sampling, seed)
                for seed in rollout_seeds(options.rollout_seed, slot, n)
            ]

        return sampling_for

    async def _verify_served_model(self, scope: Any) -> None:
        options = self._options
        aliases = (options.sglang_tokenizer_path,) if options.sglang_tokenizer_path else ()
        await scope.transport.verify_served_model(self._model, aliases=aliases)

    async def train(self, rollout_input: Any) -> Any:
        rollout_id = int(rollout_input.rollout_id)
        weight_version = getattr(rollout_input, "weight_version", None)
        engine_url_from_args(self.args)  # fail at once, not per request, when it is still unset
        async with self._train_lock.get():
            await self._hooks.configure_engine_dumper(self.args)
            async with self._scope("train") as scope:
                # Before the first request: samples of another model must never be trained on.
                await self._verify_served_model(scope)
                start = self._stream.start(rollout_id)
                result = await train_rollout(
                    scope,
                    self._train,
                    self.args,
                    start=start,
                    weight_version=weight_version,
                    data_source=self.data_source,
                )
            self._stream.finish(rollout_id, result.cursor_after_dispatch, result.settlement)
        return self._contract.RolloutFnTrainOutput(samples=result.groups, metrics=result.metrics)

    async def evaluate(self, rollout_input: Any) -> Any:
        if getattr(rollout_input, "generate_state", None) is not None and not self._warned_snapshot:
            self._warned_snapshot = True
            logger.warning(
                "snapshot evaluation (generate_state/hf_dir) is not supported by the Verifiers "
                "rollout function: evaluation %s runs against the live training engines.",
                rollout_input.rollout_id,
            )
        engine_url_from_args(self.args)
        await self._hooks.configure_engine_dumper(self.args)
        async with self._scope("eval") as scope:
            await self._verify_served_model(scope)
            data, metrics = await evaluate(
                scope,
                self._eval,
                self.args,
                weight_version=getattr(rollout_input, "weight_version", None),
            )
        return self._contract.RolloutFnEvalOutput(data=data, metrics=metrics)


LEGACY_CACHE_SIZE = 4

# Process-wide on purpose: the legacy path hands a plain function the same (args, data_source)
# on every call, so the instance (and its task stream) must outlive each call. Bounded.
_legacy_instances: OrderedDict[tuple[int, int], tuple[Any, Any, VerifiersRolloutFn]] = OrderedDict()
_legacy_guard = threading.Lock()
_legacy_loop: BackgroundLoop | None = None  # started on first use, kept for the process


def _run_on_legacy_loop(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Run ``coroutine`` where Miles' own runner (``miles.utils.async_utils.run``) is missing."""
    global _legacy_loop
    with _legacy_guard:
        if _legacy_loop is None:
            _legacy_loop = BackgroundLoop(name="miles-verifiers-loop").start()
        loop = _legacy_loop
    if loop.is_current():
        coroutine.close()
        raise RuntimeError("generate_rollout cannot be called from its own event loop")
    return loop.run(coroutine, None)


def _legacy_instance(args: Any, data_source: Any) -> VerifiersRolloutFn:
    key = (id(args), id(data_source))
    with _legacy_guard:
        entry = _legacy_instances.get(key)
        # Compare identities too: an id can be reused once the original object is gone.
        if entry is not None and entry[0] is args and entry[1] is data_source:
            _legacy_instances.move_to_end(key)
            return entry[2]
    fn = VerifiersRolloutFn(
        contract().RolloutFnConstructorInput(args=args, data_source=data_source)
    )
    with _legacy_guard:
        _legacy_instances[key] = (args, data_source, fn)
        _legacy_instances.move_to_end(key)
        while len(_legacy_instances) > LEGACY_CACHE_SIZE:
            _legacy_instances.popitem(last=False)
    return fn


def generate_rollout(args: Any, rollout_id: int, data_source: Any, evaluation: bool = False) -> Any:
    """Miles' legacy rollout entry point (``MILES_USE_LEGACY_ROLLOUT_V1=1``): one cached
    :class:`VerifiersRolloutFn` per ``args``/``data_source``, run on a persistent loop."""
    fn = _legacy_instance(args, data_source)
    types = contract()
    rollout_input = (
        types.RolloutFnEvalInput(rollout_id=rollout_id)
        if evaluation
        else types.RolloutFnTrainInput(rollout_id=rollout_id)
    )
    try:
        runner = importlib.import_module("miles.utils.async_utils").run
    except (ImportError, AttributeError):
        runner = _run_on_legacy_loop
    return runner(fn(rollout_input))
