"""The Verifiers 0.4 describe step, run where the episodes run: construction refuses a model whose
prompts cannot be rendered, rather than failing every request of every episode; and it describes
the environment's seats and runtimes for the trainer side's checks (tests/adapter/test_seats.py).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

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
from miles_verifiers.episodes.v04.config import describe04
from miles_verifiers.protocol.messages import DescribeRequest, RendererSpecModel
from miles_verifiers.errors import RendererSetupError

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


# -- the seats and runtimes construction checks (tests/adapter/test_seats.py) ----------------------

CONFIGS = REPO_ROOT / "fixtures" / "configs" / "v04"

# Tasksets and an environment written for these tests only, on the describe process's path.
PACKAGES = {
    "mvtest_endless04": """
import itertools
import verifiers.v1 as vf
from mv_arith04 import ArithData, ArithTask, ChatLoopHarness, ChatLoopHarnessConfig

class EndlessTaskset(vf.Taskset[ArithTask, vf.TasksetConfig]):
    INFINITE = True

    def load(self):
        for idx in itertools.count():
            yield ArithTask(ArithData(idx=idx, prompt="1 + 1?", answer="2"), self.config.task)

__all__ = ["ChatLoopHarness", "ChatLoopHarnessConfig", "EndlessTaskset"]
""",
    "mvtest_placedtools04": """
import verifiers.v1 as vf
from mv_arith04 import ArithData, ChatLoopHarness, ChatLoopHarnessConfig
from mv_tools04.calculator import Calculator

class PlacedConfig(vf.TaskConfig):
    tools: vf.ToolsetConfig = vf.ToolsetConfig()

class PlacedTask(vf.Task[ArithData, vf.State, PlacedConfig]):
    @classmethod
    def toolsets(cls, config):
        return [Calculator(config.tools)]

class PlacedTasksetConfig(vf.TasksetConfig):
    task: PlacedConfig = PlacedConfig()
    num_tasks: int = 1
    seed: int = 0

class PlacedTaskset(vf.Taskset[PlacedTask, PlacedTasksetConfig]):
    def load(self):
        return [PlacedTask(ArithData(idx=0, prompt="1 + 1?", answer="2"), self.config.task)]

__all__ = ["ChatLoopHarness", "ChatLoopHarnessConfig", "PlacedTaskset"]
""",
    "mvtest_oddsetup04": '''
import verifiers.v1 as vf

class OddSetupConfig(vf.EnvConfig):
    agent: vf.AgentConfig = vf.AgentConfig()

class OddSetupEnv(vf.Env[OddSetupConfig]):
    """An environment whose setup() needs what only a live episode has."""

    async def setup(self, agents):
        raise RuntimeError("setup needs a live episode")

    async def run(self, task, agents):
        await agents.agent.run(task)

__all__ = ["OddSetupEnv"]
''',
}

SEATS = """
import json, sys
from pathlib import Path
root = Path(sys.argv[1])
for name, source in json.loads(sys.argv[2]).items():
    (root / name).mkdir()
    (root / name / "__init__.py").write_text(source)
sys.path.insert(0, str(root))
from miles_verifiers.episodes.v02.config import ConfigError
from miles_verifiers.episodes.v04.config import describe04
from miles_verifiers.protocol.messages import DescribeRequest

answers = {}
for name, text in json.loads(sys.argv[3]).items():
    request = DescribeRequest(config_path=name + ".toml", config_text=text, renderer=None)
    try:
        answers[name] = describe04(request).model_dump(mode="json")
    except ConfigError as error:
        answers[name] = {"refused": str(error)}
print(json.dumps(answers))
"""


def _fixture(name: str, *extra: str, before: str = "") -> str:
    return before + (CONFIGS / f"{name}.toml").read_text() + "".join(extra)


# Each a fixture config with the change a test names.
SEAT_CONFIGS = {
    "dialogue": _fixture("mv_dialogue"),
    "dialogue_sampling": _fixture(
        "mv_dialogue", "\n[assistant.sampling]\ntemperature = 0.7\nmax_completion_tokens = 100\n"
    ),
    "dialogue_pins": _fixture("mv_dialogue", '\n[quiz_master.client]\ntype = "eval"\n').replace(
        "[quiz_master]\n", '[quiz_master]\nmodel = "gpt-4.1-mini"\n'
    ),
    "arith_remote": _fixture("mv_arith").replace('type = "subprocess"', 'type = "prime"'),
    "tools": _fixture("mv_tools"),
    "best_of_n": _fixture("mv_arith", before='id = "best-of-n"\nn = 3\n'),
    "isolated_verifier": _fixture(
        "mv_arith", '\n[verifier.runtime]\ntype = "modal"\n', before='id = "isolated-verifier"\n'
    ),
    "placed_tools": _fixture("mv_arith", '\n[taskset.task.tools.runtime]\ntype = "e2b"\n').replace(
        'id = "mv-arith04"', 'id = "mvtest-placedtools04"'
    ),
    "odd_setup": _fixture("mv_arith", before='id = "mvtest-oddsetup04"\n'),
    "vf_eval": (CONFIGS / "mv_arith_vf_eval.toml").read_text(),
    "endless": '[taskset]\nid = "mvtest-endless04"\n\n[agent.runtime]\ntype = "subprocess"\n',
}


@pytest.fixture(scope="module")
def described(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    """Every config of SEAT_CONFIGS as the 0.4 describe step answers it (one worker process)."""
    root = tmp_path_factory.mktemp("packages")
    arguments = [str(root), json.dumps(PACKAGES), json.dumps(SEAT_CONFIGS)]
    done = run_in_worker04(f"import sys; sys.argv[1:] = {arguments!r}\n" + SEATS)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def seats_of(described: dict[str, Any], name: str) -> dict[str, dict[str, Any]]:
    return {seat["name"]: seat for seat in described[name]["seats"]}


def test_each_seat_is_described_with_its_standing_after_setup(described):
    seats = seats_of(described, "dialogue")

    assert list(seats) == ["assistant", "quiz_master"]
    assert seats["assistant"]["trainable"] is True and seats["quiz_master"]["trainable"] is False


def test_a_seat_describes_only_the_sampling_keys_its_config_sets(described):
    seats = seats_of(described, "dialogue_sampling")

    assert seats["assistant"]["sampling"] == {"temperature": 0.7, "max_tokens": 100}
    assert seats["quiz_master"]["sampling"] == {}


def test_a_seat_describes_its_model_and_client_pins(described):
    quiz_master = seats_of(described, "dialogue_pins")["quiz_master"]

    assert quiz_master["model"] == "gpt-4.1-mini" and quiz_master["has_client"] is True


def test_a_remote_seat_runtime_is_described_for_construction_to_refuse(described):
    (agent,) = described["arith_remote"]["seats"]

    assert agent["runtime"] == {"type": "prime", "local": False}


def test_a_tool_server_set_by_the_taskset_code_is_described_without_a_toml_key(described):
    assert described["tools"]["service_runtimes"] == [
        {
            "role": "toolset",
            "name": "Calculator",
            "key": None,
            "runtime": {"type": "subprocess", "local": True},
        }
    ]


def test_a_tool_server_placed_by_the_config_is_described_with_its_toml_table(described):
    (toolset,) = described["placed_tools"]["service_runtimes"]

    assert toolset["key"] == "[taskset.task.tools.runtime]"
    assert toolset["runtime"] == {"type": "e2b", "local": False}


def test_an_isolated_verifier_runtime_is_described_with_its_toml_table(described):
    assert described["isolated_verifier"]["service_runtimes"] == [
        {
            "role": "config",
            "name": "verifier.runtime",
            "key": "[verifier.runtime]",
            "runtime": {"type": "modal", "local": False},
        }
    ]


def test_best_of_n_is_described_as_playing_its_seat_n_times(described):
    (agent,) = described["best_of_n"]["seats"]

    assert described["best_of_n"]["env_type"].endswith("BestOfNEnv")
    assert agent["runs_per_episode"] == 3


def test_a_setup_that_cannot_run_from_the_config_leaves_the_standing_unknown(described):
    (agent,) = described["odd_setup"]["seats"]

    assert agent["trainable"] is None


def test_an_infinite_taskset_is_refused_naming_a_fix_that_exists_in_0_4(described):
    refusal = described["endless"]["refused"]

    assert "is infinite" in refusal and "num_tasks" in refusal
    assert "no [select] table" in refusal


def test_a_vf_eval_file_is_described_with_the_table_its_environment_sits_under(described):
    assert described["vf_eval"]["config_prefix"] == ["env"]
    assert described["arith_remote"]["config_prefix"] == []
