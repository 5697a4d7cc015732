"""Loading and describing a Verifiers 0.4 environment on the episode worker.

0.4 loads the 0.4 way: the TOML becomes the environment's own config class
(``resolve_env_config``), and ``load_environment`` builds the ``Env`` (``SingleAgentEnv`` for a
plain taskset). What the worker cannot run yet is refused here, at construction, with the field
to change: a runtime that is not local (0.4's default is a remote sandbox), an unbounded
taskset, and a config Verifiers itself refuses.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_verifiers._episodes.config import CONFIG_ENV_VAR, ConfigError, parse_config_text
from miles_verifiers._seam.protocol import DescribeRequest, Description, RendererSpecModel
from miles_verifiers._seam.records import task_record


@dataclass(frozen=True)
class Loaded04:
    """A 0.4 environment and its tasks, loaded once per worker."""

    config: Any
    environment: Any
    tasks: tuple[Any, ...]


def _validation_lines(error: Exception) -> str:
    errors = getattr(error, "errors", None)
    if not callable(errors):
        return str(error)
    return "; ".join(
        f"{'.'.join(str(p) for p in e.get('loc', ()))}: {e.get('msg', '')}" for e in errors()
    )


def resolve_config04(data: dict[str, Any], path: Path) -> Any:
    """The environment's config, validated by Verifiers 0.4 (its error, named, on refusal)."""
    import verifiers.v1 as vf

    try:
        return vf.resolve_env_config(data)
    except Exception as error:  # pydantic's ValidationError, or a plugin that cannot load
        raise ConfigError(
            f"{CONFIG_ENV_VAR} file {path} is not a valid Verifiers 0.4 environment config: "
            f"{_validation_lines(error)}.",
            field=CONFIG_ENV_VAR,
            fix="write it in the 0.4 shape: run caps (max_turns, timeouts) and the harness "
            "under [agent] (see fixtures/configs/v04/mv_arith.toml), and install the "
            "taskset package where the episodes run.",
        ) from error


def check_local_runtimes(config: Any, path: Path) -> None:
    """Refuse a seat whose runtime is remote: training episodes run on this machine."""
    from verifiers.v1.env import agent_config_fields
    from verifiers.v1.runtimes import runtime_is_local

    for seat, spec in agent_config_fields(config).items():
        if not runtime_is_local(spec.runtime):
            kind = getattr(spec.runtime, "type", type(spec.runtime).__name__)
            raise ConfigError(
                f"{CONFIG_ENV_VAR} file {path}: the {seat!r} seat runs in the {kind!r} runtime, "
                "a remote sandbox (Verifiers 0.4's default when [agent.runtime] is not set); "
                "the Miles episode worker runs local runtimes only.",
                field=f"[{seat}.runtime] type",
                fix=f'set [{seat}.runtime] type = "subprocess" (or a local container runtime).',
            )


def load04(config_path: str, config_text: str) -> Loaded04:
    """The validated config, its environment and its tasks (in taskset order)."""
    import verifiers.v1 as vf

    path = Path(config_path)
    config = resolve_config04(parse_config_text(config_text, path), path)
    check_local_runtimes(config, path)
    environment = vf.load_environment(config)
    taskset = environment.taskset
    if not taskset.bounded:
        raise ConfigError(
            f"{CONFIG_ENV_VAR} file {path}: the taskset {config.taskset.id!r} is infinite; "
            "Miles' rollout order, epochs and resume need a fixed task table.",
            field="[taskset]",
            fix="use a bounded taskset (or select a finite part of it in [taskset]).",
        )
    tasks = tuple(taskset)
    if not tasks:
        raise ConfigError(
            f"{CONFIG_ENV_VAR} file {path}: the taskset {config.taskset.id!r} has no tasks.",
            field="[taskset]",
            fix="check the taskset's options (num_tasks, split, filters).",
        )
    return Loaded04(config, environment, tasks)


def renderer_config04(identity: str | None) -> Any:
    """The Renderers config for a known model id (None: Renderers resolves it from the
    tokenizer's own name, which a local checkpoint path does not match)."""
    if identity is None:
        return None
    from renderers.base import MODEL_RENDERER_MAP
    from renderers.configs import config_from_name

    name = MODEL_RENDERER_MAP.get(identity)
    return config_from_name(name) if name is not None else None


def probe_renderer04(spec: RendererSpecModel, identity: str | None) -> int | None:
    """Build the renderer the episodes' ``TrainClient`` will and render one user turn with it;
    the tokenizer's ``len`` (None when it has none). A model Renderers has no renderer for
    falls back on its tokenizer's chat template, and a checkpoint without one would fail every
    request of every episode: refused here instead, naming the flags."""
    import json

    from renderers import create_renderer

    from miles_verifiers._episodes.clients import IDENTITY_FLAGS
    from miles_verifiers._episodes.preloaded import load_tokenizer
    from miles_verifiers._trainer.engine_settings import RendererSetupError

    try:
        tokenizer = load_tokenizer(spec.tokenizer_source)
    except Exception as error:
        raise RendererSetupError(
            f"the tokenizer {spec.tokenizer_source!r} does not load where the episodes run "
            f"({type(error).__name__}: {error}). Fix: make it available offline there (a "
            "local path, or the HF cache)."
        ) from error
    try:
        renderer = create_renderer(
            tokenizer,
            renderer_config04(identity),
            chat_template_kwargs=json.loads(spec.chat_template_kwargs_json),
        )
        renderer.render_ids([{"role": "user", "content": "2 + 2?"}], add_generation_prompt=True)
    except Exception as error:
        label = identity or spec.tokenizer_source
        raise RendererSetupError(
            f"a one-turn chat cannot be rendered for {label!r} where the episodes run "
            f"({type(error).__name__}: {' '.join(str(error).split())[:300]}); a model Renderers "
            "has no renderer for falls back on its tokenizer's chat template. Fix: name a model "
            f"Renderers knows in "
            f"{IDENTITY_FLAGS} (e.g. --sglang-tokenizer-path Qwen/Qwen3-0.6B when the "
            "checkpoint is a local copy of that model), or give the checkpoint's tokenizer a "
            "chat template."
        ) from error
    try:
        return len(tokenizer) or None
    except TypeError:
        return None


def describe04(request: DescribeRequest) -> Description:
    """Load the environment and the tokenizer as the 0.4 workers will, and describe them."""
    from miles_verifiers._episodes.clients import identify_renderer
    from miles_verifiers._episodes.content import check_task_prompts
    from miles_verifiers._episodes.describe import installed_versions
    from miles_verifiers._versions import WORKER_VERSIONS_04, require_supported_versions

    # The worker's own Verifiers is the one that runs the episodes: check it first.
    require_supported_versions(WORKER_VERSIONS_04)
    loaded = load04(request.config_path, request.config_text)
    check_task_prompts(loaded.tasks)
    identity = identify_renderer(request.hf_checkpoint, request.tokenizer_path)
    renderer = request.renderer
    vocab_size = probe_renderer04(renderer, identity) if renderer is not None else None
    return Description(
        env_id=str(loaded.config.env_id),
        tasks=[task_record(task) for task in loaded.tasks],
        has_group_reward=False,  # 0.3 removed @group_reward; Env.finalize judges an episode
        renderer_identity=identity,
        vocab_size=vocab_size,
        versions=installed_versions(),
    )
