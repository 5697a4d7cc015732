"""The clause table: every promise the suite checks, one line of text each.

Tests name the clauses they check with ``@pytest.mark.clause("ID", ...)``; the report lists
every clause below with its outcome, including clauses no test ran. An id used by a test but
missing here is a collection error, so the table and the tests cannot drift apart.

Ids are grouped by area: CALL (how Miles builds and calls the function), OPT (Miles options),
CFG (the Verifiers config), TRN (train output), CYC/RES (taskset order and resumption),
GRP (groups and rewards), BR (graph branches), TRP (engine payloads), FLT (engine faults),
EVL (eval output), FIN (Verifiers 0.4's episode judgement), VER (Verifiers 0.4's
verdicts: ok, retries, timeouts, slots), SNP (snapshots) and SUITE (the suite checking itself).

Every clause belongs to exactly one tier (``TIERS``), and the report keeps the tiers apart:
the Miles contract (what any correct adapter must do), this project's promises (choices the
reference adapter makes and pins, which another adapter may make differently), and checks
that do not look at the adapter at all (rendered-prompt snapshots, installed versions, the
suite checking itself).
"""

from __future__ import annotations

from enum import Enum
from types import MappingProxyType
from typing import Final


class Tier(str, Enum):
    CONTRACT = "Miles contract"
    PROMISE = "project promises"
    INDEPENDENT = "adapter-independent checks"


CLAUSES: Final = MappingProxyType(
    {
        # How Miles builds and calls a rollout function.
        "CALL-1": "The adapter constructs from RolloutFnConstructorInput before any engine exists; "
        "the router address is read only once it is set on the same args object.",
        "CALL-2": "Train and eval calls made from a worker thread, with any coroutine run on one "
        "persistent background event loop (as Miles does), return typed outputs within a deadline.",
        "CALL-3": "One instance serves both train and eval calls, in any order.",
        # Miles options.
        "OPT-1": "Each unsupported Miles option (prompt-data loading left on, --partial-rollout, "
        "--multimodal-keys, --chat-template-path, --use-opd, --use-rollout-routing-replay, "
        "--use-rollout-indexer-replay, --multi-lora) makes construction fail with an error naming "
        "that flag.",
        "OPT-2": "When several unsupported options are set, one construction error names every "
        "offending flag.",
        "OPT-3": "A rejected construction sends no engine request, runs no episode and reads no "
        "config or taskset first.",
        "OPT-4": "Any combination of supported option values constructs.",
        "OPT-5": "A missing --rollout-max-response-len is a construction error naming the flag, "
        "not a failure at the first request.",
        # Verifiers config.
        "CFG-1": "VERIFIERS_CONFIG unset or empty is a construction error naming VERIFIERS_CONFIG.",
        "CFG-2": "A config path that is missing, not .toml, or not valid TOML is a construction "
        "error naming the path.",
        "CFG-3": "A @group_reward taskset with --n-samples-per-prompt < 2 is a construction error "
        "naming --n-samples-per-prompt.",
        "CFG-4": "A Verifiers 0.4 seat pin Miles cannot train faithfully is a construction error "
        "naming its TOML key: a trainable seat's [<seat>.sampling] value other than Miles' "
        "(naming the flag too), or a seat's model pin without a client.",
        # Train output.
        "TRN-1": "A train call returns exactly --rollout-batch-size groups of "
        "--n-samples-per-prompt rollouts (a sample, or a list of one rollout's branch "
        "siblings), each sample passing Sample.validate().",
        "TRN-2": "Every train sample is COMPLETED or TRUNCATED, with tokens = prompt + response and "
        "loss mask and rollout logprobs of response length.",
        "TRN-3": "Two runs with the same seeds and engine give identical samples, whatever the "
        "completion timing.",
        # Taskset cycling and resumption.
        "CYC-1": "Tasks are consumed in the documented per-epoch order: each epoch uses every task "
        "once, none skipped or repeated except where a dropped group is replaced.",
        "CYC-2": "A dropped group (dynamic filter or failed episode) is replaced by the next task; "
        "the returned groups are the first kept ones in task order.",
        "RES-1": "A run stopped after any rollout and resumed by a new instance with the same "
        "--save directory, from its newest checkpoint or an older one, produces exactly the "
        "rollouts of an uninterrupted run.",
        # Groups and rewards.
        "GRP-1": "Every returned group holds the samples of exactly one task.",
        "GRP-2": "Groups come back in task order whatever order their episodes complete in.",
        "GRP-3": "Group rewards land on the samples they were computed for, in rollout order.",
        "GRP-4": "Flattening the output as Miles does keeps group boundaries, so Miles' "
        "group-relative advantages equal the per-task computation.",
        # Graph branches.
        "BR-1": "Under the reject branch policy (MILES_VERIFIERS_BRANCH_POLICY=reject), a trace "
        "with two or more graph branches is rejected with an error carrying the exact branch "
        "count (a branch_count attribute on the error or its cause), wherever the trace falls "
        "in the batch.",
        "BR-2": "A trace with zero graph branches drops its group, which is replaced.",
        "BR-3": "A one-branch trace converts with tokens, loss mask and logprobs aligned, the "
        "response starting at the first sampled token.",
        "BR-4": "Under the siblings branch policy (the default with a Miles whose Sample has "
        "rollout_id), a multi-branch trace becomes one sample per trainable branch, nested as "
        "one list per rollout in its task's group, the siblings sharing a non-None rollout_id "
        "and one reward; every group of the call nests alike, so Miles' manager, flattening "
        "the output a level at a time, gets samples only.",
        "BR-5": "No sampled token is trained twice: a sampled turn several branches of a "
        "rollout hold has loss mask 1 in one sibling only.",
        "BR-6": "Each sibling's tokens, loss mask and logprobs are exact against the engine's "
        "log: every trained run is an engine reply to exactly the tokens before it.",
        "BR-7": "Siblings are not extra rollouts: each group holds --n-samples-per-prompt "
        "distinct rollout_ids, unique within the call.",
        "BR-8": "A branch Verifiers marks untrainable (0.4: a compaction attempt the harness "
        "did not resume from) is never trained: no sample has loss mask 1 on its own sampled "
        "turns, while every other engine reply of the rollout is trained exactly once.",
        "BR-9": "The turns of an agent Verifiers marks untrainable (0.4: a user simulator "
        "played by the model) are never trained, while every turn of the trained agent is.",
        # Transport, observed on the engine side.
        "TRP-1": "Every /generate payload carries only sampling keys SGLang's SamplingParams "
        "accepts.",
        "TRP-2": "max_new_tokens never exceeds the response limit, and prompt plus max_new_tokens "
        "never exceeds the context limit.",
        "TRP-3": "Sampled token ids and logprobs reach the samples exactly as the engine returned "
        "them.",
        "TRP-4": "Configured sampling values (temperature, top_p, top_k, stop ids, chat template "
        "kwargs) reach the engine request.",
        # Engine faults.
        "FLT-1": "Under any mix of engine faults each train call returns a valid batch or raises "
        "the documented bounded-replacement error, within a deadline.",
        "FLT-2": "A taskset whose every episode fails ends with the bounded-replacement error, "
        "never a hang.",
        "FLT-3": "An engine answer that breaks the /generate contract (a positive or NaN "
        "logprob, more tokens than max_new_tokens, a token id outside the vocabulary, logprobs "
        "not aligned with output_ids) is refused and never trained on.",
        # Eval output.
        "EVL-1": "An eval call returns data keyed by the environment id, with rewards, truncated "
        "and samples aligned per trace over every task times --n-samples-per-eval-prompt.",
        "EVL-2": "A failing eval episode is recorded in the output (status failed, reward None), "
        "not raised.",
        # Snapshots.
        "SNP-1": "Rendered prompts for each model identity and conversation case match the "
        "committed snapshots (token ids, decoded text, per-message spans).",
        "SNP-2": "Snapshots were recorded with the installed Verifiers and Renderers versions.",
        "SNP-3": "A fixed-seed training rollout matches its snapshot (tokens, masks, logprobs, "
        "rewards, statuses, order), even when the engine finishes its requests in reverse.",
        "SNP-4": "A fixed-seed eval matches its snapshot.",
        # Added with issue 15 (defects of Miles' own adapter the suite could not see). Tier:
        # every one of these is Miles contract (what any correct adapter must do), not a
        # promise of this project.
        "CALL-4": "The legacy generate_rollout entry point keeps a bounded number of instances: "
        "args objects of finished runs are released however many distinct ones it has seen.",
        "CALL-5": "Train and eval calls on one instance that overlap in time (tool tasksets "
        "included) share no state: each returns a valid output of its own samples.",
        "OPT-6": "--rollout-num-gpus unset (outside --colocate) either works or is a "
        "construction error naming --rollout-num-gpus.",
        "TRN-4": "Every train sample lists the weight version of its train call "
        "(RolloutFnTrainInput.weight_version) in Sample.weight_versions.",
        "CYC-3": "With --rollout-shuffle every epoch is its own permutation of the taskset "
        "(as Miles reshuffles its prompt data per epoch), not one order repeated.",
        "GRP-5": "With --reward-key set and a Miles reward model (--custom-rm-path) that returns "
        "a number, either Sample.get_reward_value and Miles' normalisation read every reward, "
        "or the call fails with an error naming --reward-key.",
        "TRP-5": "Under --lora-train-only (LoRA trained, not served) no /generate request "
        "carries lora_path.",
        "FLT-4": "An engine answer with a 4xx status is not retried: the engine never receives "
        "the same refused request twice.",
        "FLT-5": "A generation the engine aborted reaches Miles as Sample.Status.ABORTED: an "
        "eval rollout the engine aborted is returned with status aborted.",
        "EVL-3": "Eval metrics use keys no train metric uses (Miles logs train and eval "
        "metrics on different step axes).",
        # Verifiers 0.4's episode judgement (Env.finalize), run with 0.4 workers.
        "FIN-1": "Rewards Verifiers 0.4's Env.finalize records on a trace count, with their "
        "weights, in the reward of that trace's sample.",
        "FIN-2": "An episode whose Env.finalize raised is never trained on: its group is "
        "replaced by the next task's.",
        # Verifiers 0.4's own verdicts on traces and episodes (ok, retries, timeouts, slots),
        # run with 0.4 workers on mv-faulty04 and mv-dialogue04.
        "VER-1": "A trace that recovered under Verifiers 0.4's [agent.retries], or an episode "
        "that recovered under its [retries], is trained: its group is kept, not dropped or "
        "replaced, and in eval its entries are not failed.",
        "VER-2": "An episode Verifiers 0.4 judges not ok because an untrainable seat (a user "
        "simulator) failed is never trained, though the trainable trace is ok: its group is "
        "replaced; in eval its entries are failed with reward None.",
        "VER-3": "A rollout whose agent timed out (0.4: a stop, the trace ok and scored) never "
        "reaches Miles as COMPLETED: its samples are TRUNCATED, with their reward.",
        "VER-4": "Eval entries of one task are independent: where one of its rollouts failed, "
        "exactly that entry is failed (reward None) and the task's other entries are normal "
        "samples with their rewards.",
        # The suite checks itself.
        "SUITE-1": "Pointed at a deliberately broken adapter, the suite fails the matching clauses.",
        "SUITE-2": "A snapshot changed on purpose is reported by the drift summary.",
        "SUITE-3": "The conformance report lists every clause of the table with its outcome.",
        "SUITE-4": "Property budgets are selectable: a small deterministic CI profile by default and a "
        "long profile that explores more and shrinks failures.",
    }
)

# The tier of each clause: a clause is Miles contract unless listed as a promise or as
# adapter-independent.
_PROMISES = frozenset(
    {
        "OPT-2",  # one error naming every bad flag, rather than the first one
        "OPT-5",  # the response limit checked at construction, not at the first request
        "BR-1",  # the rejection carries a structured branch_count
        "SNP-3",  # the seed scheme and sample format of a fixed-seed rollout
        "SNP-4",  # the same for eval
    }
)
_INDEPENDENT = frozenset({"SNP-1", "SNP-2", *(cid for cid in CLAUSES if cid.startswith("SUITE-"))})
TIERS: Final = MappingProxyType(
    {
        cid: Tier.PROMISE
        if cid in _PROMISES
        else Tier.INDEPENDENT
        if cid in _INDEPENDENT
        else Tier.CONTRACT
        for cid in CLAUSES
    }
)
