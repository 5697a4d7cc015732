"""``check``: everything the rollout function's construction would refuse, without running it.

The stages follow the adapter's construction order (:func:`miles_verifiers.config.prepare_run`)
but do not stop at the first problem where later stages do not depend on it: option problems
and config problems are independent and are reported together. Only when every stage passes
is the rollout function itself constructed, which is what Miles does before any engine
exists, so no engine is contacted at any point.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_verifiers.config import (
    ConfigError,
    LoadedTaskset,
    check_group_reward_sample_counts,
    config_path_from_env,
    load_env_config,
    load_taskset,
)
from miles_verifiers.clients import sampling_config_values
from miles_verifiers.options import SamplingOptions, build_options, find_option_problems
from miles_verifiers.transport.routers import RouterKind, keys_dropped_by_router
from miles_verifiers.transport.sampling import RENAMED_KEYS
from miles_verifiers.versions import UnsupportedVersionError, require_supported_versions


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


@dataclass(frozen=True)
class CheckReport:
    problems: tuple[CheckProblem, ...]
    summary: CheckSummary | None

    @property
    def ok(self) -> bool:
        return not self.problems


def router_sampling_problem(
    sampling_keys: Sequence[str], router: RouterKind, mode: str
) -> CheckProblem | None:
    """A problem when ``router`` would silently drop one of the sampling keys a mode sends."""
    lost = keys_dropped_by_router((RENAMED_KEYS.get(k, k) for k in sampling_keys), router)
    if not lost:
        return None
    return CheckProblem(
        "router",
        f"{mode} sampling sets {', '.join(lost)}, which the {router.value} in front of the "
        "engines drops without an error (it would have no effect). Run Miles with "
        "--use-miles-router, whose router forwards every key, or remove it.",
    )


def _describe(error: BaseException) -> str:
    text = str(error).strip()
    return text if text else type(error).__name__


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
    try:
        require_supported_versions()
    except UnsupportedVersionError as error:
        # Nothing below can be trusted with an unsupported verifiers or renderers.
        return CheckReport((CheckProblem("versions", _describe(error), error),), None)

    problems = list(known_problems)
    problems += [
        CheckProblem("options", problem.describe()) for problem in find_option_problems(args)
    ]
    taskset: LoadedTaskset | None = None
    config_path: Path | None = None
    env_id = ""
    if not any(p.stage == "config" for p in known_problems):
        try:
            config_path = config_path_from_env(environ)
            config = load_env_config(config_path)
            env_id = str(getattr(config, "env_id", None) or config.taskset.id)
            taskset = load_taskset(config)
        except ConfigError as error:
            problems.append(CheckProblem("config", _describe(error), error))
        except Exception as error:  # noqa: BLE001 - unanticipated by the config checks; report
            message = f"{type(error).__name__}: {_describe(error)}"
            problems.append(CheckProblem("config", message, error))

    if problems or taskset is None or config_path is None:
        return CheckReport(tuple(problems), None)
    options = build_options(args)
    try:
        check_group_reward_sample_counts(taskset.has_group_reward, options)
    except ConfigError as error:
        return CheckReport((CheckProblem("group reward", _describe(error), error),), None)

    router = RouterKind.for_miles(options.use_miles_router)
    modes = [("train", options.train)] + ([("eval", options.eval)] if options.eval_enabled else [])
    router_problems = [
        router_sampling_problem(list(sampling_config_values(sampling)), router, mode)
        for mode, sampling in modes
    ]
    if any(router_problems):
        return CheckReport(tuple(p for p in router_problems if p is not None), None)

    try:
        construct(args)
    except Exception as error:  # noqa: BLE001 - a constructor may raise anything; report it
        message = f"{type(error).__name__}: {_describe(error)}"
        return CheckReport((CheckProblem("constructor", message, error),), None)

    summary = CheckSummary(
        env_id=env_id,
        config_path=config_path,
        tasks=len(taskset.tasks),
        group_reward=taskset.has_group_reward,
        rollout_batch_size=options.rollout_batch_size,
        n_samples_per_prompt=options.n_samples_per_prompt,
        n_samples_per_eval_prompt=options.n_samples_per_eval_prompt,
        over_sampling_batch_size=options.over_sampling_batch_size,
        max_concurrency=options.max_concurrency,
        tokenizer=options.tokenizer_source,
        train=options.train,
        eval=options.eval if options.eval_enabled else None,
        router=router,
    )
    return CheckReport((), summary)


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
