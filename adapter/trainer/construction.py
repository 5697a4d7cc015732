"""Every check the rollout function's construction makes, as one ordered table of stages.

Each :class:`Stage` reads named inputs and earlier stages' products. :func:`build` (the
constructor) raises the first failing stage's error; :func:`survey` (``miles-verifiers check``)
runs every stage whose inputs exist, so independent problems are reported at once. What needs
the taskset loaded is asked of the episode side with one describe request.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from miles_verifiers.engine.routers import RouterKind
from miles_verifiers.errors import SetupError
from miles_verifiers.protocol.config_file import ConfigError, config_path_from_env, read_config_file
from miles_verifiers.protocol.messages import DescribeRequest, RendererSpecModel
from miles_verifiers.trainer.engine_settings import (
    build_transport_settings,
    router_drop_warning,
    sampling_config_values,
)
from miles_verifiers.trainer.hooks import load_hooks
from miles_verifiers.trainer.options import (
    FLAGS,
    MAX_SAMPLING_SEED,
    InvalidOptionsError,
    MilesOptions,
    OptionProblem,
    options_error,
    read_options,
)
from miles_verifiers.trainer.seats import SeatSetupError, seat_problems

Products = Mapping[str, Any]


@dataclass(frozen=True)
class StageResult:
    """A stage's products, or its problems (one line each) and the error the constructor raises."""

    products: Mapping[str, Any] = field(default_factory=dict)
    problems: tuple[str, ...] = ()
    error: BaseException | None = None
    # The stage the problems are reported under, where not the one that found them.
    reported_as: str | None = None


def _failed(error: BaseException, lines: Sequence[str] | None = None) -> StageResult:
    return StageResult(problems=tuple(lines) if lines is not None else (str(error),), error=error)


@dataclass(frozen=True)
class Stage:
    name: str
    needs: tuple[str, ...]
    run: Callable[[Products], StageResult]


def _options(given: Products) -> StageResult:
    # Even invalid options leave a view (offending options at Miles' defaults): later stages
    # that read only well-formed parts of it (the hook paths) still report their own problems.
    view, problems = read_options(given["args"])
    products = {} if view is None else {"options_view": view}
    if problems or view is None:
        return StageResult(products, tuple(p.describe() for p in problems), options_error(problems))
    return StageResult(
        {**products, "options": view, "model": view.hf_checkpoint or view.tokenizer_source}
    )


def _hooks(given: Products) -> StageResult:
    return StageResult({"hooks": load_hooks(given["options_view"], use_miles=given["use_miles"])})


def _transport(given: Products) -> StageResult:
    options: MilesOptions = given["options"]
    templates = {
        mode: build_transport_settings(options, mode, given["args"], given["model"])
        for mode in ("train", "eval")
    }
    # Sampling keys the router drops: the run goes on, with a warning.
    router = RouterKind.for_miles(options.use_miles_router)
    modes = [("train", options.train)] + ([("eval", options.eval)] if options.eval_enabled else [])
    found = (
        router_drop_warning(sampling_config_values(sampling), router, mode)
        for mode, sampling in modes
    )
    warnings = tuple(warning for warning in found if warning is not None)
    return StageResult({"transport": templates, "warnings": warnings})


def _config(given: Products) -> StageResult:
    path = config_path_from_env(given["environ"])
    read_config_file(path)  # readable TOML; the episode side validates the rest
    return StageResult({"config_path": path})


def _taskset(given: Products) -> StageResult:
    """Describe the taskset on the episode side; also the renderer spec, with its identity."""
    options: MilesOptions | None = given.get("options_view")
    renderer = None  # without a tokenizer (the options stage reports it), none is described
    if options is not None and options.tokenizer_source:
        renderer = RendererSpecModel(
            tokenizer_source=options.tokenizer_source,
            identity=None,  # found where Renderers is installed
            chat_template_kwargs_json=json.dumps(
                dict(options.train.chat_template_kwargs or {}), sort_keys=True
            ),
            pool_size=given["renderer_pool_size"],
        )
    path = given["config_path"]
    request = DescribeRequest(
        config_path=str(path),
        config_text=path.read_text(encoding="utf-8"),
        renderer=renderer,
        hf_checkpoint=getattr(options, "hf_checkpoint", None),
        tokenizer_path=getattr(options, "sglang_tokenizer_path", None),
    )
    try:
        described = given["episodes"].describe(request)
    except ConfigError as error:
        # The episode side validates the config as it loads it: the user's fix is in the file.
        return replace(_failed(error), reported_as="config")
    products: dict[str, Any] = {"description": described}
    if renderer is not None:
        products["renderer"] = renderer.model_copy(update={"identity": described.renderer_identity})
    return StageResult(products)


class GroupRewardSampleCountError(ConfigError):
    """``@group_reward`` tasks need at least two rollouts per task; ``flags`` names the counts."""

    def __init__(self, message: str, *, flags: Sequence[str], fix: str) -> None:
        self.flags = list(flags)
        super().__init__(message, field=", ".join(self.flags), fix=fix)


def check_group_reward_sample_counts(group_reward: bool, options: MilesOptions) -> None:
    """``@group_reward`` compares a task's rollouts, so each mode in use needs >= 2 of them."""
    if not group_reward:
        return
    short: list[str] = []
    if options.train_enabled and options.n_samples_per_prompt < 2:
        short.append(f"--n-samples-per-prompt (is {options.n_samples_per_prompt})")
    if options.eval_enabled and options.n_samples_per_eval_prompt < 2:
        short.append(f"--n-samples-per-eval-prompt (is {options.n_samples_per_eval_prompt})")
    if short:
        flags = [entry.split(" ", 1)[0] for entry in short]
        raise GroupRewardSampleCountError(
            "the taskset's tasks define @group_reward scorers, which rank the rollouts of one "
            f"task against each other and need at least 2 of them: {', '.join(short)}.",
            flags=flags,
            fix=f"pass {' and '.join(f'{flag} 2' for flag in flags)} or more.",
        )


def _group_reward(given: Products) -> StageResult:
    check_group_reward_sample_counts(given["description"].has_group_reward, given["options"])
    return StageResult()


def _seats(given: Products) -> StageResult:
    problems = seat_problems(given["description"], given["options"])
    if not problems:
        return StageResult()
    return _failed(SeatSetupError(problems), [p.describe() for p in problems])


def _seeds(given: Products) -> StageResult:
    options: MilesOptions = given["options"]
    if not options.deterministic_inference:
        return StageResult()  # seeds are sent only under deterministic inference
    # The largest seed each mode can send. A rollout's seed is --rollout-seed + slot * samples
    # + k: for evaluation the slot is a task's position, for training its offset in the task
    # stream, which grows by at most the dispatch budget per training call.
    seed, tasks = options.rollout_seed, len(given["description"].tasks)
    highest: dict[str, int] = {}
    if options.eval_enabled:
        highest["eval"] = seed + tasks * options.n_samples_per_eval_prompt - 1
    if options.train_enabled and options.num_rollout is not None:
        budget = given["dispatch_budget_factor"] * options.over_sampling_batch_size
        highest["train"] = seed + options.num_rollout * budget * options.n_samples_per_prompt - 1
    over = {mode: value for mode, value in highest.items() if value > MAX_SAMPLING_SEED}
    if not over:
        return StageResult()
    headroom = max(value - seed for value in over.values())
    problem = OptionProblem(
        FLAGS["rollout_seed"],
        "invalid",
        f"is {options.rollout_seed}; the per-rollout sampling seeds derived from it reach "
        + ", ".join(f"{value} in {mode}" for mode, value in over.items())
        + f", beyond {MAX_SAMPLING_SEED}, the largest seed the SGLang router accepts.",
        f"pass {FLAGS['rollout_seed']} at most {MAX_SAMPLING_SEED - headroom}.",
    )
    return _failed(InvalidOptionsError([problem]), [problem.describe()])


STAGES: tuple[Stage, ...] = (
    Stage("options", ("args",), _options),
    Stage("hooks", ("options_view", "use_miles"), _hooks),
    Stage("transport", ("options", "args"), _transport),
    Stage("config", ("environ",), _config),
    Stage("taskset", ("config_path", "episodes", "renderer_pool_size"), _taskset),
    Stage("group reward", ("description", "options"), _group_reward),
    Stage("seats", ("description", "options"), _seats),
    Stage("seeds", ("description", "options", "dispatch_budget_factor"), _seeds),
)


def inputs(
    args: Any,
    *,
    environ: Mapping[str, str] | None = None,
    use_miles: bool,
    dispatch_budget_factor: int,
    episodes: Any,
    renderer_pool_size: int = 2,
) -> dict[str, Any]:
    """The named inputs the table reads (``environ`` None means ``os.environ``; ``episodes``
    is the :class:`~miles_verifiers.trainer.backends.setup.EpisodeSide` that describes tasks)."""
    return {
        "args": args,
        "environ": environ,
        "use_miles": use_miles,
        "dispatch_budget_factor": dispatch_budget_factor,
        "episodes": episodes,
        "renderer_pool_size": renderer_pool_size,
    }


def build(given: Mapping[str, Any], stages: Sequence[Stage] = STAGES) -> dict[str, Any]:
    """Run ``stages`` in order and return every product; raise the first failing stage's error."""
    products = dict(given)
    for stage in stages:
        missing = [name for name in stage.needs if name not in products]
        if missing:  # a table bug, not a user error: every stage before it passed
            raise RuntimeError(f"construction stage {stage.name!r} lacks {missing}")
        result = stage.run(products)
        if result.error is not None:
            raise result.error
        products.update(result.products)
    return products


@dataclass(frozen=True)
class StageReport:
    stage: str
    problem: str
    error: BaseException | None


@dataclass(frozen=True)
class Survey:
    problems: tuple[StageReport, ...]
    products: Mapping[str, Any]


def survey(given: Mapping[str, Any], stages: Sequence[Stage] = STAGES) -> Survey:
    """Run every stage whose inputs exist and collect all their problems, in table order."""
    products = dict(given)
    found: list[StageReport] = []
    for stage in stages:
        if any(name not in products for name in stage.needs):
            continue  # an earlier stage failed to produce what this one reads
        try:
            result = stage.run(products)
        except SetupError as error:  # a stage's refusal: its message names the fix
            result = _failed(error)
        except Exception as error:
            result = _failed(error, [f"{type(error).__name__}: {error}"])
        name = result.reported_as or stage.name
        found += [StageReport(name, line, result.error) for line in result.problems]
        products.update(result.products)
    return Survey(tuple(found), products)
