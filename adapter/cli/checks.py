"""``check``: everything the rollout function's construction would refuse, without running it.

Every stage of :mod:`miles_verifiers.trainer.construction` whose inputs exist runs, so
independent problems are reported together; only when all pass is the rollout function
constructed, as Miles does before any engine exists, so no engine is ever contacted.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_verifiers.protocol.versions import process_versions
from miles_verifiers.trainer import construction
from miles_verifiers.trainer.backends.setup import choose_episode_side
from miles_verifiers.trainer.contract.compat import contract
from miles_verifiers.trainer.options import MilesOptions, SamplingOptions


@dataclass(frozen=True)
class CheckProblem:
    stage: str
    message: str
    error: BaseException | None = None


@dataclass(frozen=True)
class CheckSummary:
    options: MilesOptions
    described: Any  # the episode side's description: env id, tasks, group reward, versions
    config_path: Path
    trainer_versions: Mapping[str, str]
    # The episode workers' interpreter; None when the episodes run in Miles' process.
    worker_python: str | None


@dataclass(frozen=True)
class CheckReport:
    problems: tuple[CheckProblem, ...]
    summary: CheckSummary | None
    # What construction would log as warnings without stopping.
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
    """What loading the config set aside (a vf-eval file's run settings)."""
    described = products.get("description")
    return tuple(getattr(described, "config_notes", None) or ())


def check_construction(
    args: argparse.Namespace,
    construct: Callable[[argparse.Namespace], Any],
    environ: Mapping[str, str] | None = None,
    known_problems: Sequence[CheckProblem] = (),
) -> CheckReport:
    """Every construction problem of ``args`` and the config in ``environ`` (``os.environ``
    by default); ``construct`` builds the rollout function once the rest passes.
    ``known_problems`` come first; one in the ``config`` stage skips loading the config."""
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
    summary = CheckSummary(
        options=made["options"],
        described=made["description"],
        config_path=made["config_path"],
        trainer_versions=process_versions(),
        worker_python=settings.episode_python,
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
