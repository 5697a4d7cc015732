"""``Sample``: the unit a Miles rollout function hands back, ported field for field.

This is the project's own port of Miles' ``Sample`` (the current contract, with
``routing_key``), used where ``miles`` is not importable: on this machine, in tests and in the
embedded default. It is a stand-in, not a copy: every field, default, ``Status`` value and
``validate()`` rule follows the contract, so code written against it runs unchanged on Miles'
own class (which :mod:`miles_verifiers.trainer.contract.compat` returns when Miles is installed).

Per-token arrays (routed experts, indexer top-k) are typed ``Any``: Miles stores numpy
arrays there, and only their length matters to the contract.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Protocol


class _HasRewardKey(Protocol):
    reward_key: str | None


def _check(condition: bool, message: str) -> None:
    # Miles signals a broken sample with AssertionError; raising it explicitly keeps the
    # check alive under ``python -O``, which strips ``assert`` statements.
    if not condition:
        raise AssertionError(message)


@dataclass(frozen=True)
class AdapterRef:
    """Which LoRA adapter slot produced a sample (multi-LoRA runs)."""

    name: str
    slot: int


@dataclass(frozen=True)
class RewardSpec:
    """Per-sample override of the reward model Miles applies."""

    rm_type: str | None = None
    custom_rm_path: str | None = None


# Media counters Miles adds to the routed-experts length: each image/audio item occupies one
# placeholder token in ``tokens`` but expands to ``count`` positions inside the engine.
_MEDIA_COUNT_KEYS = ("mm_vision_num_patches", "mm_audio_num_tokens")


@dataclass
class Sample:
    """One trajectory (prompt + response tokens) with its reward and training metadata."""

    class Status(Enum):
        PENDING = "pending"
        COMPLETED = "completed"
        TRUNCATED = "truncated"
        ABORTED = "aborted"
        # Recoverable failure: the sample may still hold partial output.
        FAILED = "failed"

    @dataclass
    class SpecInfo:
        """Speculative-decoding counters accumulated over a sample's generate calls."""

        spec_accept_token_num: int = 0
        spec_draft_token_num: int = 0
        spec_verify_ct: int = 0
        completion_token_num: int = 0

        @property
        def spec_accept_rate(self) -> float:
            if self.spec_draft_token_num <= 0:
                return 0.0
            return self.spec_accept_token_num / self.spec_draft_token_num

        @property
        def spec_accept_length(self) -> float:
            if self.spec_verify_ct <= 0:
                return 0.0
            return self.completion_token_num / self.spec_verify_ct

        def add(self, meta_info: Mapping[str, Any]) -> None:
            self.spec_accept_token_num += meta_info.get("spec_accept_token_num", 0)
            self.spec_draft_token_num += meta_info.get("spec_draft_token_num", 0)
            self.spec_verify_ct += meta_info.get("spec_verify_ct", 0)
            self.completion_token_num += meta_info.get("completion_tokens", 0)

        def to_dict(self) -> dict[str, int]:
            return dataclasses.asdict(self)

        @staticmethod
        def from_dict(data: Mapping[str, Any]) -> Sample.SpecInfo:
            names = [f.name for f in dataclasses.fields(Sample.SpecInfo)]
            return Sample.SpecInfo(**{name: data.get(name, 0) for name in names})

    @dataclass
    class PrefixCacheInfo:
        """Prefix-cache hits accumulated over a sample's generate calls."""

        cached_tokens: int = 0
        total_prompt_tokens: int = 0

        @property
        def prefix_cache_hit_rate(self) -> float:
            if self.total_prompt_tokens <= 0:
                return 0.0
            return self.cached_tokens / self.total_prompt_tokens

        def add(self, meta_info: Mapping[str, Any]) -> None:
            self.cached_tokens += meta_info.get("cached_tokens", 0)
            self.total_prompt_tokens += meta_info.get("prompt_tokens", 0)

        def to_dict(self) -> dict[str, int]:
            return dataclasses.asdict(self)

        @staticmethod
        def from_dict(data: Mapping[str, Any]) -> Sample.PrefixCacheInfo:
            names = [f.name for f in dataclasses.fields(Sample.PrefixCacheInfo)]
            return Sample.PrefixCacheInfo(**{name: data.get(name, 0) for name in names})

    group_index: int | None = None
    index: int | None = None
    # Shared by sibling rows of one rollout (compact/subagent); Miles falls back to ``index``.
    rollout_id: int | None = None
    prompt: str | list[dict[str, Any]] = ""
    tokens: list[int] = field(default_factory=list)
    multimodal_inputs: dict[str, Any] | None = None
    multimodal_train_inputs: dict[str, Any] | None = None
    response: str = ""
    response_length: int = 0
    label: str | None = None
    reward: float | dict[str, Any] | None = None
    loss_mask: list[int] | None = None
    weight_versions: list[str] = field(default_factory=list)
    rollout_log_probs: list[float] | None = None
    rollout_routed_experts: Any | None = None
    rollout_indexer_topk: Any | None = None
    remove_sample: bool = False
    teacher_log_probs: list[float] | None = None
    opd_reverse_kl: list[float] | None = None
    status: Sample.Status = Status.PENDING
    metadata: dict[str, Any] = field(default_factory=dict)
    generate_function_path: str | None = None
    train_metadata: dict[str, Any] | None = None
    adapter: AdapterRef | None = None
    reward_spec: RewardSpec | None = None
    # Sent to the router as the routing header, so every request of one trajectory (and
    # the prefill recompute) lands on the same engine.
    routing_key: str | None = None
    non_generation_time: float = 0.0
    spec_info: Sample.SpecInfo = field(default_factory=SpecInfo)
    prefix_cache_info: Sample.PrefixCacheInfo = field(default_factory=PrefixCacheInfo)

    # -- rewards ---------------------------------------------------------------------

    def get_reward_value(self, args: _HasRewardKey) -> Any:
        """The scalar reward Miles trains on: the whole reward, or one key of a dict reward.

        A falsy ``args.reward_key`` means the reward itself. A set key needs a dict-shaped
        reward: a scalar raises ``TypeError`` and a missing key ``KeyError``, as in Miles.
        """
        if not args.reward_key:
            return self.reward
        return self.reward[args.reward_key]  # type: ignore[index]

    # -- derived views -----------------------------------------------------------------

    @property
    def effective_response_length(self) -> int:
        if self.loss_mask is not None:
            return sum(self.loss_mask)
        return self.response_length

    @property
    def oldest_weight_version(self) -> int | None:
        numeric = [int(v) for v in self.weight_versions if str(v).isdigit()]
        return min(numeric) if numeric else None

    # -- invariants --------------------------------------------------------------------

    def validate(self) -> None:
        """Raise ``AssertionError`` when per-token fields disagree with the token counts."""
        _check(
            self.response_length >= 0,
            f"Sample.response_length is {self.response_length}; it cannot be negative.",
        )
        _check(
            len(self.tokens) >= self.response_length,
            f"Sample has {len(self.tokens)} tokens but response_length "
            f"{self.response_length}; the response must fit inside tokens.",
        )
        for name in ("loss_mask", "rollout_log_probs", "teacher_log_probs", "opd_reverse_kl"):
            values = getattr(self, name)
            if values is not None:
                _check(
                    len(values) == self.response_length,
                    f"Sample.{name} has {len(values)} entries; it needs one per response "
                    f"token ({self.response_length}).",
                )
        per_position = len(self.tokens) - 1
        if self.rollout_routed_experts is not None:
            actual = len(self.rollout_routed_experts)
            expanded = per_position + self._media_expansion()
            expected = f"{per_position} (len(tokens) - 1)"
            if expanded != per_position:
                expected += f" or {expanded} (media placeholders expanded)"
            _check(
                actual in (per_position, expanded),
                f"Sample.rollout_routed_experts has {actual} rows; expected {expected}.",
            )
        if self.rollout_indexer_topk is not None:
            actual = len(self.rollout_indexer_topk)
            _check(
                actual == per_position,
                f"Sample.rollout_indexer_topk has {actual} rows; expected len(tokens) - 1 = "
                f"{per_position}.",
            )

    def _media_expansion(self) -> int:
        inputs = self.multimodal_train_inputs or {}
        extra = 0
        for key in _MEDIA_COUNT_KEYS:
            for count in inputs.get(key) or ():
                extra += int(count) - 1
        return extra

    # -- mutation helpers Miles offers -------------------------------------------------

    def strip_last_output_tokens(self, n: int, tokenizer: Any) -> None:
        """Drop the last ``n`` response tokens and everything aligned with them."""
        if n <= 0:
            return
        _check(
            n <= self.response_length,
            f"Cannot strip {n} tokens from a response of {self.response_length}.",
        )
        self.tokens = self.tokens[:-n]
        self.response_length -= n
        for name in ("rollout_log_probs", "loss_mask", "teacher_log_probs", "opd_reverse_kl"):
            values = getattr(self, name)
            if values is not None:
                setattr(self, name, values[:-n])
        for name in ("rollout_routed_experts", "rollout_indexer_topk"):
            values = getattr(self, name)
            if values is not None:
                setattr(self, name, values[:-n])
        if self.response_length > 0:
            self.response = tokenizer.decode(self.tokens[-self.response_length :])
        else:
            self.response = ""

    def reset_for_retry(self) -> None:
        """Forget generated output, keep identity and prompt, and mark the sample ABORTED."""
        defaults = Sample()
        for name in (
            "tokens",
            "multimodal_train_inputs",
            "response",
            "response_length",
            "reward",
            "loss_mask",
            "weight_versions",
            "rollout_log_probs",
            "rollout_routed_experts",
            "rollout_indexer_topk",
            "teacher_log_probs",
            "opd_reverse_kl",
            "non_generation_time",
            "spec_info",
            "prefix_cache_info",
            "remove_sample",
            "train_metadata",
        ):
            setattr(self, name, getattr(defaults, name))
        self.status = Sample.Status.ABORTED

    def update_from_meta_info(self, args: Any, meta_info: Mapping[str, Any]) -> None:
        """Fold one SGLang ``meta_info`` into counters, weight versions and status."""
        if getattr(args, "sglang_speculative_algorithm", None):
            self.spec_info.add(meta_info)
        self.prefix_cache_info.add(meta_info)
        if "weight_version" in meta_info:
            self.weight_versions.append(meta_info["weight_version"])
        finish = meta_info["finish_reason"]
        kind = finish.get("type") if isinstance(finish, Mapping) else finish
        status = _FINISH_TO_STATUS.get(kind)
        if status is not None:
            self.status = status

    # -- (de)serialisation -----------------------------------------------------------

    def to_dict(self) -> dict[str, Any]:
        """A shallow dict of every attribute, with nested records turned into dicts."""
        value = dict(self.__dict__)
        value["status"] = self.status.value
        value["spec_info"] = self.spec_info.to_dict()
        value["prefix_cache_info"] = self.prefix_cache_info.to_dict()
        for name in ("adapter", "reward_spec"):
            if value.get(name) is not None:
                value[name] = dataclasses.asdict(value[name])
        return value

    @staticmethod
    def from_dict(data: Mapping[str, Any]) -> Sample:
        """Rebuild a sample from :meth:`to_dict`; unknown keys become plain attributes."""
        values = dict(data)
        values["status"] = Sample.Status(values.get("status", Sample.Status.PENDING.value))
        values["spec_info"] = Sample.SpecInfo.from_dict(values.get("spec_info") or {})
        values["prefix_cache_info"] = Sample.PrefixCacheInfo.from_dict(
            values.get("prefix_cache_info") or {}
        )
        if isinstance(values.get("adapter"), Mapping):
            values["adapter"] = AdapterRef(**values["adapter"])
        if isinstance(values.get("reward_spec"), Mapping):
            values["reward_spec"] = RewardSpec(**values["reward_spec"])
        known = {f.name for f in dataclasses.fields(Sample)}
        sample = Sample(**{k: v for k, v in values.items() if k in known})
        for key, value in values.items():
            if key not in known:
                setattr(sample, key, value)
        return sample


_FINISH_TO_STATUS: dict[str | None, Sample.Status] = {
    "length": Sample.Status.TRUNCATED,
    "abort": Sample.Status.ABORTED,
    "stop": Sample.Status.COMPLETED,
}
