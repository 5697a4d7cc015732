"""Miles command-line options: which ones the Verifiers rollout function refuses, and a typed
view of the ones it reads.

Everything here is pure over an ``argparse.Namespace``-like object (anything with
attributes). An attribute the object lacks takes Miles' own default, so a hand-built
namespace behaves like a parsed Miles command line. Later code reads :class:`MilesOptions`
rather than ``args.*`` directly; only runtime fields that Miles fills in after construction
(router address, worker list) are left to be read live from ``args``.
"""

from __future__ import annotations

import copy
import json
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from miles_verifiers._errors import SetupError

# Router policies under which requests must carry a routing key (one trajectory, one engine).
KEYED_ROUTER_POLICIES = frozenset({"consistent_hashing", "manual"})

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


# -- reading a namespace with Miles' defaults -----------------------------------------------

_MILES_DEFAULTS: dict[str, Any] = {
    "rollout_global_dataset": True,
    "partial_rollout": False,
    "multimodal_keys": None,
    "chat_template_path": None,
    "use_opd": False,
    "use_rollout_routing_replay": False,
    "use_rollout_indexer_replay": False,
    "multi_lora": False,
    "hf_checkpoint": None,
    "sglang_tokenizer_path": None,
    "rollout_batch_size": None,
    "n_samples_per_prompt": 1,
    "n_samples_per_eval_prompt": 1,
    "over_sampling_batch_size": None,
    "rollout_shuffle": False,
    "rollout_seed": 42,
    "rollout_temperature": 1.0,
    "rollout_top_p": 1.0,
    "rollout_top_k": -1,
    "rollout_max_response_len": None,
    "rollout_max_context_len": None,
    "rollout_max_prompt_len": None,
    "rollout_min_new_tokens": None,
    "rollout_stop": None,
    "rollout_stop_token_ids": None,
    "rollout_skip_special_tokens": False,
    "apply_chat_template_kwargs": {},
    "eval_temperature": None,
    "eval_top_p": None,
    "eval_top_k": None,
    "eval_max_response_len": None,
    "eval_max_context_len": None,
    "eval_max_prompt_len": None,
    "eval_min_new_tokens": None,
    "dynamic_sampling_filter_path": None,
    "rollout_sample_filter_path": None,
    "rollout_all_samples_process_path": None,
    "group_rm": False,
    "custom_rm_path": None,
    "rm_type": None,
    "reward_key": None,
    "eval_reward_key": None,
    "rollout_num_gpus": None,
    "rollout_num_gpus_per_engine": 1,
    "sglang_server_concurrency": 512,
    "use_miles_router": False,
    "sglang_router_policy": None,
    "sglang_enable_deterministic_inference": False,
    "recompute_logprobs_via_prefill": False,
    "num_rollout": None,
    "eval_interval": None,
    "lora_rank": 0,
    "lora_adapter_path": None,
    "lora_train_only": False,
    "save": None,
    "save_interval": None,
    "load": None,
}


def miles_defaults() -> dict[str, Any]:
    """Miles' default for every attribute this module reads (a fresh copy, safe to mutate)."""
    return copy.deepcopy(_MILES_DEFAULTS)


def _get(args: Any, name: str) -> Any:
    return getattr(args, name, _MILES_DEFAULTS[name])


# -- rejected and required options ------------------------------------------------------------


@dataclass(frozen=True)
class _Rejection:
    attribute: str
    flag: str
    # "set": rejected when truthy; "given": rejected when not None; "unset": rejected when truthy
    # because the flag that turns it off is missing (store_false flags).
    when: Literal["set", "given", "unset"]
    problem: str
    fix: str

    def applies(self, args: Any) -> bool:
        value = _get(args, self.attribute)
        return value is not None if self.when == "given" else bool(value)


# In the order Miles' help lists them, so errors read the same way every time.
_REJECTIONS: tuple[_Rejection, ...] = (
    _Rejection(
        "rollout_global_dataset",
        "--disable-rollout-global-dataset",
        "unset",
        "is missing, so Miles would load its own prompt dataset; the tasks come from the "
        "Verifiers taskset of the environment config instead.",
        "pass --disable-rollout-global-dataset.",
    ),
    _Rejection(
        "partial_rollout",
        "--partial-rollout",
        "set",
        "is set, but a Verifiers episode runs tools, user simulators and sandboxes whose "
        "state cannot be parked mid-episode and resumed in a later rollout.",
        "remove --partial-rollout; unfinished groups are re-run from the start instead.",
    ),
    _Rejection(
        "multimodal_keys",
        "--multimodal-keys",
        "given",
        "is set, but the Verifiers transport carries text-only renderer input; images and "
        "other media are not sent to SGLang.",
        "remove --multimodal-keys.",
    ),
    _Rejection(
        "chat_template_path",
        "--chat-template-path",
        "given",
        "is set, but prompts are rendered by the renderers package from the checkpoint's own "
        "template, which cannot load a custom Jinja file (a non-default --tito-model also "
        "sets this path).",
        "remove --chat-template-path and pass template switches with "
        "--apply-chat-template-kwargs, e.g. '{\"enable_thinking\": false}'.",
    ),
    _Rejection(
        "use_opd",
        "--use-opd",
        "set",
        "is set, but on-policy distillation needs teacher log-probs per token, which the "
        "Verifiers transport does not request.",
        "remove --use-opd.",
    ),
    _Rejection(
        "use_rollout_routing_replay",
        "--use-rollout-routing-replay",
        "set",
        "is set, but the Verifiers transport does not ask SGLang for routed experts, so there "
        "is nothing to replay.",
        "remove --use-rollout-routing-replay.",
    ),
    _Rejection(
        "use_rollout_indexer_replay",
        "--use-rollout-indexer-replay",
        "set",
        "is set, but the Verifiers transport does not ask SGLang for indexer top-k, so there "
        "is nothing to replay.",
        "remove --use-rollout-indexer-replay.",
    ),
    _Rejection(
        "multi_lora",
        "--multi-lora",
        "set",
        "is set, but the Verifiers transport sends every request to a single LoRA adapter and "
        "does not record which slot produced a sample.",
        "remove --multi-lora (a single LoRA via --lora-rank works).",
    ),
)


def _unsupported(args: Any) -> list[OptionProblem]:
    return [
        OptionProblem(r.flag, "unsupported", r.problem, r.fix)
        for r in _REJECTIONS
        if r.applies(args)
    ]


def _positive(args: Any, attribute: str, flag: str, fix: str) -> list[OptionProblem]:
    value = _get(args, attribute)
    if value is None:
        return [OptionProblem(flag, "invalid", "is not set.", fix)]
    if not isinstance(value, int) or value < 1:
        return [
            OptionProblem(flag, "invalid", f"is {value!r}; it must be a positive integer.", fix)
        ]
    return []


def _invalid(args: Any) -> list[OptionProblem]:
    problems: list[OptionProblem] = []
    problems += _positive(
        args,
        "rollout_max_response_len",
        "--rollout-max-response-len",
        "pass --rollout-max-response-len N; it caps the tokens sampled per model turn and "
        "has no default.",
    )
    problems += _positive(
        args,
        "rollout_batch_size",
        "--rollout-batch-size",
        "pass --rollout-batch-size N, the number of task groups per training step.",
    )
    problems += _positive(
        args,
        "n_samples_per_prompt",
        "--n-samples-per-prompt",
        "pass --n-samples-per-prompt N (N >= 1), the rollouts per task.",
    )
    problems += _positive(
        args,
        "n_samples_per_eval_prompt",
        "--n-samples-per-eval-prompt",
        "pass --n-samples-per-eval-prompt N (N >= 1), the rollouts per evaluation task.",
    )
    problems += _positive(
        args,
        "sglang_server_concurrency",
        "--sglang-server-concurrency",
        "pass --sglang-server-concurrency N (N >= 1), the in-flight requests per engine.",
    )
    batch = _get(args, "rollout_batch_size")
    over = _get(args, "over_sampling_batch_size")
    if over is not None and isinstance(batch, int) and batch >= 1:
        if not isinstance(over, int) or over < batch:
            problems.append(
                OptionProblem(
                    "--over-sampling-batch-size",
                    "invalid",
                    f"is {over!r}, below --rollout-batch-size {batch}.",
                    "pass --over-sampling-batch-size at least --rollout-batch-size, or leave it "
                    "unset to use the batch size.",
                )
            )
    if _get(args, "save_interval") is not None:
        problems += _positive(
            args,
            "save_interval",
            "--save-interval",
            "pass --save-interval N (N >= 1), the rollouts between checkpoints, or leave it unset.",
        )
    problems += _engine_count_problems(args)
    try:
        _chat_template_kwargs(_get(args, "apply_chat_template_kwargs"))
    except ValueError as error:
        problems.append(
            OptionProblem(
                "--apply-chat-template-kwargs",
                "invalid",
                f"cannot be read as a JSON object ({error}).",
                "pass a JSON object, e.g. '{\"enable_thinking\": false}'.",
            )
        )
    return problems


def _engine_count_problems(args: Any) -> list[OptionProblem]:
    gpus = _get(args, "rollout_num_gpus")
    per_engine = _get(args, "rollout_num_gpus_per_engine")
    if per_engine is None or not isinstance(per_engine, int) or per_engine < 1:
        return [
            OptionProblem(
                "--rollout-num-gpus-per-engine",
                "invalid",
                f"is {per_engine!r}; the number of SGLang engines cannot be computed.",
                "pass --rollout-num-gpus-per-engine N (N >= 1, the GPUs of one engine).",
            )
        ]
    if gpus is None:
        return [
            OptionProblem(
                "--rollout-num-gpus",
                "invalid",
                "is not set, so the number of SGLang engines (and with it the request "
                "concurrency) cannot be computed.",
                "pass --rollout-num-gpus N, or --colocate, which derives it from the actor GPUs.",
            )
        ]
    if not isinstance(gpus, int) or gpus < per_engine:
        return [
            OptionProblem(
                "--rollout-num-gpus",
                "invalid",
                f"is {gpus!r}, fewer than --rollout-num-gpus-per-engine {per_engine}, which "
                "leaves zero SGLang engines.",
                "pass --rollout-num-gpus at least --rollout-num-gpus-per-engine.",
            )
        ]
    return []


# -- sampling values the engine and the router accept ------------------------------------------

# sglang-router reads sampling_seed as u64 while SGLang itself takes a signed 64-bit int, so a
# seed both accept lies in [0, 2**63 - 1]. top_k is an i32 and min_new_tokens a u32 there.
MAX_SAMPLING_SEED = 2**63 - 1
_MAX_TOP_K = 2**31 - 1
_MAX_U32 = 2**32 - 1


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _real(value: Any) -> float | None:
    """``value`` as a finite float, or None when it is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    number = float(value)
    return number if math.isfinite(number) else None


def _temperature_problem(value: Any, flag: str) -> OptionProblem | None:
    number = _real(value)
    if number is not None and number >= 0:
        return None
    return OptionProblem(
        flag,
        "invalid",
        f"is {value!r}; SGLang samples only with a finite temperature of 0 or more.",
        f"pass {flag} T with T >= 0 (0 is greedy, 1.0 samples from the model as it is).",
    )


def _top_p_problem(value: Any, flag: str) -> OptionProblem | None:
    number = _real(value)
    if number is not None and 0 < number <= 1:
        return None
    return OptionProblem(
        flag,
        "invalid",
        f"is {value!r}; SGLang accepts a nucleus threshold above 0 and at most 1.",
        f"pass {flag} P with 0 < P <= 1 (1.0 turns nucleus sampling off).",
    )


def _top_k_problem(value: Any, flag: str) -> OptionProblem | None:
    if _is_int(value) and (value == -1 or 1 <= value <= _MAX_TOP_K):
        return None
    return OptionProblem(
        flag,
        "invalid",
        f"is {value!r}; SGLang takes -1 (no top-k) or a positive integer that fits 32 bits.",
        f"pass {flag} -1 to sample from the whole vocabulary, or {flag} K with K >= 1.",
    )


def _min_new_tokens_problem(value: Any, flag: str, cap: Any, cap_flag: str) -> OptionProblem | None:
    if not _is_int(value) or not 0 <= value <= _MAX_U32:
        return OptionProblem(
            flag,
            "invalid",
            f"is {value!r}; it must be a whole number of tokens, 0 or more.",
            f"pass {flag} N with N >= 0, or leave it unset.",
        )
    if _is_int(cap) and value > cap:
        return OptionProblem(
            flag,
            "invalid",
            f"is {value}, above {cap_flag} {cap}; SGLang refuses a minimum above the maximum.",
            f"pass {flag} at most {cap}, or raise {cap_flag}.",
        )
    return None


def _seed_problems(args: Any) -> list[OptionProblem]:
    seed = _get(args, "rollout_seed")
    if not _is_int(seed):
        return [
            OptionProblem(
                "--rollout-seed",
                "invalid",
                f"is {seed!r}; it must be an integer.",
                "pass --rollout-seed N (Miles' default is 42).",
            )
        ]
    # Seeds reach the engine only under deterministic inference; otherwise one only shuffles.
    if _get(args, "sglang_enable_deterministic_inference") and not 0 <= seed <= MAX_SAMPLING_SEED:
        return [
            OptionProblem(
                "--rollout-seed",
                "invalid",
                f"is {seed}; with --sglang-enable-deterministic-inference each rollout sends a "
                "sampling seed derived from it, and the SGLang router takes only seeds from 0 "
                f"to {MAX_SAMPLING_SEED} (an unsigned 64-bit value SGLang also accepts).",
                "pass --rollout-seed N with 0 <= N, well below 2**63 so that the seeds of "
                "later rollouts (N plus their position) still fit.",
            )
        ]
    return []


def _sampling_problems(args: Any) -> list[OptionProblem]:
    """Sampling values SGLang or the router would refuse on every request, found up front."""
    found: list[OptionProblem | None] = [
        _temperature_problem(_get(args, "rollout_temperature"), "--rollout-temperature"),
        _top_p_problem(_get(args, "rollout_top_p"), "--rollout-top-p"),
    ]
    top_k = _get(args, "rollout_top_k")
    if top_k is not None:
        found.append(_top_k_problem(top_k, "--rollout-top-k"))
    for attribute, check in (
        ("eval_temperature", _temperature_problem),
        ("eval_top_p", _top_p_problem),
        ("eval_top_k", _top_k_problem),
    ):
        value = _get(args, attribute)
        if value is not None:
            found.append(check(value, "--" + attribute.replace("_", "-")))
    train_cap = _get(args, "rollout_max_response_len")
    eval_cap = _get(args, "eval_max_response_len")
    if eval_cap is not None and (not _is_int(eval_cap) or not 1 <= eval_cap <= _MAX_U32):
        found.append(
            OptionProblem(
                "--eval-max-response-len",
                "invalid",
                f"is {eval_cap!r}; it must be a positive integer.",
                "pass --eval-max-response-len N (N >= 1), or leave it unset to use "
                "--rollout-max-response-len.",
            )
        )
    for attribute, cap, cap_flag in (
        ("rollout_min_new_tokens", train_cap, "--rollout-max-response-len"),
        (
            "eval_min_new_tokens",
            train_cap if eval_cap is None else eval_cap,
            "--rollout-max-response-len" if eval_cap is None else "--eval-max-response-len",
        ),
    ):
        value = _get(args, attribute)
        # Miles has no flag for the training minimum; only a hand-set attribute can carry one.
        label = (
            "args.rollout_min_new_tokens"
            if attribute.startswith("rollout")
            else "--eval-min-new-tokens"
        )
        if value is not None:
            found.append(_min_new_tokens_problem(value, label, cap, cap_flag))
    return [p for p in found if p is not None] + _seed_problems(args)


def find_option_problems(args: Any) -> list[OptionProblem]:
    """Every unsupported and every invalid option, unsupported first."""
    return _unsupported(args) + _invalid(args) + _sampling_problems(args)


# -- the typed view -------------------------------------------------------------------------


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


@dataclass(frozen=True)
class MilesOptions:
    """What the Verifiers rollout function reads from Miles' arguments, validated."""

    hf_checkpoint: str | None
    sglang_tokenizer_path: str | None
    rollout_batch_size: int
    n_samples_per_prompt: int
    n_samples_per_eval_prompt: int
    over_sampling_batch_size: int
    rollout_shuffle: bool
    rollout_seed: int
    train: SamplingOptions
    eval: SamplingOptions
    dynamic_sampling_filter_path: str | None
    rollout_sample_filter_path: str | None
    rollout_all_samples_process_path: str | None
    group_rm: bool
    custom_rm_path: str | None
    rm_type: str | None
    rollout_num_gpus: int
    rollout_num_gpus_per_engine: int
    sglang_server_concurrency: int
    use_miles_router: bool
    sglang_router_policy: str | None
    deterministic_inference: bool
    recompute_logprobs_via_prefill: bool
    num_rollout: int | None
    eval_interval: int | None
    lora_rank: int
    lora_adapter_path: str | None
    lora_train_only: bool
    save_dir: str | None
    # Miles checkpoints every --save-interval rollouts; the scheduler keeps those resume points.
    save_interval: int | None
    load_dir: str | None

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
        return self.sglang_router_policy in KEYED_ROUTER_POLICIES

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


def _as_tuple(value: Any) -> tuple[Any, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, int)):
        return (value,)
    return tuple(value)


def _chat_template_kwargs(value: Any) -> Mapping[str, Any]:
    # Miles parses the flag with json.loads; accept the raw string too for hand-built args.
    if value is None or value == "":
        return {}
    if isinstance(value, str):
        value = json.loads(value)
    if not isinstance(value, Mapping):
        raise ValueError(f"expected a JSON object, got {type(value).__name__}")
    return dict(value)


def _override(value: Any, fallback: Any) -> Any:
    return fallback if value is None else value


def _train_sampling(args: Any) -> SamplingOptions:
    return SamplingOptions(
        temperature=float(_get(args, "rollout_temperature")),
        top_p=float(_get(args, "rollout_top_p")),
        top_k=_get(args, "rollout_top_k"),
        max_response_len=_get(args, "rollout_max_response_len"),
        max_context_len=_get(args, "rollout_max_context_len"),
        max_prompt_len=_get(args, "rollout_max_prompt_len"),
        min_new_tokens=_get(args, "rollout_min_new_tokens"),
        stop=_as_tuple(_get(args, "rollout_stop")),
        stop_token_ids=_as_tuple(_get(args, "rollout_stop_token_ids")),
        skip_special_tokens=bool(_get(args, "rollout_skip_special_tokens")),
        chat_template_kwargs=_chat_template_kwargs(_get(args, "apply_chat_template_kwargs")),
        reward_key=_get(args, "reward_key") or None,
    )


def _eval_sampling(args: Any, train: SamplingOptions) -> SamplingOptions:
    # Miles' eval semantics: the eval_* sampling values override only when set, while the
    # prompt cap and min-new-tokens are taken from eval_* as they are (None included).
    return SamplingOptions(
        temperature=float(_override(_get(args, "eval_temperature"), train.temperature)),
        top_p=float(_override(_get(args, "eval_top_p"), train.top_p)),
        top_k=_override(_get(args, "eval_top_k"), train.top_k),
        max_response_len=_override(_get(args, "eval_max_response_len"), train.max_response_len),
        max_context_len=_override(_get(args, "eval_max_context_len"), train.max_context_len),
        max_prompt_len=_get(args, "eval_max_prompt_len"),
        min_new_tokens=_get(args, "eval_min_new_tokens"),
        stop=train.stop,
        stop_token_ids=train.stop_token_ids,
        skip_special_tokens=train.skip_special_tokens,
        chat_template_kwargs=train.chat_template_kwargs,
        reward_key=_get(args, "eval_reward_key") or train.reward_key,
    )


def build_options(args: Any) -> MilesOptions:
    """The typed view of ``args``. Call :func:`validate_options` instead unless ``args`` is
    already known to be valid."""
    train = _train_sampling(args)
    batch = _get(args, "rollout_batch_size")
    return MilesOptions(
        hf_checkpoint=_get(args, "hf_checkpoint"),
        sglang_tokenizer_path=_get(args, "sglang_tokenizer_path"),
        rollout_batch_size=batch,
        n_samples_per_prompt=_get(args, "n_samples_per_prompt"),
        n_samples_per_eval_prompt=_get(args, "n_samples_per_eval_prompt"),
        over_sampling_batch_size=_override(_get(args, "over_sampling_batch_size"), batch),
        rollout_shuffle=bool(_get(args, "rollout_shuffle")),
        rollout_seed=_get(args, "rollout_seed"),
        train=train,
        eval=_eval_sampling(args, train),
        dynamic_sampling_filter_path=_get(args, "dynamic_sampling_filter_path"),
        rollout_sample_filter_path=_get(args, "rollout_sample_filter_path"),
        rollout_all_samples_process_path=_get(args, "rollout_all_samples_process_path"),
        group_rm=bool(_get(args, "group_rm")),
        custom_rm_path=_get(args, "custom_rm_path"),
        rm_type=(_get(args, "rm_type") or "").strip() or None,
        rollout_num_gpus=_get(args, "rollout_num_gpus"),
        rollout_num_gpus_per_engine=_get(args, "rollout_num_gpus_per_engine"),
        sglang_server_concurrency=_get(args, "sglang_server_concurrency"),
        use_miles_router=bool(_get(args, "use_miles_router")),
        sglang_router_policy=_get(args, "sglang_router_policy"),
        deterministic_inference=bool(_get(args, "sglang_enable_deterministic_inference")),
        recompute_logprobs_via_prefill=bool(_get(args, "recompute_logprobs_via_prefill")),
        num_rollout=_get(args, "num_rollout"),
        eval_interval=_get(args, "eval_interval"),
        lora_rank=int(_get(args, "lora_rank") or 0),
        lora_adapter_path=_get(args, "lora_adapter_path"),
        lora_train_only=bool(_get(args, "lora_train_only")),
        save_dir=_get(args, "save"),
        save_interval=_get(args, "save_interval"),
        load_dir=_get(args, "load"),
    )


def validate_options(args: Any) -> MilesOptions:
    """Check ``args`` and return the typed view, or raise an :class:`OptionsError` naming every
    offending flag with its fix (:class:`UnsupportedOptionsError` when any of them asks for an
    unsupported feature, else :class:`InvalidOptionsError`)."""
    problems = find_option_problems(args)
    if any(p.kind == "unsupported" for p in problems):
        raise UnsupportedOptionsError(problems)
    if problems:
        raise InvalidOptionsError(problems)
    return build_options(args)
