"""Miles' own hooks around a rollout: reward models, filters, post-processing, logprob recompute.

Called where Miles' built-in rollout calls them: a Miles reward model replaces the Verifiers
reward of a finished group before the dynamic filter sees it; the sample filter gets the groups
a training call returns, the all-samples hook every group it consumed. Loaded at construction;
a path is ``module.attr`` (resolved by Miles' ``load_function`` where installed) or ``module:attr``.
"""

from __future__ import annotations

import asyncio
import importlib
import inspect
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from miles_verifiers.errors import RolloutCallError, SetupError
from miles_verifiers.trainer.options import FLAGS

MILES_LOAD_FUNCTION = ("miles.utils.misc", "load_function")
MILES_RM_HUB = "miles.rollout.rm_hub"
MILES_PREFILL = (
    "miles.rollout.generate_utils.prefill_logprobs",
    "recompute_samples_rollout_logprobs_via_prefill",
)
MILES_DUMPER = ("miles.utils.dumper_utils", "configure_sglang")


class HookError(SetupError, ValueError):
    """A Miles hook flag that cannot be used."""

    def __init__(self, flag: str, message: str, fix: str) -> None:
        super().__init__(f"{flag} {message} Fix: {fix}")


class RewardModelError(RolloutCallError, ValueError):
    """A Miles reward model returned something that cannot be a sample's reward."""


def _import_attribute(path: str) -> Any:
    if ":" in path:
        module_name, _, attribute = path.partition(":")
    else:
        module_name, _, attribute = path.rpartition(".")
    if not module_name or not attribute:
        raise ValueError(f"{path!r} is not a 'module.attribute' or 'module:attribute' path")
    return getattr(importlib.import_module(module_name), attribute)


def _miles_attribute(module_name: str, attribute: str) -> Any | None:
    """An attribute of an installed Miles module, or None when it cannot be imported."""
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except (ImportError, AttributeError):
        return None


def load_hook(path: str, flag: str, *, use_miles: bool) -> Callable[..., Any]:
    """The callable behind a hook flag's value; raises :class:`HookError` naming ``flag``."""
    loader = _miles_attribute(*MILES_LOAD_FUNCTION) if use_miles and ":" not in path else None
    try:
        hook = loader(path) if loader is not None else _import_attribute(path)
    except Exception as error:  # any import-time failure of user code
        raise HookError(
            flag,
            f"{path!r} cannot be loaded ({type(error).__name__}: {error}).",
            "give an importable 'package.module.function' path (the module must be importable "
            "where the rollout manager runs).",
        ) from error
    if not callable(hook):
        raise HookError(
            flag, f"{path!r} is a {type(hook).__name__}, not a function.", "point it at a function."
        )
    return hook


async def _call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """``fn``'s result, awaited where it is awaitable (a hook may be sync or async)."""
    value = fn(*args, **kwargs)
    return await value if inspect.isawaitable(value) else value


@dataclass(frozen=True)
class RewardModel:
    """Applies Miles' reward model to the samples of one group, in place (sync or async)."""

    per_sample: Callable[[Any, Any], Any] | None
    per_group: Callable[[Any, list[Any]], Any] | None
    reward_key: str | None
    eval_reward_key: str | None
    flag: str = "--custom-rm-path"  # the flag(s) that configured it

    async def apply(self, args: Any, samples: Sequence[Any], *, evaluation: bool) -> None:
        if not samples:
            return
        samples = list(samples)
        if self.per_group is not None and not evaluation:
            rewards = await _call(self.per_group, args, samples)
        elif self.per_sample is not None:
            rewards = await asyncio.gather(*(_call(self.per_sample, args, s) for s in samples))
        else:  # the options refuse --group-rm with --eval-interval; an eval call may still come
            raise RewardModelError(
                "--group-rm scores whole training groups only, and there is no per-sample reward "
                "model for evaluation. Fix: drop --group-rm for runs that evaluate, or set a "
                "per-sample --custom-rm-path/--rm-type."
            )
        rewards = list(rewards) if rewards is not None else []
        if len(rewards) != len(samples):
            raise RewardModelError(
                f"the Miles reward model returned {len(rewards)} reward(s) for {len(samples)} "
                "sample(s). Fix: return one reward per sample, in order."
            )
        key = self.eval_reward_key if evaluation else self.reward_key
        # Miles copies --reward-key into --eval-reward-key when unset: evaluation reads the latter.
        flag = "--eval-reward-key" if evaluation else "--reward-key"
        # Every reward is checked before any is set, so a bad one leaves the samples as they were.
        for reward in rewards:
            if not key and isinstance(reward, Mapping):
                # Miles would take the whole dict as the reward value and fail on it later.
                raise RewardModelError(
                    f"the Miles reward model returned a dict ({reward!r}), but {flag} is unset, "
                    f"so there is no value to use. Fix: set {flag} to the key holding the "
                    "reward value, or return a number."
                )
            if key and not (isinstance(reward, Mapping) and key in reward):
                raise RewardModelError(
                    f"{flag} is {key!r}, but the Miles reward model returned {reward!r}; Miles reads "
                    "the reward value as reward[key]. Fix: return a dict holding that key, or "
                    f"unset {flag} for a scalar reward model."
                )
        for sample, reward in zip(samples, rewards, strict=True):
            sample.reward = reward


def load_reward_model(options: Any, *, use_miles: bool) -> RewardModel | None:
    """The Miles reward model the options ask for, or None to keep the Verifiers rewards."""
    # --group-rm without a reward model is refused with the options already.
    if not options.uses_miles_reward_model:
        return None
    flag = "--custom-rm-path" if options.custom_rm_path else "--rm-type"
    if options.group_rm:
        flag += " with --group-rm"
    if use_miles:
        rm_hub = importlib.import_module(MILES_RM_HUB)
        per_sample, per_group = rm_hub.async_rm, rm_hub.batched_async_rm
    elif options.rm_type and options.custom_rm_path is None:
        raise HookError(
            "--rm-type",
            f"is {options.rm_type!r}, but the rule-based reward models live in Miles' rm_hub, "
            "which is not installed here.",
            "run inside Miles, or score with --custom-rm-path module.function instead.",
        )
    else:
        per_sample = per_group = load_hook(
            options.custom_rm_path, "--custom-rm-path", use_miles=False
        )
    # A --group-rm model has the batch signature, so it is never called per sample.
    return RewardModel(
        None if options.group_rm else per_sample,
        per_group if options.group_rm else None,
        options.train.reward_key,
        options.eval.reward_key,
        flag,
    )


@dataclass(frozen=True)
class MilesHooks:
    """Every Miles hook a run uses (None where not configured)."""

    dynamic_filter: Callable[..., Any] | None = None
    sample_filter: Callable[..., Any] | None = None
    all_samples_process: Callable[..., Any] | None = None
    reward_model: RewardModel | None = None
    prefill_recompute: Callable[..., Any] | None = None
    dumper: Callable[..., Any] | None = None

    async def configure_engine_dumper(self, args: Any) -> None:
        if self.dumper is not None:
            await _call(self.dumper, args)

    async def recompute_logprobs(self, args: Any, samples: list[Any], **keywords: Any) -> None:
        """Miles' prefill recompute of ``samples``, where configured (``url``, ``sampling_params``)."""
        if self.prefill_recompute is not None and samples:
            await _call(self.prefill_recompute, args, samples, **keywords)


def load_hooks(options: Any, *, use_miles: bool) -> MilesHooks:
    """Load every configured hook now; raises :class:`HookError` naming the first bad flag.
    Without Miles (``use_miles``), ``--rm-type`` and ``--recompute-logprobs-via-prefill`` are
    refused: they need its reward models and prefill helper."""

    def optional(name: str) -> Callable[..., Any] | None:
        path = getattr(options, name)
        return None if path is None else load_hook(path, FLAGS[name], use_miles=use_miles)

    prefill = None
    if options.recompute_logprobs_via_prefill:
        prefill = _miles_attribute(*MILES_PREFILL) if use_miles else None
        if prefill is None:
            raise HookError(
                "--recompute-logprobs-via-prefill",
                "is set, but Miles' prefill helper "
                f"({MILES_PREFILL[0]}.{MILES_PREFILL[1]}) cannot be imported here.",
                "run inside a Miles installation that provides it, or drop the flag (the "
                "transport already returns the engine's own sampling logprobs).",
            )
    return MilesHooks(
        dynamic_filter=optional("dynamic_sampling_filter_path"),
        sample_filter=optional("rollout_sample_filter_path"),
        all_samples_process=optional("rollout_all_samples_process_path"),
        reward_model=load_reward_model(options, use_miles=use_miles),
        prefill_recompute=prefill,
        dumper=_miles_attribute(*MILES_DUMPER) if use_miles else None,
    )
