"""Transport limits the engine would refuse, as Miles option problems with a fix for each.

:class:`~miles_verifiers._transport.TransportSettings` checks the per-mode limits (response,
context and first-prompt caps, stop strings and ids); this module turns each of its verdicts
into an :class:`~miles_verifiers._options.OptionProblem` naming the flag to change and how.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from miles_verifiers._options import OptionProblem
from miles_verifiers._transport.settings import MAX_STOP_STRINGS

# TransportSettings field -> the Miles flag that sets it, per mode.
TRANSPORT_FIELD_FLAGS: Mapping[str, Mapping[str, str]] = {
    "train": {
        "max_response_len": "--rollout-max-response-len",
        "context_len": "--rollout-max-context-len",
        "max_prompt_len": "--rollout-max-prompt-len",
        "stop": "--rollout-stop",
        "stop_token_ids": "--rollout-stop-token-ids",
    },
    "eval": {
        "max_response_len": "--eval-max-response-len",
        "context_len": "--eval-max-context-len",
        "max_prompt_len": "--eval-max-prompt-len",
        "stop": "--rollout-stop",
        "stop_token_ids": "--rollout-stop-token-ids",
    },
}

# Errors TransportSettings raises from its model check (no field of their own): the field at fault.
_MODEL_ERROR_FIELDS = {"context_too_small": "context_len", "prompt_cap_too_large": "max_prompt_len"}


def _fix(field: str, error_type: str, flags: Mapping[str, str], sampling: Any) -> str:
    flag = flags[field]
    context_flag = flags["context_len"]
    if error_type == "prompt_cap_too_large":
        room = sampling.max_context_len - 1
        return (
            f"pass {flag} at most {room} ({context_flag} minus one, so a first prompt leaves room "
            f"to generate), or raise {context_flag} above {sampling.max_prompt_len}."
        )
    if error_type == "too_many_stop_strings":
        return (
            f"pass at most {MAX_STOP_STRINGS} strings to {flag} (SGLang refuses more); put further "
            "stops in --rollout-stop-token-ids, which has no such limit."
        )
    if error_type == "empty_stop_string":
        return f"drop the empty string from {flag}; an empty stop string would match at once."
    if field == "context_len":
        return (
            f"pass {flag} N with N >= 2 (prompt plus response tokens), or leave it unset for the "
            "engine's own context length."
        )
    if field == "max_prompt_len":
        return f"pass {flag} N with N >= 1, or leave it unset for no cap on the first prompt."
    if field == "max_response_len":
        return f"pass {flag} N with N >= 1, the tokens sampled per model turn."
    if field == "stop_token_ids":
        return f"pass token ids of 0 or more to {flag}."
    return f"change {flag} to a value the engine accepts."


def transport_limit_problems(errors: list[Any], mode: str, sampling: Any) -> list[OptionProblem]:
    """One problem per entry of ``ValidationError.errors()`` from building ``mode``'s settings.

    ``sampling`` is the mode's :class:`~miles_verifiers._options.SamplingOptions` (for the values
    a fix quotes).
    """
    flags = TRANSPORT_FIELD_FLAGS[mode]
    problems = []
    for detail in errors:
        loc = detail.get("loc") or ()
        error_type = str(detail.get("type", ""))
        field = str(loc[0]) if loc else _MODEL_ERROR_FIELDS.get(error_type, "")
        message = f"is not usable for {mode}: {detail.get('msg', 'invalid value')}."
        if field not in flags:  # a setting no flag controls: the adapter's own mistake
            problems.append(
                OptionProblem(
                    f"transport setting {field or '(model)'}",
                    "invalid",
                    message,
                    "report this as a miles-verifiers bug, with the Miles flags used.",
                )
            )
            continue
        problems.append(
            OptionProblem(
                flags[field], "invalid", message, _fix(field, error_type, flags, sampling)
            )
        )
    return problems
