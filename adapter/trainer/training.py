"""One training rollout: dispatch task groups, judge each on its own traces, return the first
``--rollout-batch-size`` kept groups in task order (:mod:`~miles_verifiers.trainer.scheduling`),
carrying later ones over. Sample ``index`` is ``offset * n_samples_per_prompt + k``, so the
output never depends on timing.
"""

from __future__ import annotations

import asyncio
import logging
import re
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from miles_verifiers.errors import (
    RolloutCallError,
    SetupError,
    describe_error,
    is_unsupported_request,
)
from miles_verifiers.trainer.conversion import (
    BranchPolicy,
    ConversionError,
    ConvertedGroup,
    MultipleBranchesError,
    convert_group,
    looks_like_contract_breach,
    looks_like_engine_abort,
    training_output,
)
from miles_verifiers.trainer.engine_settings import engine_url_from_args
from miles_verifiers.trainer.groups import CallScope, GroupRun
from miles_verifiers.trainer.hooks import MilesHooks
from miles_verifiers.trainer.metrics import (
    DROP_ABORTED,
    DROP_EMPTY_TRACE,
    DROP_ENGINE_CONTRACT,
    DROP_EPISODE_ERROR,
    DROP_TRACE_ERROR,
    DROP_WORKER_LOST,
    drop_metrics,
    merge,
    sample_metrics,
    scheduling_metrics,
    trace_metrics,
)
from miles_verifiers.trainer.scheduling import (
    Cursor,
    DispatchBudgetError,
    Outcome,
    SchedulingError,
    Settlement,
    TaskOrder,
    settle,
    tasks_to_dispatch,
)

logger = logging.getLogger(__name__)

DROP_EPISODE_TIMEOUT = "episode_timeout"


class RolloutSetupError(SetupError, RuntimeError):
    """The run cannot produce training data as configured (not a one-off episode failure)."""


class UnsupportedRequestRunError(RolloutSetupError):
    """An episode made a model request the Miles token path cannot serve; every episode would."""


class SiblingRewardError(RolloutCallError, ValueError):
    """A Miles reward model gave the branches of one rollout different rewards."""


class ReplacementBudgetError(DispatchBudgetError):
    """A training call ran out of replacements; ``drop_reasons`` counts the drops by reason."""

    def __init__(self, message: str, drop_reasons: Counter[str]) -> None:
        super().__init__(message)
        self.drop_reasons = drop_reasons


class UniformFailureError(ReplacementBudgetError):
    """Every episode of a training call's first groups failed the same way: stop, not replace."""


_REASON_HINTS: dict[str, str] = {
    DROP_EPISODE_ERROR: "episodes failed as a whole (Verifiers 0.2: a failing @group_reward or "
    "task code escaped episode.run; 0.4: Verifiers judged the episode not ok, because a seat "
    "such as a user simulator or judge failed (the example names it), Env.setup, Env.run or "
    "Env.finalize raised, or a reward was left unscored; an episode that recovered under "
    "[retries] is not dropped)",
    DROP_EPISODE_TIMEOUT: "episodes ran past a deadline (the adapter's episode deadline, or "
    "Verifiers 0.4's own [timeout] for the episode or Env.finalize; an agent's stage timeout "
    "is not a drop: its sample is TRUNCATED)",
    DROP_TRACE_ERROR: "rollouts whose trace Verifiers judged failed (harness, tools, user "
    "simulator, rewards or model calls, after any retries; a trace that recovered trains)",
    DROP_ABORTED: "the engine aborted model requests",
    DROP_ENGINE_CONTRACT: "the engine answered with tokens that break the /generate contract "
    "(positive or non-finite logprobs, more tokens than max_new_tokens, ids outside the "
    "tokenizer's vocabulary); check that the engine serves --hf-checkpoint with its tokenizer",
    DROP_EMPTY_TRACE: "rollouts ended before any model turn (e.g. a first prompt over "
    "--rollout-max-prompt-len or the context window)",
    DROP_WORKER_LOST: "episode workers died or stopped answering while running the groups "
    "(their stderr says why)",
}


def _budget_error(
    error: DispatchBudgetError, drops: Counter[str], examples: dict[str, str]
) -> ReplacementBudgetError:
    commonest, count = drops.most_common(1)[0] if drops else ("unknown", 0)
    hint = _REASON_HINTS.get(commonest, "the dynamic filter rejected the groups")
    counts = ", ".join(f"{reason} x{n}" for reason, n in drops.most_common())
    example = examples.get(commonest)
    lines = [
        f"the training call ran out of replacement groups: {error}",
        f"Drops by reason: {counts or 'none'}. The commonest, {commonest!r} ({count}), means {hint}.",
    ]
    if example:
        lines.append(f"Example: {example}")
    return ReplacementBudgetError(" ".join(lines), drops)


# The fewest groups whose episodes must all fail alike before a call stops early: enough that
# a few tasks failing the same way (one broken tool, say) still get replaced by later tasks.
MIN_UNIFORM_FAILURES = 8
# Drops that say the episodes themselves failed. A filter, a lost worker, a deadline or the
# engine's answers say nothing of the episodes' own code, so they never stop a call early.
_EPISODE_FAILURES = frozenset({DROP_EPISODE_ERROR, DROP_TRACE_ERROR})


def failure_signature(judged: Judged) -> tuple[str, str] | None:
    """The drop reason and error (less its numbers) every episode of a dropped group failed
    with, or None when some episode did not fail."""
    if judged.reason not in _EPISODE_FAILURES or judged.example_error is None:
        return None
    if not all(trace.rollout_failed for trace in judged.traces):
        return None
    return judged.reason, re.sub(r"\d+", "#", judged.example_error)


@dataclass(frozen=True)
class Judged:
    """The verdict on one finished group (deterministic given its traces)."""

    offset: int
    outcome: Outcome
    reason: str | None
    group: ConvertedGroup | None
    traces: tuple[Any, ...]
    example_error: str | None = None

    @property
    def samples(self) -> list[Any]:
        """Every sample of the group, siblings included."""
        return self.group.samples if self.group is not None else []


@dataclass(frozen=True)
class TrainSetup:
    """What every training call of one rollout function needs (built at construction)."""

    order: TaskOrder
    n_samples_per_prompt: int
    rollout_batch_size: int
    over_sampling_batch_size: int
    max_dispatched: int
    reward_key: str | None
    hooks: MilesHooks
    sample_cls: type
    call_dynamic_filter: Callable[..., Any]
    branch_policy: BranchPolicy = BranchPolicy.REJECT
    # The sampling Miles' prefill recompute (a hook) asks the engines for.
    prefill_sampling: Mapping[str, Any] = field(default_factory=dict)


def _drop(offset: int, reason: str, run: GroupRun, example: str | None = None) -> Judged:
    return Judged(offset, Outcome.DROPPED, reason, None, run.traces, example)


def raise_if_unsupported(error: Any) -> None:
    """Stop the call on a request the Miles token path cannot serve: every episode would make it."""
    if error is not None and is_unsupported_request(error):
        raise UnsupportedRequestRunError(
            str(error) if isinstance(error, BaseException) else error.message
        )


def check_sibling_rewards(group: ConvertedGroup, flag: str) -> None:
    """Miles gives a rollout one reward; siblings scored apart cannot be trained."""
    for rollout in group.per_trace:
        rewards = [s.reward for s in rollout]
        if any(r != rewards[0] for r in rewards[1:]):
            raise SiblingRewardError(
                f"the Miles reward model ({flag}) scored the {len(rollout)} branches of rollout "
                f"index {rollout[0].index} differently ({rewards!r}), but Miles trains a rollout's "
                "branches with one shared reward. Fix: make the reward model score by the "
                "rollout (e.g. the sample's metadata['verifiers']['trace_id']) rather than the "
                "branch, or set MILES_VERIFIERS_BRANCH_POLICY=reject to train single-branch "
                "traces only."
            )


async def judge_group(
    run: GroupRun,
    offset: int,
    setup: TrainSetup,
    args: Any,
    weight_version: Any,
) -> Judged:
    """Keep or drop one group; raises for problems every group would have (setup errors,
    :class:`MultipleBranchesError`). The dynamic filter sees one sample per rollout."""
    if not run.ok:
        raise_if_unsupported(run.error)
        reason = run.failure or DROP_EPISODE_ERROR  # a run's failure is named as its drop reason
        return _drop(offset, reason, run, describe_error(run.error) if run.error else None)
    # Verifiers' episode verdict first: a failed seat (a user simulator, a judge), an env hook
    # or a deadline fails the episode even where the trainable trace itself is ok.
    judged = [t.episode_error for t in run.traces if t.episode_failed and t.episode_error]
    if judged:
        reason = DROP_EPISODE_TIMEOUT if judged[0].timeout else DROP_EPISODE_ERROR
        return _drop(offset, reason, run, describe_error(judged[0]))
    errored = [t for t in run.traces if t.failed]
    for trace in errored:
        raise_if_unsupported(trace.error)
    breached = [t for t in errored if looks_like_contract_breach(t.error)]
    if breached:
        # Never trained on, and named apart: a faulty engine, not a failing task.
        return _drop(offset, DROP_ENGINE_CONTRACT, run, describe_error(breached[0].error))
    if errored:
        aborted = all(looks_like_engine_abort(t.error) for t in errored)
        reason = DROP_ABORTED if aborted else DROP_TRACE_ERROR
        return _drop(offset, reason, run, describe_error(errored[0].error))
    # A Miles reward model replaces the reward, and --reward-key then names a key of ITS result
    # (Miles reads reward[key]), not a Verifiers reward: convert to the plain total meanwhile.
    conversion_key = None if setup.hooks.reward_model is not None else setup.reward_key
    try:
        converted = convert_group(
            run.traces,
            group_index=offset,
            first_index=offset * setup.n_samples_per_prompt,
            policy=setup.branch_policy,
            reward_key=conversion_key,
            weight_version=weight_version,
            sample_cls=setup.sample_cls,
        )
    except MultipleBranchesError:
        raise
    except ConversionError as error:
        raise RolloutSetupError(
            f"a finished group cannot become training samples: {error}"
        ) from error
    if not converted.complete:
        empty = [t for t, s in zip(run.traces, converted.per_trace, strict=True) if not s]
        example = (
            f"{len(empty)} of {len(run.traces)} rollouts committed no model turn "
            f"(stop condition: {empty[0].stop_condition})"
        )
        return _drop(offset, DROP_EMPTY_TRACE, run, example)
    if setup.hooks.reward_model is not None:
        await setup.hooks.reward_model.apply(args, converted.samples, evaluation=False)
        check_sibling_rewards(converted, setup.hooks.reward_model.flag)
    verdict = setup.call_dynamic_filter(setup.hooks.dynamic_filter, args, converted.representatives)
    if not verdict.keep:
        return Judged(
            offset, Outcome.DROPPED, verdict.reason or "dynamic_filter", converted, run.traces
        )
    return Judged(offset, Outcome.KEPT, None, converted, run.traces)


@dataclass
class TrainResult:
    groups: list[list[Any]]
    metrics: dict[str, float]
    settlement: Settlement
    cursor_after_dispatch: Cursor


@dataclass
class _Dispatcher:
    scope: CallScope
    setup: TrainSetup
    args: Any
    weight_version: Any
    cursor: Cursor
    dispatched: list[int] = field(default_factory=list)
    judged: dict[int, Judged] = field(default_factory=dict)
    running: dict[asyncio.Task[Judged], int] = field(default_factory=dict)
    drops: Counter[str] = field(default_factory=Counter)
    examples: dict[str, str] = field(default_factory=dict)
    # How many of the first groups dispatched decide whether every episode fails alike (the
    # first dispatch, and at least MIN_UNIFORM_FAILURES); 0 once they have been judged.
    first_wave: int | None = None

    async def _group(self, offset: int) -> Judged:
        run = await self.scope.run(offset, self.setup.order.task_index(offset))
        return await judge_group(run, offset, self.setup, self.args, self.weight_version)

    def dispatch(self, count: int) -> None:
        offsets, self.cursor = self.cursor.take(count)
        if self.first_wave is None:
            self.first_wave = max(len(offsets), MIN_UNIFORM_FAILURES)
        for offset in offsets:
            self.dispatched.append(offset)
            task = self.scope.spawn(self._group(offset), name=f"verifiers-group-{offset}")
            self.running[task] = offset

    async def run(self) -> Settlement:
        setup = self.setup
        while True:
            outcomes = {offset: verdict.outcome for offset, verdict in self.judged.items()}
            if self.dispatched and (
                settlement := settle(self.dispatched, outcomes, setup.rollout_batch_size)
            ):
                return settlement
            try:
                count = tasks_to_dispatch(
                    self.dispatched,
                    outcomes,
                    setup.rollout_batch_size,
                    setup.over_sampling_batch_size,
                    setup.max_dispatched,
                )
            except DispatchBudgetError as error:
                raise _budget_error(error, self.drops, self.examples) from error
            if count:
                self.dispatch(count)
            if not self.running:  # cannot happen: unsettled means something is pending
                raise SchedulingError("the rollout is unsettled but no group is running")
            done, _ = await asyncio.wait(self.running, return_when=asyncio.FIRST_COMPLETED)
            for task in done:  # read every error now: one raises below, none goes unretrieved
                if not task.cancelled():
                    task.exception()
            for task in sorted(done, key=self.running.__getitem__):
                offset = self.running.pop(task)
                verdict = task.result()  # raises the setup errors
                self.judged[offset] = verdict
                if verdict.outcome is Outcome.DROPPED and verdict.reason:
                    self.drops[verdict.reason] += 1
                    if verdict.example_error and verdict.reason not in self.examples:
                        self.examples[verdict.reason] = verdict.example_error
                        # Once per reason and call: the rest are counted in the metrics.
                        logger.warning(
                            "dropped a group (%s): %s; more such drops this call are counted "
                            "in rollout/dynamic_filter/drop_%s",
                            verdict.reason,
                            verdict.example_error,
                            verdict.reason,
                        )
                    logger.debug(
                        "dropped group at offset %d: %s (%s)",
                        offset,
                        verdict.reason,
                        verdict.example_error,
                    )
            self._stop_if_every_episode_failed_alike()

    def _stop_if_every_episode_failed_alike(self) -> None:
        if not self.first_wave:
            return
        wave = self.dispatched[: self.first_wave]
        if len(wave) < self.first_wave or any(offset not in self.judged for offset in wave):
            return
        self.first_wave = 0  # checked once per call
        signatures = {failure_signature(self.judged[offset]) for offset in wave}
        (signature,) = signatures if len(signatures) == 1 else {None}
        if signature is not None:
            # A signature is only made from a group with an example error.
            example, reason = self.judged[wave[0]].example_error or "", signature[0]
            raise UniformFailureError(
                f"every episode of the training call's first {len(wave)} group(s) failed the "
                f"same way ({reason!r}), so the call stops instead of replacing them: {example}. "
                f"This drop reason means {_REASON_HINTS[reason]}; fix the cause and run again.",
                Counter({reason: len(wave)}),
            )


async def train_rollout(
    scope: CallScope,
    setup: TrainSetup,
    args: Any,
    *,
    start: Cursor,
    weight_version: Any,
    data_source: Any,
) -> TrainResult:
    """Run one training call inside ``scope`` and post-process its groups (Miles' order)."""
    dispatcher = _Dispatcher(scope, setup, args, weight_version, start)
    settlement = await dispatcher.run()
    first_batch = max(setup.rollout_batch_size, setup.over_sampling_batch_size)
    # Nothing after the cut is needed: stop it now rather than at scope exit.
    await scope.wind_down()

    accepted = [dispatcher.judged[o] for o in settlement.accepted]
    # The hooks get each group's samples as one list (siblings included): the same objects
    # the output nests per rollout, so what they change is what Miles trains.
    flat_groups = [j.samples for j in accepted]
    consumed = sorted((*settlement.accepted, *settlement.dropped))
    all_groups = [s for o in consumed if (s := dispatcher.judged[o].samples)]

    if setup.hooks.sample_filter is not None:
        setup.hooks.sample_filter(args, flat_groups)
    if setup.hooks.all_samples_process is not None:
        setup.hooks.all_samples_process(args, all_groups, data_source)
    if setup.hooks.prefill_recompute is not None:
        await setup.hooks.recompute_logprobs(
            args,
            [s for g in flat_groups for s in g],
            url=f"{engine_url_from_args(args)}/generate",
            sampling_params=dict(setup.prefill_sampling),
        )
    groups = training_output([j.group or ConvertedGroup(()) for j in accepted])

    consumed_drops: Counter[str] = Counter(
        reason for o in settlement.dropped if (reason := dispatcher.judged[o].reason)
    )
    traces = [t for j in accepted for t in j.traces]
    metrics = merge(
        trace_metrics(traces),
        sample_metrics(
            [s for g in flat_groups for s in g], SimpleNamespace(reward_key=setup.reward_key)
        ),
        drop_metrics(consumed_drops),
        scheduling_metrics(
            first_batch=first_batch,
            dispatched=len(dispatcher.dispatched),
            accepted=len(settlement.accepted),
            dropped=len(settlement.dropped),
            carried_over=len(settlement.carry_over),
        ),
    )
    return TrainResult(groups, metrics, settlement, dispatcher.cursor)
