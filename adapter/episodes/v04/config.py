"""Loading and describing a Verifiers 0.4 environment on the episode worker.

What the worker cannot run is refused with the field to change: a runtime that is not local
(0.4's default is a remote sandbox), an unbounded taskset, a config Verifiers refuses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from miles_verifiers.episodes.v02.config import CONFIG_ENV_VAR, ConfigError
from miles_verifiers.episodes.v04.config_shape import Shaped, refusal04, shape04, table
from miles_verifiers.protocol.config_file import parse_config_text
from miles_verifiers.protocol.messages import (
    DescribeRequest,
    Description,
    RendererSpecModel,
    RuntimeDescription,
    SeatDescription,
    ServiceRuntimeDescription,
)


@dataclass(frozen=True)
class Loaded04:
    """A 0.4 environment and its tasks, loaded once per worker."""

    config: Any
    environment: Any
    tasks: tuple[Any, ...]
    shaped: Shaped  # the tables the environment sits under, and what was set aside


def read_config04(data: dict[str, Any], path: Path) -> tuple[Any, Shaped]:
    """The environment's config, validated by Verifiers 0.4, from a file in either shape."""
    import verifiers.v1 as vf

    shaped = shape04(data, path)
    try:
        return vf.resolve_env_config(shaped.data), shaped
    except Exception as error:  # pydantic's ValidationError, or a plugin that cannot load
        raise refusal04(error, shaped.data, path, shaped.prefix) from error


def check_local_runtimes(config: Any, path: Path, prefix: tuple[str, ...] = ()) -> None:
    """Refuse a seat whose runtime is remote (construction refuses it from the description)."""
    from verifiers.v1.env import agent_config_fields

    for seat, spec in agent_config_fields(config).items():
        described = describe_runtime04(spec.runtime)
        if not described.local:
            runtime = table(prefix, seat, "runtime")
            raise ConfigError(
                f"{CONFIG_ENV_VAR} file {path}: the {seat!r} seat runs in the "
                f"{described.type!r} runtime, "
                f"a remote sandbox (Verifiers 0.4's default when {runtime} is not set); "
                "the Miles episode worker runs local runtimes only.",
                field=f"{runtime} type",
                fix=f'set {runtime} type = "subprocess" (or a local container runtime).',
            )


def describe_runtime04(runtime: Any) -> RuntimeDescription:
    from verifiers.v1.runtimes import runtime_is_local

    kind = getattr(runtime, "type", type(runtime).__name__)
    return RuntimeDescription(type=str(kind), local=bool(runtime_is_local(runtime)))


def seat_standings04(environment: Any, config: Any) -> dict[str, bool] | None:
    """Each seat's ``trainable`` after the environment's ``setup()`` (where judges and user
    simulators mark themselves); None when setup() needs more than the config."""
    import verifiers.v1 as vf
    from verifiers.v1.configs.agent import resolve_agent
    from verifiers.v1.env import agent_config_fields

    harness = vf.default_agent_harness(config.taskset.id)

    def make(name: str, spec: Any) -> Any:
        # The model is a placeholder: setup() decides standing, it runs no agent.
        return vf.make_agent(resolve_agent(spec, model="miles-policy", harness=harness))

    try:
        agents = vf.Agents(config, make)
        asyncio.run(environment.setup(agents))
        return {name: bool(getattr(agents, name).trainable) for name in agent_config_fields(config)}
    except Exception:  # a setup() that needs more than the config: standing unknown
        return None


def describe_seats04(environment: Any, config: Any) -> list[SeatDescription]:
    from verifiers.v1.env import agent_config_fields
    from verifiers.v1.envs.best_of_n import BestOfNEnv
    from verifiers.v1.envs.single_agent.env import SingleAgentEnv

    standings = seat_standings04(environment, config)
    # Traces one episode gives each seat, where the environment type fixes it.
    runs = None
    if isinstance(environment, BestOfNEnv):
        runs = int(environment.config.n)
    elif isinstance(environment, SingleAgentEnv):
        runs = 1
    return [
        SeatDescription(
            name=name,
            trainable=None if standings is None else standings[name],
            sampling=(
                spec.sampling.model_dump(mode="json", exclude_unset=True)
                if spec.sampling is not None
                else {}
            ),
            model=spec.model,
            has_client=spec.client is not None,
            runtime=describe_runtime04(spec.runtime),
            runs_per_episode=runs,
        )
        for name, spec in agent_config_fields(config).items()
    ]


def _config_nodes(node: Any, path: tuple[str, ...]) -> Iterator[tuple[tuple[str, ...], Any]]:
    """Every pydantic model in a config tree, with its path of field names."""
    from pydantic import BaseModel

    if isinstance(node, BaseModel):
        yield path, node
        for name, value in node:
            yield from _config_nodes(value, (*path, name))
    elif isinstance(node, (list, tuple, dict)):
        for key, value in node.items() if isinstance(node, dict) else enumerate(node):
            yield from _config_nodes(value, (*path, str(key)))


def describe_service_runtimes04(environment: Any, config: Any) -> list[ServiceRuntimeDescription]:
    """Tool servers' own runtimes (not ``url``/``colocated``), and the config's others."""
    from typing import get_args

    from verifiers.v1.env import agent_config_fields
    from verifiers.v1.runtimes import RuntimeConfig

    seats = {(name,) for name in agent_config_fields(config)}
    # The seats' own tables are described with the seats.
    nodes = [(path, node) for path, node in _config_nodes(config, ()) if path[:1] not in seats]
    where = {id(node): path for path, node in nodes}
    taskset = environment.taskset
    servers = [
        *type(taskset).task_type().toolsets(taskset.config.task),
        *taskset.toolsets(taskset.config),
    ]
    found: list[ServiceRuntimeDescription] = []
    claimed: set[int] = set()
    for server in servers:
        settings = getattr(server, "config", None)
        runtime = getattr(settings, "runtime", None)
        external = getattr(settings, "url", None) or getattr(settings, "colocated", False)
        if runtime is None or external:
            continue
        claimed.add(id(runtime))
        path = where.get(id(settings))
        found.append(
            ServiceRuntimeDescription(
                role="toolset",
                name=type(server).__name__,
                key=None if path is None else table(path, "runtime"),
                runtime=describe_runtime04(runtime),
            )
        )
    runtime_types = get_args(get_args(RuntimeConfig)[0])
    for path, node in nodes:
        if isinstance(node, runtime_types) and id(node) not in claimed:
            found.append(
                ServiceRuntimeDescription(
                    role="config",
                    name=".".join(path),
                    key=table(path),
                    runtime=describe_runtime04(node),
                )
            )
    return found


def load04(config_path: str, config_text: str, *, check_runtimes: bool = True) -> Loaded04:
    """The validated config, its environment and its tasks (the describe step reports the
    seats' runtimes: ``check_runtimes`` False)."""
    import verifiers.v1 as vf

    path = Path(config_path)
    config, shaped = read_config04(parse_config_text(config_text, path), path)
    if check_runtimes:
        check_local_runtimes(config, path, shaped.prefix)
    environment = vf.load_environment(config)
    taskset = environment.taskset
    if not taskset.bounded:
        raise ConfigError(
            f"{CONFIG_ENV_VAR} file {path}: the taskset {config.taskset.id!r} is infinite; "
            "Miles' rollout order, epochs and resume need a fixed task table.",
            field=table(shaped.prefix, "taskset"),
            fix="use a bounded taskset: set the taskset's own size option in "
            f"{table(shaped.prefix, 'taskset')} where "
            "it has one (the fixtures' num_tasks), or install a taskset package whose load() "
            "yields a finite list (say, the first N tasks of this one). Verifiers' --select "
            "options (include.idx ranges, limit) belong to its eval CLI: an environment "
            "config has no [select] table.",
        )
    tasks = tuple(taskset)
    if not tasks:
        raise ConfigError(
            f"{CONFIG_ENV_VAR} file {path}: the taskset {config.taskset.id!r} has no tasks.",
            field=table(shaped.prefix, "taskset"),
            fix=f"check the options in {table(shaped.prefix, 'taskset')} (num_tasks, split, "
            "filters).",
        )
    return Loaded04(config, environment, tasks, shaped)


def renderer_config04(identity: str | None) -> Any:
    """The Renderers config for a known model id (None: from the tokenizer's own name)."""
    if identity is None:
        return None
    from renderers.base import MODEL_RENDERER_MAP
    from renderers.configs import config_from_name

    name = MODEL_RENDERER_MAP.get(identity)
    return config_from_name(name) if name is not None else None


def probe_renderer04(spec: RendererSpecModel) -> int | None:
    """The tokenizer's ``len``, after rendering one user turn as the episodes will (a checkpoint
    without a chat template would fail every request)."""
    import json

    from renderers import create_renderer

    from miles_verifiers.episodes.preloaded import load_tokenizer
    from miles_verifiers.episodes.v02.clients import IDENTITY_FLAGS
    from miles_verifiers.errors import RendererSetupError

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
            renderer_config04(spec.identity),
            chat_template_kwargs=json.loads(spec.chat_template_kwargs_json),
        )
        renderer.render_ids([{"role": "user", "content": "2 + 2?"}], add_generation_prompt=True)
    except Exception as error:
        label = spec.identity or spec.tokenizer_source
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
    from miles_verifiers.episodes.describe import describe_tasks
    from miles_verifiers.episodes.v04.harness_needs import check_harness_needs04
    from miles_verifiers.versions import WORKER_VERSIONS_04, require_supported_versions

    require_supported_versions(WORKER_VERSIONS_04)  # the Verifiers that runs the episodes
    loaded = load04(request.config_path, request.config_text, check_runtimes=False)
    check_harness_needs04(loaded.config, Path(request.config_path), loaded.shaped.prefix)
    return describe_tasks(
        request,
        loaded.tasks,
        probe_renderer04,
        env_id=str(loaded.config.env_id),
        has_group_reward=False,  # 0.3 removed @group_reward; Env.finalize judges an episode
        env_type=f"{type(loaded.environment).__module__}.{type(loaded.environment).__qualname__}",
        seats=describe_seats04(loaded.environment, loaded.config),
        service_runtimes=describe_service_runtimes04(loaded.environment, loaded.config),
        config_notes=list(loaded.shaped.notes),
        config_prefix=list(loaded.shaped.prefix),
    )
