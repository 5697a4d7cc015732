"""Load and check a Verifiers 0.2 config and its taskset, in the order a user must fix them.

The config text (V1, plugins installed, a schema Verifiers accepts, a chat harness), then the
taskset (loads, has tasks); each failure is a :class:`ConfigError` naming the field and the fix.
A missing taskset package comes first: Verifiers builds the ``[taskset]`` schema from it.
"""

from __future__ import annotations

import importlib.util
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from miles_verifiers.protocol.config_file import (
    CONFIG_ENV_VAR,
    ConfigError,
    read_config_file,
)

if TYPE_CHECKING:
    from pydantic import ValidationError
    from verifiers.v1 import EnvConfig, Environment

# 0.2.0 harnesses declare no wire dialect and the renderer path speaks only chat, so the known
# non-chat harnesses are listed by module.
NON_CHAT_HARNESS_MODULES: Mapping[str, str] = {
    "verifiers.v1.harnesses.codex": "OpenAI Responses",
}

# Namespaces verifiers searches before a top-level module of the same name.
_PLUGIN_NAMESPACES = {
    "taskset": "verifiers.v1.tasksets",
    "harness": "verifiers.v1.harnesses",
}

_MAX_SCHEMA_ERRORS = 5


class ConfigSchemaError(ConfigError):
    """Verifiers' ``EnvConfig`` rejected the config; ``errors`` lists ``(field, message)``."""

    def __init__(
        self, message: str, *, field: str, fix: str, errors: Sequence[tuple[str, str]]
    ) -> None:
        self.errors = tuple(errors)
        super().__init__(message, field=field, fix=fix)


class LegacyConfigError(ConfigError):
    """The config selects a V0 environment (top-level ``id``), which the adapter cannot run."""


class UnsupportedHarnessError(ConfigError):
    """The harness speaks a wire dialect other than chat completions."""


class PluginNotInstalledError(ConfigError):
    """A taskset or harness package named in the config is not importable."""

    def __init__(self, kind: str, plugin_id: str) -> None:
        self.module = module = plugin_module(plugin_id)
        self.install_command = command = install_command(plugin_id)
        super().__init__(
            f"{kind} {plugin_id!r} from {CONFIG_ENV_VAR} is not installed: no module {module!r} "
            "can be imported in this Python environment.",
            field=f"{kind}.id",
            fix=f"install it where the rollout manager runs: `{command}` (or `pip install -e "
            f"<path>` for a local checkout of the package providing {module!r}), or correct "
            f"[{kind}] id.",
        )


class NoTasksetSelectedError(ConfigError):
    """The config names no taskset."""


class TasksetNotInstalledError(PluginNotInstalledError):
    """The taskset package is not installed."""


class HarnessNotInstalledError(PluginNotInstalledError):
    """The harness package is not installed."""


class TasksetLoadError(ConfigError):
    """Building the environment or calling the taskset's ``load()`` failed."""


class EmptyTasksetError(ConfigError):
    """The taskset loaded zero tasks."""


def _shorten(message: str, limit: int = 160) -> str:
    first_line = message.strip().splitlines()[0] if message.strip() else message
    return first_line if len(first_line) <= limit else first_line[: limit - 3] + "..."


def schema_error(error: ValidationError, path: Path, table: str | None = None) -> ConfigSchemaError:
    """A short, field-by-field account of pydantic's verdict; ``table`` prefixes the fields."""
    prefix: tuple[Any, ...] = (table,) if table else ()
    details = [
        (".".join(str(part) for part in (*prefix, *e["loc"])) or "(root)", _shorten(e["msg"]))
        for e in error.errors()
    ]
    shown = details[:_MAX_SCHEMA_ERRORS]
    lines = "; ".join(f"{field}: {message}" for field, message in shown)
    more = len(details) - len(shown)
    if more:
        lines += f"; and {more} more"
    first_field = shown[0][0] if shown else "(root)"
    return ConfigSchemaError(
        f"{CONFIG_ENV_VAR} file {path} does not match the Verifiers V1 config schema: {lines}.",
        field=first_field,
        fix="correct or remove the fields named (unknown keys are rejected; see the "
        "taskset's and harness's config classes for what they accept).",
        errors=details,
    )


def _raw_table(data: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    table = data.get(name)
    return table if isinstance(table, Mapping) else {}


def check_not_legacy(data: Mapping[str, Any], path: Path) -> None:
    """Refuse a V0 config: a top-level ``id`` with no ``[taskset] id`` (verifiers' rule)."""
    if data.get("id") is not None and not _raw_table(data, "taskset").get("id"):
        raise LegacyConfigError(
            f"{CONFIG_ENV_VAR} file {path} is a V0 (legacy) environment config: it sets a "
            f"top-level id = {data['id']!r} and no [taskset] id. The Miles adapter runs "
            "Verifiers V1 tasksets only.",
            field="id",
            fix="write a V1 config: drop the top-level id/args/extra_env_kwargs and add a "
            '[taskset] table with id = "<your V1 taskset>".',
        )


def _module_exists(name: str) -> bool:
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):  # a missing parent package, or an invalid name
        return False


def plugin_module(plugin_id: str) -> str:
    """The import name verifiers derives from a plugin id (``org/my-env@1`` -> ``my_env``)."""
    name = plugin_id.split("@", 1)[0]
    if "/" in name and not name.startswith(("./", "/")):
        name = name.split("/", 1)[1]
    return name.replace("-", "_").lower()


def install_command(plugin_id: str) -> str:
    """How to install the package behind a plugin id: Hub ids through prime, others from PyPI."""
    if "/" in plugin_id and not plugin_id.startswith(("./", "/")):
        return f"prime env install {plugin_id}"
    return f"pip install {plugin_id.split('@', 1)[0]}"


def check_plugin_installed(plugin_id: str, kind: str) -> None:
    """Raise when the package behind a taskset/harness id cannot be imported (before
    Verifiers sees the config, which would try to install a missing Hub id over the network)."""
    module = plugin_module(plugin_id)
    if _module_exists(f"{_PLUGIN_NAMESPACES[kind]}.{module}") or _module_exists(module):
        return
    error_cls = TasksetNotInstalledError if kind == "taskset" else HarnessNotInstalledError
    raise error_cls(kind, plugin_id)


def check_plugins_installed(data: Mapping[str, Any]) -> None:
    for table in ("taskset", "harness"):
        if table in data and not isinstance(data[table], Mapping):
            raise ConfigSchemaError(
                f"{CONFIG_ENV_VAR} config sets {table} = {data[table]!r}; it must be a table.",
                field=table,
                fix=f'write it as a [{table}] section, e.g. [{table}] then id = "...".',
                errors=[(table, "must be a table")],
            )
    taskset_id = _raw_table(data, "taskset").get("id")
    if not taskset_id:
        raise NoTasksetSelectedError(
            f"{CONFIG_ENV_VAR} config selects no taskset.",
            field="taskset.id",
            fix='add a [taskset] table with id = "<taskset package>".',
        )
    check_plugin_installed(str(taskset_id), "taskset")
    harness_id = _raw_table(data, "harness").get("id")
    if harness_id:
        check_plugin_installed(str(harness_id), "harness")


def _validate_plugin_tables(data: Mapping[str, Any], path: Path) -> None:
    """Validate ``[taskset]`` and ``[harness]`` against their plugin's config class first, so
    errors name paths like ``taskset.split`` (``EnvConfig``'s lose the table name)."""
    from pydantic import ValidationError
    from verifiers.v1.loaders import default_harness_id, harness_config_type, taskset_config_type

    taskset_id = str(_raw_table(data, "taskset").get("id") or "")
    harness_id = str(_raw_table(data, "harness").get("id") or default_harness_id(taskset_id))
    for table, plugin_id, resolve in (
        ("taskset", taskset_id, taskset_config_type),
        ("harness", harness_id, harness_config_type),
    ):
        try:  # check_plugins_installed has refused a missing id or a table of another type
            resolve(plugin_id).model_validate({**data.get(table, {}), "id": plugin_id})
        except ValidationError as error:
            raise schema_error(error, path, table) from error


def validate_env_config(data: Mapping[str, Any], path: Path) -> EnvConfig:
    """Validate with verifiers' own ``EnvConfig``, translating its failures."""
    from pydantic import ValidationError
    from verifiers.v1 import EnvConfig

    try:
        _validate_plugin_tables(data, path)
        return EnvConfig.model_validate(dict(data))
    except ValidationError as error:
        raise schema_error(error, path) from error
    except (ImportError, TypeError, AttributeError, OSError) as error:
        # Raised while verifiers imports the taskset/harness plugin to type its table.
        raise TasksetLoadError(
            f"verifiers could not load a plugin named in {CONFIG_ENV_VAR} file {path}: "
            f"{type(error).__name__}: {_shorten(str(error), 400)}.",
            field="taskset.id",
            fix="make sure the package imports cleanly and exports exactly one Taskset (or "
            "Harness) subclass in __all__.",
        ) from error


def check_chat_harness(config: EnvConfig) -> None:
    from verifiers.v1.loaders import harness_class

    module = harness_class(config.harness.id).__module__
    for prefix, dialect in NON_CHAT_HARNESS_MODULES.items():
        if f"{module}.".startswith(f"{prefix}."):
            raise UnsupportedHarnessError(
                f"harness {config.harness.id!r} talks to the model in the {dialect} dialect; "
                "the Miles transport renders chat-completion requests to token ids and serves "
                "no other dialect.",
                field="harness.id",
                fix='pick a chat-completions harness in [harness] id (e.g. "default" or "null").',
            )


def load_env_config(path: Path) -> EnvConfig:
    """The validated V1 ``EnvConfig`` in the file at ``path``."""
    return env_config_from_data(read_config_file(path), path)


def env_config_from_data(data: Mapping[str, Any], path: Path) -> EnvConfig:
    """The validated ``EnvConfig`` from a parsed config (``path`` names it in errors)."""
    check_not_legacy(data, path)
    check_plugins_installed(data)
    config = validate_env_config(data, path)
    check_chat_harness(config)
    return config


@dataclass(frozen=True)
class LoadedTaskset:
    environment: Environment
    tasks: tuple[Any, ...]
    # True when the task type defines @group_reward scorers (needs >= 2 rollouts per task).
    has_group_reward: bool


def has_group_reward(tasks: Sequence[Any]) -> bool:
    from verifiers.v1.decorators import discover_decorated

    one_per_type = {type(task): task for task in tasks}.values()
    return any(discover_decorated(task, "group_reward") for task in one_per_type)


def load_taskset(config: EnvConfig) -> LoadedTaskset:
    """Build the verifiers ``Environment`` and load every task."""
    from verifiers.v1 import Environment

    taskset_id = config.taskset.id
    try:
        environment = Environment(config)
    except Exception as error:  # pairing checks and plugin constructors raise anything
        raise TasksetLoadError(
            f"verifiers could not build the environment for taskset {taskset_id!r} with harness "
            f"{config.harness.id!r}: {type(error).__name__}: {_shorten(str(error), 400)}.",
            field="harness.id",
            fix="follow the message above; usually the harness lacks a capability the tasks "
            "need (MCP tools, a user simulator or a container runtime).",
        ) from error
    try:
        tasks = tuple(environment.taskset.load())
    except Exception as error:  # arbitrary taskset code
        raise TasksetLoadError(
            f"taskset {taskset_id!r} failed while loading its tasks: "
            f"{type(error).__name__}: {_shorten(str(error), 400)}.",
            field="taskset",
            fix="check the [taskset] settings in the config and that the taskset's data is "
            "available offline on this machine.",
        ) from error
    if not tasks:
        raise EmptyTasksetError(
            f"taskset {taskset_id!r} loaded zero tasks, so there is nothing to roll out.",
            field="taskset",
            fix="check the [taskset] settings that select tasks (split, filters, limits) and "
            "the data the taskset reads.",
        )
    return LoadedTaskset(environment, tasks, has_group_reward(tasks))
