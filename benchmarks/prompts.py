"""Realistic prompts for the engine and transport benchmarks: the fixture tasksets' questions,
rendered by the real Qwen3 renderer into token ids."""

from __future__ import annotations

import random

from benchmarks.rollouts import MODEL_ID

# Qwen3's stop tokens (<|im_end|>, <|endoftext|>), as its renderer reports them.
QWEN3_STOP_TOKEN_IDS: tuple[int, ...] = (151645, 151643)


def arithmetic_prompts(count: int, *, seed: int = 0) -> list[tuple[int, ...]]:
    """``count`` single-turn prompts (system + one question), as the adapter would send them."""
    import renderers
    from miles_verifiers_testkit.harness.protocol import ANSWER_INSTRUCTIONS, random_question
    from renderers.base import load_tokenizer

    renderer = renderers.create_renderer(load_tokenizer(MODEL_ID))
    rng = random.Random(seed)
    prompts = []
    for _ in range(count):
        messages = [
            {"role": "system", "content": ANSWER_INSTRUCTIONS},
            {"role": "user", "content": random_question(rng).text},
        ]
        prompts.append(tuple(renderer.render_ids(messages, add_generation_prompt=True)))
    return prompts


def renderers_generate_body(prompt: tuple[int, ...], *, max_tokens: int) -> dict[str, object]:
    """The body ``renderers.client.generate`` posts for one turn (what the transport receives)."""
    return {
        "model": MODEL_ID,
        "token_ids": list(prompt),
        "sampling_params": {
            "max_tokens": max_tokens,
            "temperature": 1.0,
            "top_p": 1.0,
            "top_k": -1,
            "stop_token_ids": list(QWEN3_STOP_TOKEN_IDS),
            "logprobs": 1,
            "skip_special_tokens": False,
        },
    }
