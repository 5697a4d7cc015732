"""The flags Miles' own parser defines, by name (without the leading dashes).

Miles' parser refuses any flag it does not define, so the command line here does too: a
misspelled flag (``--n-sample-per-prompt``) must fail before anything runs rather than be
passed through and silently ignored. The names come from Miles' argument definitions
(``miles/utils/arguments.py`` and the SGLang router and server options it adds, as of
mid-2026). Miles also accepts every Megatron flag and every SGLang server option under
``--sglang-``; those do nothing in a rollout-only run, so they are not listed: pass
``--extra-miles-flag NAME`` to let such a flag, or one a newer Miles defines, through.
"""

from __future__ import annotations

MILES_FLAG_NAMES: frozenset[str] = frozenset(
    """
    actor-num-gpus-per-node actor-num-nodes advantage-estimator allgather-cp
    allow-partial-train-step apply-chat-template apply-chat-template-kwargs
    async-data-buffer-capacity-factor async-max-concurrent-samples async-save
    async-unused-samples-handler attention-dropout balance-by-flops balance-data
    buffer-filter-path calculate-per-token-loss chat-template-path check-lora-weight-equal
    check-rematerialize-param-from-master-weight check-weight-update-allow-quant-error
    check-weight-update-equal check-weight-update-selector check-weight-update-skip-list
    ci-check-model-hash ci-disable-kl-checker ci-disable-logprobs-checker
    ci-disable-weight-update-checker ci-ft-test-actions ci-inject-rollout-data-min-match-ratio
    ci-inject-rollout-data-path ci-inject-rollout-data-start-rollout-id ci-load-grad-norm
    ci-metric-checker-key ci-metric-checker-threshold ci-save-grad-norm ci-save-model-hash
    ci-test clip-grad colocate control-server-port critic-load critic-lr critic-lr-warmup-iters
    critic-num-gpus-per-node critic-num-nodes critic-save custom-async-data-buffer-path
    custom-config-path custom-convert-samples-to-train-data-path
    custom-eval-rollout-log-function-path custom-generate-function-path
    custom-loss-function-path custom-megatron-before-log-prob-hook-path
    custom-megatron-before-train-step-hook-path custom-megatron-init-path
    custom-megatron-post-save-hook-path custom-model-provider-path
    custom-pg-loss-reducer-function-path custom-reward-post-process-path custom-rm-path
    custom-rollout-log-function-path custom-tis-function-path
    custom-update-weight-post-write-path data-pad-size-multiplier data-source-path
    debug-deterministic-collective debug-disable-optimizer debug-exit-after-rollout
    debug-rollout-only debug-skip-weight-update debug-train-only delay-split-train-data-by-dp
    disable-compute-advantages-and-returns disable-grpo-std-normalization
    disable-rewards-normalization disable-rollout-global-dataset disable-rollout-trim-samples
    disable-wandb-random-suffix distributed-backend distributed-timeout-minutes
    dsa-attention-backend dump-details dumper-dir dumper-enable dumper-fwd-bwd dumper-fwd-only
    dumper-inference dumper-source-patcher-config-inference dumper-source-patcher-config-train
    dynamic-sampling-filter-path enable-event-analyzer enable-mtp-training enable-witness
    entropy-coef env-report eps-clip eps-clip-c eps-clip-high eval-config eval-function-path
    eval-hf-dir eval-input-key eval-interval eval-keep-snapshots eval-label-key
    eval-max-context-len eval-max-in-flight eval-max-prompt-len eval-max-response-len
    eval-min-new-tokens eval-num-gpus eval-num-gpus-per-engine eval-overflow-policy
    eval-prompt-data eval-reward-key eval-temperature eval-tool-key eval-top-k eval-top-p
    exclude-modules experts-shared-outer-loras extra-env-vars extra-high-precision-layers-hf
    extra-high-precision-layers-megatron fetch-trajectory-retry-times freeze-indexer
    ft-components fully-async gamma get-mismatch-metrics global-batch-size group-rm
    hf-checkpoint hidden-dropout http-proxy indep-dp input-key keep-old-actor kl-coef
    kl-loss-coef kl-loss-type label-key lambd linear-attention-backend load
    load-debug-rollout-data load-debug-rollout-data-subsample log-correct-samples log-multi-turn
    log-passrate log-probs-chunk-size log-probs-max-tokens-per-gpu log-reward-category
    lora-adapter-path lora-alpha lora-base-cpu-backup lora-dropout lora-rank
    lora-sync-from-tensor lora-train-only lora-type loss-mask-type loss-type low-memory-resume
    lr mask-offpolicy-in-partial-rollout max-tokens-per-gpu max-weight-staleness
    megatron-to-hf-mode memory-recorder memory-snapshot-dir memory-snapshot-num-steps
    metadata-key mfu-peak-tflops micro-batch-size miles-dsa-topk-backend
    miles-router-health-check-failure-threshold miles-router-max-connections
    miles-router-timeout min-batch-collection-ratio mini-ft-controller-enable
    mini-ft-controller-poll-interval mini-ft-controller-resume-delay mlflow-experiment-name
    mlflow-run-id mlflow-run-name mlflow-tracking-uri model-name moe-input-jitter-eps
    moe-router-force-biased moe-router-force-load-balancing mooncake-replica-num
    mooncake-store-init-kwargs mtp-loss-scaling-factor mtp-num-layers multi-lora
    multi-lora-adapter multi-lora-api-port multi-lora-backend-path
    multi-lora-disable-service-mode multi-lora-http-server-path multi-lora-idle-poll-s
    multi-lora-max-adapter-global-batch-size multi-lora-max-coalesce-wait-s
    multi-lora-max-empty-wait-s multi-lora-n-adapters multimodal-keys n-samples-per-eval-prompt
    n-samples-per-prompt no-save-optim no-sglang-lora-use-virtual-experts normalize-advantages
    num-critic-only-steps num-epoch num-gpus-per-node num-rollout num-steps-per-rollout
    object-store-backend observe-training-entropy offload offload-rollout offload-rollout-level
    offload-train offload-train-disk-chunk-mb offload-train-disk-dir offload-train-target
    opd-kl-coef opd-log-prob-top-k opd-reward-weight-mode opd-teacher-ckpt-step opd-teacher-key
    opd-teacher-load opd-teacher-urls opd-top-k-strategy opd-topk-per-position opd-type
    opsm-delta over-sampling-batch-size p2p-transfer-num-workers p2p-transfer-timeout
    padded-vocab-size partial-rollout pause-generation-mode pin-rollout-manager-to-head
    prefill-num-servers profile-target prometheus-port prometheus-run-name prompt-data
    qkv-format recompute-logprobs-via-prefill recompute-loss-function ref-ckpt-step ref-load
    ref-update-interval rematerialize-param-from-master-weight reset-optimizer-states reward-key
    rm-type rm-url rollout-all-samples-process-path rollout-batch-size rollout-buffer-url
    rollout-data-postprocess-path rollout-external rollout-external-engine-addrs
    rollout-function-path rollout-health-check-first-wait rollout-health-check-interval
    rollout-health-check-timeout rollout-max-context-len rollout-max-prompt-len
    rollout-max-response-len rollout-num-gpus rollout-num-gpus-per-engine
    rollout-sample-filter-path rollout-seed rollout-shuffle rollout-skip-special-tokens
    rollout-stop rollout-stop-token-ids rollout-submission-granularity rollout-task-type
    rollout-temperature rollout-top-k rollout-top-p save save-debug-event-data
    save-debug-rollout-data save-debug-train-data save-debug-trajectory-data save-hf
    save-interval save-local-weight-checksum save-trigger-sentinel seed session-message-matcher
    session-sample-picker-path session-sample-postprocessor-path session-server-ip
    session-server-port sglang-config sglang-enable-deterministic-inference sglang-router-ip
    sglang-router-policy sglang-router-port sglang-router-request-timeout-secs
    sglang-server-concurrency sglang-tokenizer-path skip-actor-forward-only
    skip-eval-before-train start-rollout-id stream-optimizer-state-moment-dtype
    stream-optimizer-state-to-disk target-modules tb-experiment-name tb-project-name tis-clip
    tis-clip-low tito-model tool-key train-backend train-env-vars train-memory-margin-bytes
    true-on-policy-mode update-weight-buffer-size update-weight-delta-checksum
    update-weight-delta-encoding update-weight-disk-dir update-weight-local-checkpoint-dir
    update-weight-transfer-mode update-weights-interval use-distributed-post
    use-dynamic-batch-size use-dynamic-global-batch-size use-fault-tolerance use-indexer-replay
    use-kl-loss use-miles-router use-mlflow use-opd use-opsm use-prometheus use-rollout-entropy
    use-rollout-indexer-replay use-rollout-logprobs use-rollout-routing-replay
    use-routing-replay use-session-server use-tensorboard use-tis use-unbiased-kl use-wandb
    value-clip verifiers-config wandb-always-use-train-step wandb-dir wandb-group wandb-host
    wandb-key wandb-mode wandb-project wandb-run-id wandb-team witness-buffer-size
    """.split()
)
