"""A model folder SGLang can serve with random weights: Qwen3-0.6B's architecture and tokenizer.

SGLang's ``--load-format dummy`` builds the architecture from ``config.json`` and fills the
weights with small random values, so no weights are downloaded. The tokenizer files come from
the project's own offline build (``miles_verifiers_testkit.tokenizers``).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

MODEL_ID = "Qwen/Qwen3-0.6B"

# The published architecture hyperparameters of Qwen3-0.6B.
QWEN3_0_6B_CONFIG: dict[str, Any] = {
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 128,
    "hidden_act": "silu",
    "hidden_size": 1024,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "max_position_embeddings": 40960,
    "max_window_layers": 28,
    "model_type": "qwen3",
    "num_attention_heads": 16,
    "num_hidden_layers": 28,
    "num_key_value_heads": 8,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": True,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}

# What SGLang's tokenizer manager loads; vocab.json/merges.txt serve the slow-tokenizer fallback.
TOKENIZER_FILES: tuple[str, ...] = (
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
    "merges.txt",
)


class ModelDirError(RuntimeError):
    """The model folder could not be written."""


def write_model_dir(
    dest: Path, tokenizer_dir: Path, *, num_hidden_layers: int | None = None
) -> Path:
    """Write ``config.json`` and copy the tokenizer files into ``dest``; return ``dest``.

    ``num_hidden_layers`` shrinks the model (e.g. for a quicker smoke run); None keeps 28.
    """
    missing = [name for name in TOKENIZER_FILES[:2] if not (tokenizer_dir / name).is_file()]
    if missing:
        raise ModelDirError(
            f"the tokenizer folder {tokenizer_dir} lacks {', '.join(missing)}; "
            "build the tokenizers first with `miles-verifiers tokenizers build` "
            "(or set MILES_VERIFIERS_CACHE to a built cache)"
        )
    if num_hidden_layers is not None and num_hidden_layers < 1:
        raise ModelDirError(f"--num-layers must be at least 1, got {num_hidden_layers}")
    dest.mkdir(parents=True, exist_ok=True)
    config = dict(QWEN3_0_6B_CONFIG)
    if num_hidden_layers is not None:
        config["num_hidden_layers"] = num_hidden_layers
        config["max_window_layers"] = num_hidden_layers
    (dest / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    for name in TOKENIZER_FILES:
        source = tokenizer_dir / name
        if source.is_file():
            # resolve(): hub-cache snapshots hold symlinks into blobs/.
            shutil.copyfile(source.resolve(), dest / name)
    return dest
