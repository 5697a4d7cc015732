"""``offline_environ()`` alone is enough: checked in fresh processes with no other HF settings."""

from __future__ import annotations

import json
import subprocess
import sys

from miles_verifiers_testkit.tokenizers import MODEL_IDS, BuildReport, offline_environ

HARMONY_PROBE = """
import json
from openai_harmony import HarmonyEncodingName, load_harmony_encoding
encoding = load_harmony_encoding(HarmonyEncodingName.HARMONY_GPT_OSS)
print(json.dumps({"hello": encoding.encode("Hello world"),
                  "stops": sorted(encoding.stop_tokens_for_assistant_actions())}))
"""

HUB_ID_PROBE = """
import json, sys
from renderers import create_renderer
from renderers.base import load_tokenizer
loaded = {}
for model_id in sys.argv[1:]:
    tokenizer = load_tokenizer(model_id)
    loaded[model_id] = [len(tokenizer), type(create_renderer(tokenizer)).__name__]
print(json.dumps(loaded))
"""


def run_probe(code: str, env: dict[str, str], *args: str) -> dict:
    result = subprocess.run(
        [sys.executable, "-c", code, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert result.returncode == 0, result.stderr[-4000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def test_harmony_encoding_loads_offline_and_encodes_as_published(
    offline_cache: BuildReport, clean_subprocess_env: dict[str, str]
) -> None:
    env = clean_subprocess_env | offline_environ(offline_cache.cache_dir)
    probe = run_probe(HARMONY_PROBE, env)
    assert probe == {"hello": [13225, 2375], "stops": [200002, 200012]}


def test_every_model_loads_by_hub_id_with_its_renderer(
    offline_cache: BuildReport, clean_subprocess_env: dict[str, str]
) -> None:
    env = clean_subprocess_env | offline_environ(offline_cache.cache_dir)
    assert run_probe(HUB_ID_PROBE, env, *MODEL_IDS) == {
        "Qwen/Qwen3-0.6B": [151669, "Qwen3Renderer"],
        "meta-llama/Llama-3.2-1B-Instruct": [128256, "Llama3Renderer"],
        "openai/gpt-oss-20b": [200019, "GptOssRenderer"],
    }
