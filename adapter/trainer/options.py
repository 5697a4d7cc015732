"""Miles command-line options: one validated model of everything the rollout function reads
from Miles' ``args`` (a missing attribute takes Miles' default).

Each field comes from a row of :mod:`.miles_flags`; every rejection names that flag and its fix,
all at once. Later code trusts the validated values; only what Miles fills in after
construction (the router address) is read live from ``args``.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields, replace
from functools import cached_property
from types import MappingProxyType
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, ValidationInfo, field_validator
from pydantic_core import PydanticCustomError

from miles_verifiers.engine.settings import MAX_STOP_STRINGS
from miles_verifiers.errors import SetupError
from miles_verifiers.trainer.miles_flags import MILES_FLAGS

ProblemKind = Literal["unsupported", "invalid"]


@dataclass(frozen=True)
class OptionProblem:
    """One offending option: the flag as typed on the command line, what is wrong, the fix."""

    flag: str
    kind: ProblemKind
    problem: str
    fix: str

    def describe(self) -> str:
        return f"{self.flag} {self.problem} Fix: {self.fix}"


class OptionsError(SetupError, ValueError):
    """Miles options the Verifiers rollout function cannot run with, all reported at once."""

    def __init__(self, problems: Sequence[OptionProblem]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p.describe()}" for p in self.problems)
        count = len(self.problems)
        noun = "option needs" if count == 1 else "options need"
        super().__init__(
            f"{count} Miles {noun} changing before the Verifiers rollout function can run:\n"
            + lines
        )

    @property
    def flags(self) -> list[str]:
        return [p.flag for p in self.problems]


class UnsupportedOptionsError(OptionsError):
    """At least one option asks for something the rollout function does not support."""


class InvalidOptionsError(OptionsError):
    """Options are missing or inconsistent (no unsupported feature requested)."""


def options_error(problems: Sequence[OptionProblem]) -> OptionsError:
    """The error for ``problems``: unsupported when any of them asks for an unsupported feature."""
    if any(p.kind == "unsupported" for p in problems):
        return UnsupportedOptionsError(problems)
    return InvalidOptionsError(problems)


# Every field of MilesOptions -> the Miles flag that sets it; every rejection names its flag
# from here. A field is read from the attribute of its own name, or the one in _ATTRIBUTES.
FLAGS: Mapping[str, str] = MappingProxyType(
    {row.field: row.option for row in MILES_FLAGS if row.field is not None}
)
_ATTRIBUTES = {
    row.field: row.dest for row in MILES_FLAGS if row.field is not None and row.field != row.dest
}


# sglang-router reads sampling_seed as u64 while SGLang itself takes a signed 64-bit int, so a
# seed both accept lies in [0, 2**63 - 1]. top_k is an i32 and min_new_tokens a u32 there.
MAX_SAMPLING_SEED = 2**63 - 1
_MAX_TOP_K = 2**31 - 1
_MAX_U32 = 2**32 - 1


def _problem(problem: str, fix: str, kind: ProblemKind = "invalid") -> PydanticCustomError:
    # The texts travel in the context: pydantic formats the template, and a fix may quote JSON.
    return PydanticCustomError(kind, "{problem}", {"problem": problem, "fix": fix})


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _real(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _as_tuple(value: Any) -> tuple[Any, ...] | None:
    if value is None or isinstance(value, tuple):
        return value
    if isinstance(value, (str, int)):
        return (value,)
    if isinstance(value, list):
        return tuple(value)
    return ("not a list",)  # refused by the element checks of the caller


# Features the rollout function does not support, in the order Miles' help lists them: a bool
# is refused when true (rollout_global_dataset: when its store_false flag is missing), any
# other option when given. Each row: the problem, the fix.
_REJECTIONS: Mapping[str, tuple[str, str]] = {
    "rollout_global_dataset": (
        "is missing, so Miles would load its own prompt dataset; the tasks come from the "
        "Verifiers taskset of the environment config instead.",
        f"pass {FLAGS['rollout_global_dataset']}.",
    ),
    "partial_rollout": (
        "is set, but a Verifiers episode runs tools, user simulators and sandboxes whose "
        "state cannot be parked mid-episode and resumed in a later rollout.",
        f"remove {FLAGS['partial_rollout']}; unfinished groups are re-run from the start instead.",
    ),
    "multimodal_keys": (
        "is set, but the Verifiers transport carries text-only renderer input; images and "
        "other media are not sent to SGLang.",
        f"remove {FLAGS['multimodal_keys']}.",
    ),
    "chat_template_path": (
        "is set, but prompts are rendered by the renderers package from the checkpoint's own "
        "template, which cannot load a custom Jinja file (a non-default --tito-model also "
        "sets this path).",
        f"remove {FLAGS['chat_template_path']} and pass template switches with "
        f"{FLAGS['apply_chat_template_kwargs']}, e.g. '{{\"enable_thinking\": false}}'.",
    ),
    "use_opd": (
        "is set, but on-policy distillation needs teacher log-probs per token, which the "
        "Verifiers transport does not request.",
        f"remove {FLAGS['use_opd']}.",
    ),
    "use_rollout_routing_replay": (
        "is set, but the Verifiers transport does not ask SGLang for routed experts, so there "
        "is nothing to replay.",
        f"remove {FLAGS['use_rollout_routing_replay']}.",
    ),
    "use_rollout_indexer_replay": (
        "is set, but the Verifiers transport does not ask SGLang for indexer top-k, so there "
        "is nothing to replay.",
        f"remove {FLAGS['use_rollout_indexer_replay']}.",
    ),
    "multi_lora": (
        "is set, but the Verifiers transport sends every request to a single LoRA adapter and "
        "does not record which slot produced a sample.",
        f"remove {FLAGS['multi_lora']} (a single LoRA via {FLAGS['lora_rank']} works).",
    ),
}

# What each required count means, for the fix of a missing or non-positive one.
_COUNT_FIXES: Mapping[str, str] = {
    "rollout_max_response_len": "; it caps the tokens sampled per model turn and has no default.",
    "rollout_batch_size": ", the number of task groups per training step.",
    "n_samples_per_prompt": " (N >= 1), the rollouts per task.",
    "n_samples_per_eval_prompt": " (N >= 1), the rollouts per evaluation task.",
    "sglang_server_concurrency": " (N >= 1), the in-flight requests per engine.",
    "save_interval": " (N >= 1), the rollouts between checkpoints, or leave it unset.",
}


@dataclass(frozen=True)
class SamplingOptions:
    """The sampling limits of one mode (train or eval) after Miles' eval overrides."""

    temperature: float
    top_p: float
    top_k: int | None
    max_response_len: int
    max_context_len: int | None
    # Cap on the first prompt of a trajectory; None means no cap.
    max_prompt_len: int | None
    min_new_tokens: int | None
    stop: tuple[str, ...] | None
    stop_token_ids: tuple[int, ...] | None
    skip_special_tokens: bool
    chat_template_kwargs: Mapping[str, Any]
    # Key of a dict-shaped reward to train/evaluate on; None means the scalar reward.
    reward_key: str | None


# Sampling values Miles' eval_<name> overrides only when set.
_EVAL_OVERRIDES = ("temperature", "top_p", "top_k", "max_response_len", "max_context_len")


class MilesOptions(BaseModel):
    """What the rollout function reads from Miles' arguments, validated once. Defaults are
    Miles' own; fields are checked in the order written, and a check may read those above it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # Unsupported features: each must be off.
    rollout_global_dataset: bool = True
    partial_rollout: bool = False
    multimodal_keys: Any = None
    chat_template_path: str | None = None
    use_opd: bool = False
    use_rollout_routing_replay: bool = False
    use_rollout_indexer_replay: bool = False
    multi_lora: bool = False
    rollout_max_response_len: int
    rollout_batch_size: int
    n_samples_per_prompt: int = 1
    n_samples_per_eval_prompt: int = 1
    sglang_server_concurrency: int = 512
    over_sampling_batch_size: int  # unset: the batch size
    # Miles checkpoints every --save-interval rollouts; the scheduler keeps those resume points.
    save_interval: int | None = None
    rollout_num_gpus_per_engine: int = 1
    rollout_num_gpus: int
    apply_chat_template_kwargs: Mapping[str, Any] = Field(default_factory=dict)
    rollout_temperature: float = 1.0
    rollout_top_p: float = 1.0
    rollout_top_k: int | None = -1
    eval_temperature: float | None = None
    eval_top_p: float | None = None
    eval_top_k: int | None = None
    eval_max_response_len: int | None = None
    rollout_min_new_tokens: int | None = None
    eval_min_new_tokens: int | None = None
    deterministic_inference: bool = False
    rollout_seed: int = 42
    rollout_max_context_len: int | None = None
    eval_max_context_len: int | None = None
    rollout_max_prompt_len: int | None = None
    eval_max_prompt_len: int | None = None
    rollout_stop: tuple[str, ...] | None = None
    rollout_stop_token_ids: tuple[int, ...] | None = None
    rollout_skip_special_tokens: bool = False
    sglang_tokenizer_path: str | None = None
    hf_checkpoint: str | None = None
    # Read as they are (hook paths are loaded, and checked, by the hooks stage).
    rollout_shuffle: bool = False
    reward_key: str | None = None
    eval_reward_key: str | None = None
    dynamic_sampling_filter_path: str | None = None
    rollout_sample_filter_path: str | None = None
    rollout_all_samples_process_path: str | None = None
    num_rollout: int | None = None
    eval_interval: int | None = None
    custom_rm_path: str | None = None
    rm_type: str | None = None
    group_rm: bool = False
    use_miles_router: bool = False
    sglang_router_policy: str | None = None
    recompute_logprobs_via_prefill: bool = False
    lora_rank: int = 0
    lora_adapter_path: str | None = None
    lora_train_only: bool = False
    save_dir: str | None = None
    load_dir: str | None = None

    @field_validator(*_REJECTIONS, mode="plain")
    @classmethod
    def _supported(cls, value: Any, info: ValidationInfo) -> Any:
        name = str(info.field_name)
        if bool(value) if cls.model_fields[name].annotation is bool else value is not None:
            raise _problem(*_REJECTIONS[name], "unsupported")
        return value

    @field_validator(*_COUNT_FIXES, mode="plain")
    @classmethod
    def _count(cls, value: Any, info: ValidationInfo) -> Any:
        name = str(info.field_name)
        if value is None and name == "save_interval":
            return None
        fix = f"pass {FLAGS[name]} N{_COUNT_FIXES[name]}"
        if value is None:
            raise _problem("is not set.", fix)
        if not isinstance(value, int) or value < 1:
            raise _problem(f"is {value!r}; it must be a positive integer.", fix)
        return value

    @field_validator("over_sampling_batch_size", mode="plain")
    @classmethod
    def _over_sampling(cls, value: Any, info: ValidationInfo) -> Any:
        batch = info.data.get("rollout_batch_size")
        if value is None or batch is None:
            return batch if value is None else value
        if not isinstance(value, int) or value < batch:
            raise _problem(
                f"is {value!r}, below {FLAGS['rollout_batch_size']} {batch}.",
                f"pass {FLAGS['over_sampling_batch_size']} at least {FLAGS['rollout_batch_size']}, "
                "or leave it unset to use the batch size.",
            )
        return value

    @field_validator("rollout_num_gpus_per_engine", mode="plain")
    @classmethod
    def _gpus_per_engine(cls, value: Any, info: ValidationInfo) -> Any:
        if not isinstance(value, int) or value < 1:
            raise _problem(
                f"is {value!r}; the number of SGLang engines cannot be computed.",
                f"pass {FLAGS['rollout_num_gpus_per_engine']} N (N >= 1, the GPUs of one engine).",
            )
        return value

    @field_validator("rollout_num_gpus", mode="plain")
    @classmethod
    def _gpus(cls, value: Any, info: ValidationInfo) -> Any:
        per_engine = info.data.get("rollout_num_gpus_per_engine")
        flag, per_engine_flag = FLAGS["rollout_num_gpus"], FLAGS["rollout_num_gpus_per_engine"]
        if per_engine is None:
            return value  # the engine count is refused for the GPUs per engine already
        if value is None:
            raise _problem(
                "is not set, so the number of SGLang engines (and with it the request "
                "concurrency) cannot be computed.",
                f"pass {flag} N, or --colocate, which derives it from the actor GPUs.",
            )
        if not isinstance(value, int) or value < per_engine:
            raise _problem(
                f"is {value!r}, fewer than {per_engine_flag} {per_engine}, which leaves zero "
                "SGLang engines.",
                f"pass {flag} at least {per_engine_flag}.",
            )
        return value

    @field_validator("apply_chat_template_kwargs", mode="plain")
    @classmethod
    def _chat_template_kwargs(cls, value: Any, info: ValidationInfo) -> Any:
        # Miles parses the flag with json.loads; the raw string is accepted for hand-built args.
        if value is None or value == "":
            return {}
        try:
            parsed = json.loads(value) if isinstance(value, str) else value
            if not isinstance(parsed, Mapping):
                raise ValueError(f"expected a JSON object, got {type(parsed).__name__}")
        except ValueError as error:
            raise _problem(
                f"cannot be read as a JSON object ({error}).",
                "pass a JSON object, e.g. '{\"enable_thinking\": false}'.",
            ) from None
        return dict(parsed)

    @field_validator("rollout_temperature", "eval_temperature", mode="plain")
    @classmethod
    def _temperature(cls, value: Any, info: ValidationInfo) -> Any:
        number, flag = _real(value), FLAGS[str(info.field_name)]
        if value is None and info.field_name == "eval_temperature":
            return None
        if number is None or number < 0:
            raise _problem(
                f"is {value!r}; SGLang samples only with a finite temperature of 0 or more.",
                f"pass {flag} T with T >= 0 (0 is greedy, 1.0 samples from the model as it is).",
            )
        return number

    @field_validator("rollout_top_p", "eval_top_p", mode="plain")
    @classmethod
    def _top_p(cls, value: Any, info: ValidationInfo) -> Any:
        number, flag = _real(value), FLAGS[str(info.field_name)]
        if value is None and info.field_name == "eval_top_p":
            return None
        if number is None or not 0 < number <= 1:
            raise _problem(
                f"is {value!r}; SGLang accepts a nucleus threshold above 0 and at most 1.",
                f"pass {flag} P with 0 < P <= 1 (1.0 turns nucleus sampling off).",
            )
        return number

    @field_validator("rollout_top_k", "eval_top_k", mode="plain")
    @classmethod
    def _top_k(cls, value: Any, info: ValidationInfo) -> Any:
        flag = FLAGS[str(info.field_name)]
        if value is None or (_is_int(value) and (value == -1 or 1 <= value <= _MAX_TOP_K)):
            return value
        raise _problem(
            f"is {value!r}; SGLang takes -1 (no top-k) or a positive integer that fits 32 bits.",
            f"pass {flag} -1 to sample from the whole vocabulary, or {flag} K with K >= 1.",
        )

    @field_validator("eval_max_response_len", mode="plain")
    @classmethod
    def _eval_response_cap(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and (not _is_int(value) or not 1 <= value <= _MAX_U32):
            raise _problem(
                f"is {value!r}; it must be a positive integer.",
                f"pass {FLAGS['eval_max_response_len']} N (N >= 1), or leave it unset to use "
                f"{FLAGS['rollout_max_response_len']}.",
            )
        return value

    @field_validator("rollout_min_new_tokens", "eval_min_new_tokens", mode="plain")
    @classmethod
    def _min_new_tokens(cls, value: Any, info: ValidationInfo) -> Any:
        flag = FLAGS[str(info.field_name)]
        if value is None:
            return None
        if not _is_int(value) or not 0 <= value <= _MAX_U32:
            raise _problem(
                f"is {value!r}; it must be a whole number of tokens, 0 or more.",
                f"pass {flag} N with N >= 0, or leave it unset.",
            )
        cap_field = "rollout_max_response_len"
        if info.field_name == "eval_min_new_tokens" and info.data.get("eval_max_response_len"):
            cap_field = "eval_max_response_len"
        cap, cap_flag = info.data.get(cap_field), FLAGS[cap_field]
        if _is_int(cap) and value > cap:
            raise _problem(
                f"is {value}, above {cap_flag} {cap}; SGLang refuses a minimum above the maximum.",
                f"pass {flag} at most {cap}, or raise {cap_flag}.",
            )
        return value

    @field_validator("rollout_seed", mode="plain")
    @classmethod
    def _seed(cls, value: Any, info: ValidationInfo) -> Any:
        flag = FLAGS["rollout_seed"]
        if not _is_int(value):
            raise _problem(
                f"is {value!r}; it must be an integer.", f"pass {flag} N (Miles' default is 42)."
            )
        # Seeds reach the engine only under deterministic inference; otherwise one only shuffles.
        if info.data.get("deterministic_inference") and not 0 <= value <= MAX_SAMPLING_SEED:
            raise _problem(
                f"is {value}; with {FLAGS['deterministic_inference']} each rollout sends a "
                "sampling seed derived from it, and the SGLang router takes only seeds from 0 "
                f"to {MAX_SAMPLING_SEED} (an unsigned 64-bit value SGLang also accepts).",
                f"pass {flag} N with 0 <= N, well below 2**63 so that the seeds of later "
                "rollouts (N plus their position) still fit.",
            )
        return value

    @field_validator("rollout_max_context_len", "eval_max_context_len", mode="plain")
    @classmethod
    def _context_cap(cls, value: Any, info: ValidationInfo) -> Any:
        if value is not None and (not _is_int(value) or value < 2):
            raise _problem(
                f"is {value!r}, which leaves no room for a prompt and a response.",
                f"pass {FLAGS[str(info.field_name)]} N with N >= 2 (prompt plus response tokens), "
                "or leave it unset for the engine's own context length.",
            )
        return value

    @field_validator("rollout_max_prompt_len", "eval_max_prompt_len", mode="plain")
    @classmethod
    def _prompt_cap(cls, value: Any, info: ValidationInfo) -> Any:
        flag = FLAGS[str(info.field_name)]
        if value is None:
            return None
        if not _is_int(value) or value < 1:
            raise _problem(
                f"is {value!r}; it must be a positive integer.",
                f"pass {flag} N with N >= 1, or leave it unset for no cap on the first prompt.",
            )
        # Miles' eval context cap falls back to the training one, like the prompt it caps.
        context_field = "rollout_max_context_len"
        if info.field_name == "eval_max_prompt_len" and info.data.get("eval_max_context_len"):
            context_field = "eval_max_context_len"
        context, context_flag = info.data.get(context_field), FLAGS[context_field]
        if context is not None and value > context - 1:
            raise _problem(
                f"is {value}, which leaves no room to generate within {context_flag} {context}.",
                f"pass {flag} at most {context - 1} ({context_flag} minus one, so a first prompt "
                f"leaves room to generate), or raise {context_flag} above {value}.",
            )
        return value

    @field_validator("rollout_stop", mode="plain")
    @classmethod
    def _stop(cls, value: Any, info: ValidationInfo) -> Any:
        stop, flag = _as_tuple(value), FLAGS["rollout_stop"]
        if stop is None:
            return None
        if not all(isinstance(s, str) for s in stop):
            raise _problem(f"is {value!r}; stop strings are strings.", f"pass strings to {flag}.")
        if any(not s for s in stop):
            raise _problem(
                "holds an empty string.",
                f"drop the empty string from {flag}; an empty stop string would match at once.",
            )
        if len(stop) > MAX_STOP_STRINGS:
            raise _problem(
                f"has {len(stop)} strings; SGLang accepts at most {MAX_STOP_STRINGS}.",
                f"pass at most {MAX_STOP_STRINGS} strings to {flag} (SGLang refuses more); put "
                f"further stops in {FLAGS['rollout_stop_token_ids']}, which has no such limit.",
            )
        return stop

    @field_validator("rollout_stop_token_ids", mode="plain")
    @classmethod
    def _stop_token_ids(cls, value: Any, info: ValidationInfo) -> Any:
        ids = _as_tuple(value)
        if ids is not None and not all(_is_int(i) and i >= 0 for i in ids):
            raise _problem(
                f"is {value!r}; token ids are whole numbers.",
                f"pass token ids of 0 or more to {FLAGS['rollout_stop_token_ids']}.",
            )
        return ids

    @field_validator("hf_checkpoint", mode="plain")
    @classmethod
    def _tokenizer_source(cls, value: Any, info: ValidationInfo) -> Any:
        if not value and not info.data.get("sglang_tokenizer_path"):
            raise _problem(
                f"is not set (nor {FLAGS['sglang_tokenizer_path']}), so there is no tokenizer "
                "to render prompts with.",
                f"pass {FLAGS['hf_checkpoint']} (the policy checkpoint), or "
                f"{FLAGS['sglang_tokenizer_path']}.",
            )
        return value

    @field_validator("group_rm", mode="after")
    @classmethod
    def _group_reward_model(cls, value: bool, info: ValidationInfo) -> bool:
        flag, eval_flag = FLAGS["group_rm"], FLAGS["eval_interval"]
        if value and info.data.get("eval_interval") is not None:
            raise _problem(
                f"is set together with {eval_flag}, but a group reward model cannot score "
                "evaluation rollouts (Miles' own evaluation refuses it too).",
                f"drop {flag}, or {eval_flag}.",
            )
        if value and info.data.get("custom_rm_path") is None and not info.data.get("rm_type"):
            raise _problem(
                "is set without a reward model to run.",
                f"add {FLAGS['custom_rm_path']} (a function scoring a list of samples) or "
                f"{FLAGS['rm_type']}, or drop {flag} to keep the Verifiers rewards.",
            )
        return value

    @field_validator("reward_key", "eval_reward_key", "rm_type", mode="before")
    @classmethod
    def _blank_is_unset(cls, value: Any, info: ValidationInfo) -> Any:
        if info.field_name == "rm_type" and isinstance(value, str):
            value = value.strip()
        return value or None

    @field_validator("lora_rank", mode="before")
    @classmethod
    def _no_rank_is_zero(cls, value: Any) -> Any:
        return value or 0

    # Defined last, so it wraps every check above: read_options' second look at offending
    # options gives each of them Miles' default instead of checking it again.
    @field_validator("*", mode="wrap")
    @classmethod
    def _skip_offending(cls, value: Any, handler: Any, info: ValidationInfo) -> Any:
        if info.context and info.field_name in info.context["skip"]:
            return _default(str(info.field_name))
        return handler(value)

    @cached_property
    def train(self) -> SamplingOptions:
        # Every field but the last two is the option rollout_<name>.
        return SamplingOptions(
            **{f.name: getattr(self, f"rollout_{f.name}") for f in fields(SamplingOptions)[:-2]},
            chat_template_kwargs=self.apply_chat_template_kwargs,
            reward_key=self.reward_key,
        )

    @cached_property
    def eval(self) -> SamplingOptions:
        # Unlike the overrides, Miles takes the eval prompt cap and minimum as they are.
        overrides = {name: getattr(self, f"eval_{name}") for name in _EVAL_OVERRIDES}
        return replace(
            self.train,
            **{name: value for name, value in overrides.items() if value is not None},
            max_prompt_len=self.eval_max_prompt_len,
            min_new_tokens=self.eval_min_new_tokens,
            reward_key=self.eval_reward_key or self.reward_key,
        )

    @property
    def engine_count(self) -> int:
        return self.rollout_num_gpus // self.rollout_num_gpus_per_engine

    @property
    def max_concurrency(self) -> int:
        """In-flight requests the engines accept together (the built-in rollout's bound)."""
        return self.sglang_server_concurrency * self.engine_count

    @property
    def tokenizer_source(self) -> str | None:
        return self.sglang_tokenizer_path or self.hf_checkpoint

    @property
    def routes_by_key(self) -> bool:
        # Requests carry a routing key under these policies: one trajectory, one engine.
        return self.sglang_router_policy in ("consistent_hashing", "manual")

    @property
    def uses_miles_reward_model(self) -> bool:
        return self.custom_rm_path is not None or bool(self.rm_type)

    @property
    def train_enabled(self) -> bool:
        # An eval-only run is spelled --num-rollout 0.
        return self.num_rollout != 0

    @property
    def eval_enabled(self) -> bool:
        return self.eval_interval is not None

    @property
    def lora_enabled(self) -> bool:
        return self.lora_rank > 0 or self.lora_adapter_path is not None


def _default(name: str) -> Any:
    field = MilesOptions.model_fields[name]
    return None if field.is_required() else field.get_default(call_default_factory=True)


def miles_defaults() -> dict[str, Any]:
    """Miles' default for every attribute this module reads (a fresh copy, safe to mutate)."""
    return {_ATTRIBUTES.get(name, name): _default(name) for name in MilesOptions.model_fields}


def _problems(error: ValidationError) -> tuple[OptionProblem, ...]:
    found = []
    for detail in error.errors():
        flag = FLAGS[str(detail["loc"][0])]
        texts = detail.get("ctx") or {}
        if "fix" not in texts:  # pydantic's own type check, on an option read as it is
            texts = {
                "problem": f"is {detail['input']!r} ({detail['msg']}).",
                "fix": f"pass {flag} as Miles parses it, or leave it unset.",
            }
        kind: ProblemKind = "unsupported" if detail["type"] == "unsupported" else "invalid"
        found.append(OptionProblem(flag, kind, texts["problem"], texts["fix"]))
    return tuple(found)


def read_options(args: Any) -> tuple[MilesOptions | None, tuple[OptionProblem, ...]]:
    """The validated options of ``args`` and no problems; or every problem, with a view in which
    each offending option holds Miles' default (None when even that cannot be built)."""
    raw = {
        name: getattr(args, _ATTRIBUTES.get(name, name), _default(name))
        for name in MilesOptions.model_fields
    }
    skip: frozenset[str] = frozenset()
    problems: tuple[OptionProblem, ...] = ()
    # A default can in turn upset a check that reads it, so look again; each look skips more.
    for _ in range(len(raw)):
        try:
            return MilesOptions.model_validate(raw, context={"skip": skip}), problems
        except ValidationError as error:
            problems = problems or _problems(error)
            skip |= {str(detail["loc"][0]) for detail in error.errors()}
    return None, problems


def validate_options(args: Any) -> MilesOptions:
    """The validated options of ``args``, or an :class:`OptionsError` naming every offending
    flag with its fix."""
    options, problems = read_options(args)
    if problems or options is None:
        raise options_error(problems)
    return options
