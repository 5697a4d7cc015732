"""``check``: everything the rollout function's construction would refuse, without running it.

It surveys the stages of :mod:`miles_verifiers.trainer.construction`, the table the constructor runs,
but does not stop at the first failing stage: every stage whose inputs exist runs, so
independent problems (options, hook paths, the config file) are reported together. Only when
every stage passes is the rollout function itself constructed, which is what Miles does before
any engine exists, so no engine is contacted at any point.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from miles_verifiers.engine.routers import RouterKind
from miles_verifiers.protocol.versions import process_versions
from miles_verifiers.trainer import construction
from miles_verifiers.trainer.backends.setup import choose_episode_side
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers.trainer.options import SamplingOptions


@dataclass(frozen=True)
class CheckProblem:
    stage: str
    message: str
    error: BaseException | None = None


@dataclass(frozen=True)
class CheckSummary:
    env_id: str
    config_path: Path
    tasks: int
    group_reward: bool
    rollout_batch_size: int
    n_samples_per_prompt: int
    n_samples_per_eval_prompt: int
    over_sampling_batch_size: int
    max_concurrency: int
    tokenizer: str | None
    train: SamplingOptions
    eval: SamplingOptions | None
    router: RouterKind = RouterKind.SGLANG_ROUTER
    # What Miles' process runs, and what the episode workers run (their interpreter and the
    # versions its describe step reported; None: the episodes run in Miles' process).
    trainer_versions: Mapping[str, str] = field(default_factory=dict)
    worker_python: str | None = None
    worker_versions: Mapping[str, str] | None = None


@dataclass(frozen=True)
class CheckReport:
    problems: tuple[CheckProblem, ...]
    summary: CheckSummary | None
    # What the run would warn about without stopping (construction logs the same lines).
    warnings: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        return not self.problems


def _environment_settings() -> tuple[Any, list[CheckProblem]]:
    """The settings the constructor will use, or the defaults and the problem."""
    from miles_verifiers.trainer.rollout import AdapterSettings

    try:
        return AdapterSettings.from_environ(), []
    except ValueError as error:
        return AdapterSettings.model_construct(), [CheckProblem("settings", str(error), error)]


def _config_notes(products: Mapping[str, Any]) -> tuple[str, ...]:
    """What loading the config set aside (a vf-eval file's run settings), as the describe
    step reported it; construction warns with the same lines."""
    described = products.get("description")
    return tuple(getattr(described, "config_notes", None) or ())


def check_construction(
    args: argparse.Namespace,
    construct: Callable[[argparse.Namespace], Any],
    environ: Mapping[str, str] | None = None,
    known_problems: Sequence[CheckProblem] = (),
) -> CheckReport:
    """Every construction problem of ``args`` plus the config in ``environ`` (``os.environ``
    by default); ``construct`` builds the rollout function once the rest passes.

    ``known_problems`` (found by the caller while reading the command line) come first; one
    in the ``config`` stage means there is no config to load, so that stage is skipped.
    """
    settings, problems = _environment_settings()
    problems = list(known_problems) + problems
    given = construction.inputs(
        args,
        environ=environ,
        use_miles=contract().source == "miles",
        dispatch_budget_factor=settings.dispatch_budget_factor,
        episodes=choose_episode_side(settings, describe_only=True),
        renderer_pool_size=settings.renderer_pool_size,
    )
    if any(p.stage == "config" for p in known_problems):
        del given["environ"]  # no config to load: the stages reading it are skipped
    found = construction.survey(given)
    problems += [CheckProblem(p.stage, p.problem, p.error) for p in found.problems]
    warnings = tuple(found.products.get("warnings", ())) + _config_notes(found.products)
    if problems:
        return CheckReport(tuple(problems), None, warnings)

    try:
        construct(args)
    except Exception as error:
        text = f"{type(error).__name__}: {str(error).strip() or type(error).__name__}"
        return CheckReport((CheckProblem("constructor", text, error),), None, warnings)

    made = found.products
    options = made["options"]
    described = made["description"]
    summary = CheckSummary(
        env_id=described.env_id,
        config_path=made["config_path"],
        tasks=len(described.tasks),
        group_reward=described.has_group_reward,
        rollout_batch_size=options.rollout_batch_size,
        n_samples_per_prompt=options.n_samples_per_prompt,
        n_samples_per_eval_prompt=options.n_samples_per_eval_prompt,
        over_sampling_batch_size=options.over_sampling_batch_size,
        max_concurrency=options.max_concurrency,
        tokenizer=options.tokenizer_source,
        train=options.train,
        eval=options.eval if options.eval_enabled else None,
        router=RouterKind.for_miles(options.use_miles_router),
        trainer_versions=process_versions(),
        worker_python=settings.episode_python,
        worker_versions=described.versions if settings.episode_python is not None else None,
    )
    return CheckReport((), summary, warnings)


def describe_sampling(sampling: SamplingOptions) -> str:
    """One line of the sampling a mode will use."""
    parts = [
        f"temperature {sampling.temperature:g}",
        f"top_p {sampling.top_p:g}",
        f"top_k {sampling.top_k}",
        f"max_tokens {sampling.max_response_len}",
    ]
    if sampling.max_context_len is not None:
        parts.append(f"context cap {sampling.max_context_len}")
    if sampling.max_prompt_len is not None:
        parts.append(f"first-prompt cap {sampling.max_prompt_len}")
    if sampling.min_new_tokens is not None:
        parts.append(f"min_tokens {sampling.min_new_tokens}")
    if sampling.stop:
        parts.append(f"stop {list(sampling.stop)}")
    if sampling.stop_token_ids:
        parts.append(f"stop ids {list(sampling.stop_token_ids)}")
    if sampling.chat_template_kwargs:
        parts.append(f"chat template {dict(sampling.chat_template_kwargs)}")
    if sampling.reward_key:
        parts.append(f"reward key {sampling.reward_key!r}")
    return ", ".join(parts)
