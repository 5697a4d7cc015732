"""Run in a fresh interpreter by the split-mode test: construct the rollout function with its
episodes in a worker process (``episode_worker_python`` set), make a train and an eval call
against the engine on the port given, and print which episode-side packages this (the
trainer) process imported, as JSON."""

from __future__ import annotations

import json
import os
import sys

EPISODE_SIDE = ("verifiers", "renderers", "transformers", "mcp")
# A worker starts (taskset, tokenizer) within the call: generous on a loaded machine.
CALL_S = 400.0


def imported() -> list[str]:
    return sorted(name for name in EPISODE_SIDE if name in sys.modules)


def main(port: int, config: str) -> None:
    from miles_verifiers import AdapterSettings, VerifiersRolloutFn
    from miles_verifiers.trainer.contract.compat import contract
    from miles_verifiers_testkit.miles import (
        MilesLoop,
        call_from_worker_thread,
        construct_rollout_fn,
        miles_args,
        point_at_engine,
    )

    os.environ["VERIFIERS_CONFIG"] = config
    types = contract()
    args = miles_args(
        rollout_batch_size=2,
        n_samples_per_prompt=2,
        eval_interval=1,
        apply_chat_template_kwargs={"enable_thinking": False},
        num_rollout=10,
    )
    seen = {"before": imported()}
    fn = construct_rollout_fn(
        VerifiersRolloutFn,
        types,
        args,
        settings=AdapterSettings(episode_worker_python=sys.executable),
    )
    seen["constructed"] = imported()
    point_at_engine(args, "127.0.0.1", port)
    loop = MilesLoop()
    try:
        train = call_from_worker_thread(fn, types.RolloutFnTrainInput(rollout_id=0), loop, CALL_S)
        evaluation = call_from_worker_thread(
            fn, types.RolloutFnEvalInput(rollout_id=0), loop, CALL_S
        )
    finally:
        fn.close()
        loop.close()
    seen["called"] = imported()
    seen["groups"] = len(train.samples)
    seen["eval_entries"] = sum(len(v["samples"]) for v in evaluation.data.values())
    seen["eval_samples_per_task"] = args.n_samples_per_eval_prompt
    print(json.dumps(seen))


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2])
