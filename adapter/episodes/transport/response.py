"""SGLang's ``/generate`` answer as the JSON Renderers' ``generate()`` reads (pure functions).

SGLang returns ``meta_info.output_token_logprobs`` as ``[logprob, token_id, text]`` triples;
Renderers wants ``choices[0].token_ids`` and ``choices[0].logprobs.content[i] == {"token":
"token_id:<id>", "logprob": float}``. Training uses them as-is, so any inconsistency is an error,
never patched: logprobs finite and <= 0, at most ``max_new_tokens`` tokens, ids in the vocabulary.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from miles_verifiers.engine.errors import EngineAborted, MalformedOutput

FINISH_REASONS = frozenset({"stop", "length"})
# Renderers reads this exact value as "the engine had no sampling evidence" and rejects it.
_NO_EVIDENCE_LOGPROB = -9999.0
# A near-certain token's fp32 log-softmax can round a hair above 0; anything beyond this is
# not a log-probability at all.
_LOGPROB_SLACK = 1e-5


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _finish_type(meta: Mapping[str, Any]) -> tuple[str, Mapping[str, Any]]:
    finish = meta.get("finish_reason")
    if isinstance(finish, Mapping):
        kind = finish.get("type")
        if isinstance(kind, str):
            return kind, finish
    elif isinstance(finish, str):
        return finish, {}
    raise MalformedOutput(f"meta_info.finish_reason is missing or has no type: {finish!r}")


def _sampled_tokens(meta: Mapping[str, Any]) -> tuple[list[int], list[float]]:
    triples = meta.get("output_token_logprobs")
    if not isinstance(triples, list):
        raise MalformedOutput(
            "meta_info.output_token_logprobs is missing; the request asked for return_logprob"
        )
    ids: list[int] = []
    logprobs: list[float] = []
    for index, entry in enumerate(triples):
        if not isinstance(entry, (list, tuple)) or len(entry) < 2:
            raise MalformedOutput(
                f"output_token_logprobs[{index}] is {entry!r}, expected [logprob, token_id, text]"
            )
        logprob, token_id = entry[0], entry[1]
        if not _is_int(token_id) or token_id < 0:
            raise MalformedOutput(f"output_token_logprobs[{index}] has token id {token_id!r}")
        if not isinstance(logprob, (int, float)) or isinstance(logprob, bool):
            raise MalformedOutput(f"output_token_logprobs[{index}] has logprob {logprob!r}")
        try:
            value = float(logprob)
        except OverflowError:
            value = math.inf
        if not math.isfinite(value):
            raise MalformedOutput(
                f"meta_info.output_token_logprobs[{index}] has logprob {logprob!r}; "
                "it must be finite"
            )
        if value > _LOGPROB_SLACK:
            raise MalformedOutput(
                f"meta_info.output_token_logprobs[{index}] has logprob {logprob!r}; a "
                "log-probability is at most 0"
            )
        if value == _NO_EVIDENCE_LOGPROB:
            raise MalformedOutput(
                f"output_token_logprobs[{index}] is {_NO_EVIDENCE_LOGPROB}, which Renderers "
                "reads as missing sampling evidence"
            )
        ids.append(token_id)
        logprobs.append(value)
    return ids, logprobs


def _check_output_ids(output: Mapping[str, Any], ids: list[int]) -> None:
    if "output_ids" not in output:
        return
    output_ids = output["output_ids"]
    if not isinstance(output_ids, list):
        raise MalformedOutput(f"output_ids is {type(output_ids).__name__}, expected a list")
    if len(output_ids) != len(ids):
        raise MalformedOutput(
            f"output_ids has {len(output_ids)} tokens but output_token_logprobs has {len(ids)}"
        )
    for index, (given, sampled) in enumerate(zip(output_ids, ids, strict=True)):
        if given != sampled or not _is_int(given):
            raise MalformedOutput(
                f"output_ids[{index}]={given!r} differs from the logprob entry's token id {sampled}"
            )


def _check_limits(ids: list[int], max_new_tokens: int | None, vocab_size: int | None) -> None:
    if max_new_tokens is not None and len(ids) > max_new_tokens:
        raise MalformedOutput(
            f"meta_info.output_token_logprobs holds {len(ids)} tokens, more than the "
            f"request's max_new_tokens={max_new_tokens}"
        )
    if vocab_size is not None:
        for index, token_id in enumerate(ids):
            if token_id >= vocab_size:
                raise MalformedOutput(
                    f"output_ids[{index}]={token_id} is outside the tokenizer's vocabulary "
                    f"(ids 0..{vocab_size - 1})"
                )


def convert_generate_output(
    output: object,
    *,
    rid: str,
    max_new_tokens: int | None = None,
    vocab_size: int | None = None,
) -> dict[str, Any]:
    """Renderers' generate-response JSON for one SGLang ``/generate`` answer; ``EngineAborted``
    for an abort, ``MalformedOutput`` unless it is one consistent, finished generation within
    ``max_new_tokens`` and ``vocab_size`` (None skips a check)."""
    if not isinstance(output, Mapping):
        raise MalformedOutput(
            f"expected one JSON object for one request, got {type(output).__name__}"
        )
    meta = output.get("meta_info")
    if not isinstance(meta, Mapping):
        raise MalformedOutput("the answer has no meta_info object")
    kind, finish = _finish_type(meta)
    if kind == "abort":
        partial = output.get("output_ids")
        raise EngineAborted(
            str(finish.get("message") or "aborted"),
            status_code=finish.get("status_code") if _is_int(finish.get("status_code")) else None,
            partial_tokens=len(partial) if isinstance(partial, list) else 0,
        )
    if kind not in FINISH_REASONS:
        raise MalformedOutput(f"unknown finish_reason type {kind!r}")

    ids, logprobs = _sampled_tokens(meta)
    _check_output_ids(output, ids)
    _check_limits(ids, max_new_tokens, vocab_size)
    reported = meta.get("completion_tokens")
    if reported is not None and reported != len(ids):
        raise MalformedOutput(
            f"meta_info.completion_tokens is {reported!r} but {len(ids)} tokens came back"
        )
    request_id = meta.get("id")
    return {
        "request_id": request_id if isinstance(request_id, str) and request_id else rid,
        "choices": [
            {
                "index": 0,
                "token_ids": ids,
                "logprobs": {
                    "content": [
                        {"token": f"token_id:{token_id}", "logprob": logprob}
                        for token_id, logprob in zip(ids, logprobs, strict=True)
                    ]
                },
                "finish_reason": kind,
            }
        ],
    }
