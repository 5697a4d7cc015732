"""Construction under Verifiers 0.4 refuses a model whose prompts cannot be rendered, where the
episodes run (the describe step), rather than failing every request of every episode."""

from __future__ import annotations

from pathlib import Path

from tests.workers.worker04 import needs_verifiers04, run_in_worker04

pytestmark = needs_verifiers04

REPO_ROOT = Path(__file__).resolve().parents[2]

DESCRIBE = """
import os, shutil, sys
from pathlib import Path
from miles_verifiers_testkit.tokenizers import build_all, offline_environ
os.environ.update(offline_environ())
build_all()
from huggingface_hub import snapshot_download
from miles_verifiers._episodes.config04 import describe04
from miles_verifiers._seam.protocol import DescribeRequest, RendererSpecModel
from miles_verifiers._trainer.engine_settings import RendererSetupError

checkpoint = sys.argv[1]
if checkpoint == "copy":  # a local copy of Qwen3's tokenizer, under a name Renderers lacks
    source = Path(snapshot_download("Qwen/Qwen3-0.6B", local_files_only=True))
    checkpoint = sys.argv[2] + "/my-policy"
    os.makedirs(checkpoint)
    for name in ("tokenizer.json", "tokenizer_config.json", "config.json"):
        if (source / name).exists():
            shutil.copyfile(source / name, checkpoint + "/" + name)
config = Path(sys.argv[3])
request = DescribeRequest(
    config_path=str(config),
    config_text=config.read_text(),
    renderer=RendererSpecModel(tokenizer_source=checkpoint, identity=None),
    hf_checkpoint=checkpoint,
)
try:
    description = describe04(request)
except RendererSetupError as error:
    print("refused:", error)
else:
    print("described:", description.renderer_identity, description.vocab_size)
"""


def _describe(checkpoint: str, tmp_path: Path) -> str:
    config = REPO_ROOT / "fixtures" / "configs" / "v04" / "mv_arith.toml"
    done = run_in_worker04(
        "import sys; sys.argv[1:] = "
        + repr([checkpoint, str(tmp_path), str(config)])
        + "\n"
        + DESCRIBE
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stdout.strip().splitlines()[-1]


def test_a_checkpoint_renderers_lacks_whose_tokenizer_has_no_chat_template_is_refused_naming_the_flags(
    tmp_path: Path,
) -> None:
    answer = _describe("copy", tmp_path)

    assert answer.startswith("refused:"), answer
    assert "--hf-checkpoint or --sglang-tokenizer-path" in answer
    assert "my-policy" in answer


def test_a_model_renderers_knows_is_described(tmp_path: Path) -> None:
    answer = _describe("Qwen/Qwen3-0.6B", tmp_path)

    assert answer.startswith("described: Qwen/Qwen3-0.6B"), answer
