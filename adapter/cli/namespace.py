"""Build the ``argparse.Namespace`` Miles would hand the rollout function: Miles' defaults,
what its Verifiers launcher passes, this runner's defaults, the typed flags, the passthrough
flags (lowest first); then what Miles' argument post-processing derives.
"""

from __future__ import annotations

import argparse
import copy
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from miles_verifiers.errors import CommandLineError
from miles_verifiers.trainer.miles_flags import MILES_FLAGS
from miles_verifiers.trainer.options import miles_defaults

# Defaults of what Miles' training loop reads to schedule calls (the adapter never reads them).
SCHEDULE_DEFAULTS: Mapping[str, Any] = {
    row.dest: row.default for row in MILES_FLAGS if row.field is None
}

# Miles' Verifiers launcher always turns the global dataset off: tasks come from the taskset.
LAUNCHER_SETTINGS: Mapping[str, Any] = {"rollout_global_dataset": False}

# The fixture tokenizers and the loopback engine are built for this checkpoint.
DEFAULT_CHECKPOINT = "Qwen/Qwen3-0.6B"
RUNNER_DEFAULTS: Mapping[str, Any] = {"hf_checkpoint": DEFAULT_CHECKPOINT}

# Eval-dataset placeholder Miles' launcher passes so that Miles' "eval datasets must be set
# when --eval-interval is" assertion holds; the taskset supplies the real eval tasks.
EVAL_PLACEHOLDER_NAME = "verifiers-taskset"


class NamespaceError(CommandLineError, ValueError):
    """Flags that Miles' own argument checks would refuse."""


def derive_miles_values(values: dict[str, Any]) -> None:
    """Fill in what Miles derives after parsing, in place; refuse a first-prompt cap at or
    above the context cap, as Miles asserts."""
    if values.get("over_sampling_batch_size") is None:
        values["over_sampling_batch_size"] = values.get("rollout_batch_size")
    if not values.get("eval_reward_key"):
        values["eval_reward_key"] = values.get("reward_key")
    if values.get("eval_max_context_len") is None:
        values["eval_max_context_len"] = values.get("rollout_max_context_len")
    context = values.get("rollout_max_context_len")
    if isinstance(context, int) and not isinstance(context, bool):
        prompt = values.get("rollout_max_prompt_len")
        if prompt is None:
            values["rollout_max_prompt_len"] = context - 1
        elif isinstance(prompt, int) and prompt > context - 1:
            raise NamespaceError(
                f"--rollout-max-prompt-len {prompt} leaves no room to generate within "
                f"--rollout-max-context-len {context}. Fix: pass --rollout-max-prompt-len "
                f"{context - 1} or less, or raise --rollout-max-context-len."
            )


def build_namespace(
    given: Mapping[str, Any],
    passthrough: Mapping[str, Any] | None = None,
    *,
    config_path: Path | None = None,
    preset: Mapping[str, Any] | None = None,
) -> argparse.Namespace:
    """The namespace Miles would build for these flags (``passthrough`` wins over ``given``,
    ``preset`` sits below both; ``config_path`` fills the launcher's eval placeholder)."""
    values: dict[str, Any] = miles_defaults()
    for layer in (SCHEDULE_DEFAULTS, LAUNCHER_SETTINGS, RUNNER_DEFAULTS, preset or {}, given):
        values.update(copy.deepcopy(dict(layer)))
    values.update(copy.deepcopy(dict(passthrough or {})))
    # Miles requires --rollout-num-gpus to place engines; this runner talks to exactly one.
    if values.get("rollout_num_gpus") is None:
        per_engine = values.get("rollout_num_gpus_per_engine")
        values["rollout_num_gpus"] = per_engine if isinstance(per_engine, int) else 1
    derive_miles_values(values)
    if values.get("eval_interval") is not None and not values.get("eval_prompt_data"):
        values["eval_prompt_data"] = [EVAL_PLACEHOLDER_NAME, str(config_path or "")]
    return argparse.Namespace(**values)
