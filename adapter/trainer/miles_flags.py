"""Miles' flags, in one table: the options model, ``check`` and the command line all read it.

A row: the flag, the ``args`` attribute it sets, its value type, its ``help`` (None: not typed
on the command line, where other flags pass through as they are), the MilesOptions field built
from it (whose default is Miles'), and Miles' ``default`` where no field reads it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

FlagKind = Literal["int", "float", "str", "json", "json_object", "true", "false", "ints", "strs"]


@dataclass(frozen=True)
class MilesFlag:
    # Without the dashes; None for an attribute Miles reads but has no flag for.
    flag: str | None
    dest: str
    kind: FlagKind
    help: str | None
    field: str | None
    default: Any = None

    @property
    def option(self) -> str:
        """How a message names it: the flag as typed, else the attribute."""
        return f"--{self.flag}" if self.flag else f"args.{self.dest}"


def _flag(
    flag: str, kind: FlagKind, help: str | None = None, field: str = "", dest: str = ""
) -> MilesFlag:
    """A row whose attribute (unless ``dest``) and field (unless ``field``) are the flag's name."""
    attribute = dest or flag.replace("-", "_")
    return MilesFlag(flag, attribute, kind, help, field or attribute)


def _typed(flag: str, kind: FlagKind, help: str, default: Any = None) -> MilesFlag:
    """A row the command line types but no options field reads."""
    return MilesFlag(flag, flag.replace("-", "_"), kind, help, None, default)


MILES_FLAGS: tuple[MilesFlag, ...] = (
    # batch shape and schedule
    _flag("rollout-batch-size", "int", "task groups per training rollout (Miles requires it)"),
    _flag("n-samples-per-prompt", "int", "rollouts per training task (Miles default 1)"),
    _flag(
        "over-sampling-batch-size",
        "int",
        "task groups started per refill (default: the batch size)",
    ),
    _flag("num-rollout", "int", "training rollouts to run (rollout ids start..num-rollout-1)"),
    _typed("start-rollout-id", "int", "first rollout id (Miles: from the checkpoint, else 0)"),
    _flag("eval-interval", "int", "evaluate every N rollouts, and once before training"),
    _typed("skip-eval-before-train", "true", "skip the evaluation before the first rollout", False),
    MilesFlag("eval-prompt-data", "eval_prompt_data", "strs", None, None),
    _flag("n-samples-per-eval-prompt", "int", "rollouts per evaluation task (Miles default 1)"),
    _flag("rollout-shuffle", "true", "shuffle the taskset order"),
    _flag("rollout-seed", "int", "seed for shuffling and per-rollout sampling seeds (42)"),
    _flag("save-interval", "int"),
    # sampling limits
    _flag("rollout-max-response-len", "int", "max tokens sampled per model turn (required)"),
    _flag("rollout-max-prompt-len", "int", "cap on a trajectory's first prompt, in tokens"),
    _flag("rollout-max-context-len", "int", "cap on prompt plus response tokens per request"),
    _flag("rollout-temperature", "float", "sampling temperature (1.0)"),
    _flag("rollout-top-p", "float", "nucleus sampling threshold (1.0)"),
    _flag("rollout-top-k", "int", "top-k sampling, -1 for off (-1)"),
    _flag("rollout-stop", "strs", "stop strings"),
    _flag("rollout-stop-token-ids", "ints", "stop token ids, added to the renderer's"),
    _flag("rollout-skip-special-tokens", "true", "strip special tokens from decoded text"),
    # Miles has no flag for the training minimum; only a hand-set attribute can carry one.
    MilesFlag(None, "rollout_min_new_tokens", "int", None, "rollout_min_new_tokens"),
    _flag("eval-temperature", "float", "evaluation temperature (default: training's)"),
    _flag("eval-top-p", "float", "evaluation top-p (default: training's)"),
    _flag("eval-top-k", "int", "evaluation top-k (default: training's)"),
    _flag("eval-max-response-len", "int", "evaluation response cap (default: training's)"),
    _flag("eval-max-context-len", "int", "evaluation context cap (default: training's)"),
    _flag("eval-max-prompt-len", "int", "evaluation first-prompt cap (default: none)"),
    _flag("eval-min-new-tokens", "int", "evaluation minimum new tokens"),
    _flag(
        "apply-chat-template-kwargs",
        "json_object",
        "chat template switches as a JSON object, e.g. '{\"enable_thinking\": false}'",
    ),
    # model and engines
    _flag("hf-checkpoint", "str", "model id or path; names the renderer and tokenizer"),
    _flag("sglang-tokenizer-path", "str", "tokenizer to use instead of the checkpoint's"),
    _flag("sglang-server-concurrency", "int", "in-flight requests per engine (512)"),
    _flag("rollout-num-gpus", "int", "GPUs for rollout engines (Miles requires it)"),
    _flag("rollout-num-gpus-per-engine", "int", "GPUs per SGLang engine (1)"),
    _typed("sglang-router-ip", "str", "router host (normally filled in once engines start)"),
    _typed("sglang-router-port", "int", "router port (normally filled in once engines start)"),
    _flag("sglang-router-policy", "str", "router policy, e.g. consistent_hashing"),
    _flag("use-miles-router", "true", "the router is Miles' own"),
    _flag(
        "sglang-enable-deterministic-inference",
        "true",
        "send a per-rollout sampling seed (deterministic SGLang)",
        "deterministic_inference",
    ),
    _flag("recompute-logprobs-via-prefill", "true"),
    # rewards and filters
    _flag("reward-key", "str", "key of a dict-shaped reward to train on"),
    _flag("eval-reward-key", "str", "key of a dict-shaped reward to evaluate on"),
    _flag("custom-rm-path", "str", "Miles reward function replacing the Verifiers reward"),
    _flag("rm-type", "str", "Miles rule-based reward model replacing the Verifiers reward"),
    _flag("group-rm", "true", "score a whole group with one Miles reward call"),
    _flag("dynamic-sampling-filter-path", "str", "group filter, module.path.function"),
    _flag("rollout-sample-filter-path", "str", "post-rollout sample filter"),
    _flag("rollout-all-samples-process-path", "str", "post-rollout hook over all groups"),
    # run bookkeeping
    _flag(
        "save", "str", "checkpoint directory; the adapter keeps its task cursor there", "save_dir"
    ),
    _flag("load", "str", None, "load_dir"),
    _typed(
        "rollout-function-path",
        "str",
        "rollout function or class to load (default: miles_verifiers.VerifiersRolloutFn)",
    ),
    # options the rollout function refuses; typed so that `check` can name them
    _flag(
        "disable-rollout-global-dataset",
        "false",
        "do not load Miles' prompt dataset (always set here, as Miles' Verifiers launcher does)",
        dest="rollout_global_dataset",
    ),
    _flag("partial-rollout", "true", "resume unfinished samples later (not supported)"),
    _flag("multimodal-keys", "json", "multimodal input keys as JSON (not supported)"),
    _flag("chat-template-path", "str", "custom Jinja chat template (not supported)"),
    _flag("use-opd", "true", "on-policy distillation (not supported)"),
    _flag("use-rollout-routing-replay", "true", "routed-expert replay (not supported)"),
    _flag("use-rollout-indexer-replay", "true", "indexer top-k replay (not supported)"),
    _flag("multi-lora", "true", "several LoRA adapters at once (not supported)"),
    _flag("lora-rank", "int", "LoRA rank; > 0 sends requests to the LoRA adapter"),
    _flag("lora-adapter-path", "str", "initial LoRA adapter"),
    _flag("lora-train-only", "true"),
)

# Every other flag Miles' parser defines (``miles/utils/arguments.py`` and the SGLang router
# and server options it adds, as of mid-2026). Miles also accepts every Megatron flag and every
# SGLang server option under ``--sglang-``; those do nothing in a rollout-only run, so they are
# not listed: ``--extra-miles-flag NAME`` lets one through, as it does a newer Miles' flag.
# Miles refuses a flag it does not define, so the command line does too.
_OTHER_FLAG_NAMES = """
    actor-num-gpus-per-node actor-num-nodes advantage-estimator allgather-cp
    allow-partial-train-step apply-chat-template async-data-buffer-capacity-factor
    async-max-concurrent-samples async-save async-unused-samples-handler attention-dropout
    balance-by-flops balance-data buffer-filter-path calculate-per-token-loss
    check-lora-weight-equal check-rematerialize-param-from-master-weight
    check-weight-update-allow-quant-error check-weight-update-equal check-weight-update-selector
    check-weight-update-skip-list ci-check-model-hash ci-disable-kl-checker
    ci-disable-logprobs-checker ci-disable-weight-update-checker ci-ft-test-actions
    ci-inject-rollout-data-min-match-ratio ci-inject-rollout-data-path
    ci-inject-rollout-data-start-rollout-id ci-load-grad-norm ci-metric-checker-key
    ci-metric-checker-threshold ci-save-grad-norm ci-save-model-hash ci-test clip-grad colocate
    control-server-port critic-load critic-lr critic-lr-warmup-iters critic-num-gpus-per-node
    critic-num-nodes critic-save custom-async-data-buffer-path custom-config-path
    custom-convert-samples-to-train-data-path custom-eval-rollout-log-function-path
    custom-generate-function-path custom-loss-function-path
    custom-megatron-before-log-prob-hook-path custom-megatron-before-train-step-hook-path
    custom-megatron-init-path custom-megatron-post-save-hook-path custom-model-provider-path
    custom-pg-loss-reducer-function-path custom-reward-post-process-path
    custom-rollout-log-function-path custom-tis-function-path custom-update-weight-post-write-path
    data-pad-size-multiplier data-source-path debug-deterministic-collective debug-disable-optimizer
    debug-exit-after-rollout debug-rollout-only debug-skip-weight-update debug-train-only
    delay-split-train-data-by-dp disable-compute-advantages-and-returns
    disable-grpo-std-normalization disable-rewards-normalization disable-rollout-trim-samples
    disable-wandb-random-suffix distributed-backend distributed-timeout-minutes
    dsa-attention-backend dump-details dumper-dir dumper-enable dumper-fwd-bwd dumper-fwd-only
    dumper-inference dumper-source-patcher-config-inference dumper-source-patcher-config-train
    enable-event-analyzer enable-mtp-training enable-witness entropy-coef env-report eps-clip
    eps-clip-c eps-clip-high eval-config eval-function-path eval-hf-dir eval-input-key
    eval-keep-snapshots eval-label-key eval-max-in-flight eval-num-gpus eval-num-gpus-per-engine
    eval-overflow-policy eval-tool-key exclude-modules experts-shared-outer-loras extra-env-vars
    extra-high-precision-layers-hf extra-high-precision-layers-megatron fetch-trajectory-retry-times
    freeze-indexer ft-components fully-async gamma get-mismatch-metrics global-batch-size
    hidden-dropout http-proxy indep-dp input-key keep-old-actor kl-coef kl-loss-coef kl-loss-type
    label-key lambd linear-attention-backend load-debug-rollout-data
    load-debug-rollout-data-subsample log-correct-samples log-multi-turn log-passrate
    log-probs-chunk-size log-probs-max-tokens-per-gpu log-reward-category lora-alpha
    lora-base-cpu-backup lora-dropout lora-sync-from-tensor lora-type loss-mask-type loss-type
    low-memory-resume lr mask-offpolicy-in-partial-rollout max-tokens-per-gpu max-weight-staleness
    megatron-to-hf-mode memory-recorder memory-snapshot-dir memory-snapshot-num-steps metadata-key
    mfu-peak-tflops micro-batch-size miles-dsa-topk-backend
    miles-router-health-check-failure-threshold miles-router-max-connections miles-router-timeout
    min-batch-collection-ratio mini-ft-controller-enable mini-ft-controller-poll-interval
    mini-ft-controller-resume-delay mlflow-experiment-name mlflow-run-id mlflow-run-name
    mlflow-tracking-uri model-name moe-input-jitter-eps moe-router-force-biased
    moe-router-force-load-balancing mooncake-replica-num mooncake-store-init-kwargs
    mtp-loss-scaling-factor mtp-num-layers multi-lora-adapter multi-lora-api-port
    multi-lora-backend-path multi-lora-disable-service-mode multi-lora-http-server-path
    multi-lora-idle-poll-s multi-lora-max-adapter-global-batch-size multi-lora-max-coalesce-wait-s
    multi-lora-max-empty-wait-s multi-lora-n-adapters no-save-optim
    no-sglang-lora-use-virtual-experts normalize-advantages num-critic-only-steps num-epoch
    num-gpus-per-node num-steps-per-rollout object-store-backend observe-training-entropy offload
    offload-rollout offload-rollout-level offload-train offload-train-disk-chunk-mb
    offload-train-disk-dir offload-train-target opd-kl-coef opd-log-prob-top-k
    opd-reward-weight-mode opd-teacher-ckpt-step opd-teacher-key opd-teacher-load opd-teacher-urls
    opd-top-k-strategy opd-topk-per-position opd-type opsm-delta p2p-transfer-num-workers
    p2p-transfer-timeout padded-vocab-size pause-generation-mode pin-rollout-manager-to-head
    prefill-num-servers profile-target prometheus-port prometheus-run-name prompt-data qkv-format
    recompute-loss-function ref-ckpt-step ref-load ref-update-interval
    rematerialize-param-from-master-weight reset-optimizer-states rm-url rollout-buffer-url
    rollout-data-postprocess-path rollout-external rollout-external-engine-addrs
    rollout-health-check-first-wait rollout-health-check-interval rollout-health-check-timeout
    rollout-submission-granularity rollout-task-type save-debug-event-data save-debug-rollout-data
    save-debug-train-data save-debug-trajectory-data save-hf save-local-weight-checksum
    save-trigger-sentinel seed session-message-matcher session-sample-picker-path
    session-sample-postprocessor-path session-server-ip session-server-port sglang-config
    sglang-router-request-timeout-secs skip-actor-forward-only stream-optimizer-state-moment-dtype
    stream-optimizer-state-to-disk target-modules tb-experiment-name tb-project-name tis-clip
    tis-clip-low tito-model tool-key train-backend train-env-vars train-memory-margin-bytes
    true-on-policy-mode update-weight-buffer-size update-weight-delta-checksum
    update-weight-delta-encoding update-weight-disk-dir update-weight-local-checkpoint-dir
    update-weight-transfer-mode update-weights-interval use-distributed-post use-dynamic-batch-size
    use-dynamic-global-batch-size use-fault-tolerance use-indexer-replay use-kl-loss use-mlflow
    use-opsm use-prometheus use-rollout-entropy use-rollout-logprobs use-routing-replay
    use-session-server use-tensorboard use-tis use-unbiased-kl use-wandb value-clip verifiers-config
    wandb-always-use-train-step wandb-dir wandb-group wandb-host wandb-key wandb-mode wandb-project
    wandb-run-id wandb-team witness-buffer-size
"""

MILES_FLAG_NAMES: frozenset[str] = frozenset(
    {f.flag for f in MILES_FLAGS if f.flag} | set(_OTHER_FLAG_NAMES.split())
)
