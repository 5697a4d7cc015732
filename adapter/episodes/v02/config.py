"""Load and check everything the rollout function needs before its first episode.

:func:`prepare_run` runs the checks in a fixed order (as stages of
:mod:`miles_verifiers.trainer.construction`), so the first thing a user must fix is the first thing
reported:

1. installed versions (:mod:`miles_verifiers.versions`);
2. Miles options (:mod:`miles_verifiers.trainer.options`);
3. the ``VERIFIERS_CONFIG`` file: set, present, ``.toml``, valid TOML, a V1 config, a schema
   verifiers accepts, a chat-speaking harness;
4. the taskset: installed, loads, at least one task;
5. ``@group_reward`` tasks against the per-task sample counts.

Each failure is a :class:`ConfigError` (or the version/option error of steps 1-2) that names
the variable, field or flag at fault and how to fix it. Verifiers is imported lazily, inside
the functions, so that a wrong verifiers version is reported by step 1 instead of surfacing
as an import error here.

A missing taskset package is reported before schema errors: verifiers builds the schema of
the ``[taskset]`` table from the taskset package itself, so without it there is no schema.
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import os
import tomllib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from miles_verifiers.errors import SetupError
from miles_verifiers.trainer.options import MilesOptions

if TYPE_CHECKING:
    from pydantic import ValidationError
    from verifiers.v1 import EnvConfig, Environment

CONFIG_ENV_VAR = "VERIFIERS_CONFIG"

# verifiers 0.2.0 harnesses do not declare a wire dialect: the interception server accepts
# chat, Responses and Anthropic requests alike and each harness program picks one. The
# renderer path only speaks chat, so the known non-chat harnesses are listed by module.
NON_CHAT_HARNESS_MODULES: Mapping[str, str] = {
    "verifiers.v1.harnesses.codex": "OpenAI Responses",
}

# Namespaces verifiers searches before a top-level module of the same name.
_PLUGIN_NAMESPACES = {
    "taskset": "verifiers.v1.tasksets",
    "harness": "verifiers.v1.harnesses",
}

_MAX_SCHEMA_ERRORS = 5


# -- errors -----------------------------------------------------------------------------------


class ConfigError(SetupError, ValueError):
    """A problem with the Verifiers config or taskset; ``field`` names what to change."""

    def __init__(self, message: str, *, field: str, fix: str) -> None:
        self.field = field
        self.fix = fix
        super().__init__(f"{message} Fix: {fix}")


class ConfigPathError(ConfigError):
    """``VERIFIERS_CONFIG`` is unset, or points at something that is not a TOML file."""


class ConfigSyntaxError(ConfigError):
    """The config file is not valid TOML."""


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

    def __init__(
        self,
        message: str,
        *,
        field: str,
        fix: str,
        plugin_id: str,
        module: str,
        install_command: str,
    ) -> None:
        self.plugin_id = plugin_id
        self.module = module
        self.install_command = install_command
        super().__init__(message, field=field, fix=fix)


class TasksetError(ConfigError):
    """The taskset could not be selected, loaded or used."""


class NoTasksetSelectedError(TasksetError):
    """The config names no taskset."""


class TasksetNotInstalledError(PluginNotInstalledError, TasksetError):
    """The taskset package is not installed."""


class HarnessNotInstalledError(PluginNotInstalledError):
    """The harness package is not installed."""


class TasksetLoadError(TasksetError):
    """Building the environment or calling the taskset's ``load()`` failed."""


class EmptyTasksetError(TasksetError):
    """The taskset loaded zero tasks."""


class GroupRewardSampleCountError(ConfigError):
    """``@group_reward`` tasks need at least two rollouts per task; ``flags`` names the counts."""

    def __init__(self, message: str, *, flags: Sequence[str], fix: str) -> None:
        self.flags = list(flags)
        super().__init__(message, field=", ".join(self.flags), fix=fix)


# -- 3. the config file -------------------------------------------------------------------------


def config_path_from_env(environ: Mapping[str, str] | None = None) -> Path:
    """The config path from ``VERIFIERS_CONFIG``, made absolute against the working directory."""
    env = os.environ if environ is None else environ
    raw = (env.get(CONFIG_ENV_VAR) or "").strip()
    if not raw:
        raise ConfigPathError(
            f"{CONFIG_ENV_VAR} is not set, so there is no Verifiers config to load. The rollout "
            "function runs inside Miles' RolloutManager (a Ray actor), which sees only the "
            "environment Ray hands it.",
            field=CONFIG_ENV_VAR,
            fix=f"set {CONFIG_ENV_VAR}=/abs/path/to/env.toml where the rollout manager runs: "
            "in Ray's runtime_env env_vars for the job, or in the environment of every Ray "
            "node before it starts.",
        )
    return Path(raw).expanduser().absolute()


def parse_config_text(text: str, path: Path) -> dict[str, Any]:
    """Parse TOML text; ``path`` only labels the error."""
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        raise ConfigSyntaxError(
            f"{CONFIG_ENV_VAR} file {path} is not valid TOML: {error}.",
            field=CONFIG_ENV_VAR,
            fix="correct the TOML at the position shown (strings need quotes, tables use "
            "[section] headers).",
        ) from error


def read_config_file(path: Path) -> dict[str, Any]:
    """Read and parse the config file at ``path``."""
    if path.suffix.lower() != ".toml":
        raise ConfigPathError(
            f"{CONFIG_ENV_VAR}={path} does not name a .toml file; Verifiers configs are TOML.",
            field=CONFIG_ENV_VAR,
            fix=f"point {CONFIG_ENV_VAR} at the environment's .toml config.",
        )
    if not path.is_file():
        what = "is a directory" if path.is_dir() else "does not exist"
        raise ConfigPathError(
            f"{CONFIG_ENV_VAR}={path} {what} (as seen from {os.getcwd()}, the working "
            "directory of this process).",
            field=CONFIG_ENV_VAR,
            fix="use an absolute path to an existing file, readable on the machine that runs "
            "the rollout manager.",
        )
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigPathError(
            f"{CONFIG_ENV_VAR} file {path} cannot be read: {error}.",
            field=CONFIG_ENV_VAR,
            fix="make the file readable UTF-8 text.",
        ) from error
    return parse_config_text(text, path)


def _field_path(loc: Sequence[Any]) -> str:
    return ".".join(str(part) for part in loc) or "(root)"


def _shorten(message: str, limit: int = 160) -> str:
    first_line = message.strip().splitlines()[0] if message.strip() else message
    return first_line if len(first_line) <= limit else first_line[: limit - 3] + "..."


def schema_error(error: ValidationError, path: Path, table: str | None = None) -> ConfigSchemaError:
    """A short, field-by-field account of pydantic's verdict; ``table`` prefixes the fields."""
    prefix: tuple[Any, ...] = (table,) if table else ()
    details = [(_field_path(prefix + tuple(e["loc"])), _shorten(e["msg"])) for e in error.errors()]
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


def _module_exists(name: str, find_spec: Callable[[str], Any]) -> bool:
    try:
        return find_spec(name) is not None
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


def check_plugin_installed(
    plugin_id: str,
    kind: str,
    find_spec: Callable[[str], Any] = importlib.util.find_spec,
) -> None:
    """Raise when the package behind a taskset/harness id cannot be imported.

    Checked before verifiers sees the config, also because verifiers would otherwise try to
    install a missing Hub id over the network from inside the trainer.
    """
    module = plugin_module(plugin_id)
    namespaced = f"{_PLUGIN_NAMESPACES[kind]}.{module}"
    if _module_exists(namespaced, find_spec) or _module_exists(module, find_spec):
        return
    command = install_command(plugin_id)
    error_cls = TasksetNotInstalledError if kind == "taskset" else HarnessNotInstalledError
    raise error_cls(
        f"{kind} {plugin_id!r} from {CONFIG_ENV_VAR} is not installed: no module {module!r} can "
        "be imported in this Python environment.",
        field=f"{kind}.id",
        fix=f"install it where the rollout manager runs: `{command}` (or `pip install -e "
        f"<path>` for a local checkout of the package providing {module!r}), or correct "
        f"[{kind}] id.",
        plugin_id=plugin_id,
        module=module,
        install_command=command,
    )


def check_plugins_installed(
    data: Mapping[str, Any], find_spec: Callable[[str], Any] = importlib.util.find_spec
) -> None:
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
    check_plugin_installed(str(taskset_id), "taskset", find_spec)
    harness_id = _raw_table(data, "harness").get("id")
    if harness_id:
        check_plugin_installed(str(harness_id), "harness", find_spec)


def _validate_plugin_tables(data: Mapping[str, Any], path: Path) -> None:
    """Validate ``[taskset]`` and ``[harness]`` against their plugin's own config class.

    verifiers does the same while narrowing them inside ``EnvConfig``, but its errors then
    lose the table name; checking here first gives paths like ``taskset.split``.
    """
    from pydantic import ValidationError
    from verifiers.v1.loaders import default_harness_id, harness_config_type, taskset_config_type

    taskset_id = str(_raw_table(data, "taskset").get("id") or "")
    harness_id = str(_raw_table(data, "harness").get("id") or default_harness_id(taskset_id))
    for table, plugin_id, resolve in (
        ("taskset", taskset_id, taskset_config_type),
        ("harness", harness_id, harness_config_type),
    ):
        raw = data.get(table, {})
        if not plugin_id or not isinstance(raw, Mapping):
            continue  # EnvConfig reports a table of the wrong type itself
        try:
            resolve(plugin_id).model_validate({**raw, "id": plugin_id})
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


def harness_dialect(harness_cls: type) -> str:
    """The wire dialect a harness program speaks ('chat' unless known otherwise)."""
    module = harness_cls.__module__
    for prefix, dialect in NON_CHAT_HARNESS_MODULES.items():
        if module == prefix or module.startswith(prefix + "."):
            return dialect
    return "chat"


def check_chat_harness(config: EnvConfig) -> None:
    from verifiers.v1.loaders import harness_class

    dialect = harness_dialect(harness_class(config.harness.id))
    if dialect != "chat":
        raise UnsupportedHarnessError(
            f"harness {config.harness.id!r} talks to the model in the {dialect} dialect; the "
            "Miles transport renders chat-completion requests to token ids and serves no "
            "other dialect.",
            field="harness.id",
            fix='pick a chat-completions harness in [harness] id (e.g. "default" or "null").',
        )


def load_env_config(
    path: Path, find_spec: Callable[[str], Any] = importlib.util.find_spec
) -> EnvConfig:
    """Step 3 (and the install check of step 4): the validated V1 ``EnvConfig`` at ``path``."""
    return env_config_from_data(read_config_file(path), path, find_spec)


def env_config_from_data(
    data: Mapping[str, Any],
    path: Path,
    find_spec: Callable[[str], Any] = importlib.util.find_spec,
) -> EnvConfig:
    """The validated ``EnvConfig`` from a parsed config (``path`` names it in errors)."""
    check_not_legacy(data, path)
    check_plugins_installed(data, find_spec)
    config = validate_env_config(data, path)
    check_chat_harness(config)
    return config


# -- 4. the taskset ---------------------------------------------------------------------------


@dataclass(frozen=True)
class LoadedTaskset:
    environment: Environment
    tasks: tuple[Any, ...]
    # True when the task type defines @group_reward scorers (needs >= 2 rollouts per task).
    has_group_reward: bool


def has_group_reward(tasks: Sequence[Any]) -> bool:
    from verifiers.v1.decorators import discover_decorated

    seen: set[type] = set()
    for task in tasks:
        if type(task) in seen:
            continue
        seen.add(type(task))
        if discover_decorated(task, "group_reward"):
            return True
    return False


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


# -- 5. group rewards vs sample counts -------------------------------------------------------


def check_group_reward_sample_counts(group_reward: bool, options: MilesOptions) -> None:
    """``@group_reward`` compares a task's rollouts, so each mode in use needs >= 2 of them."""
    if not group_reward:
        return
    short: list[str] = []
    if options.train_enabled and options.n_samples_per_prompt < 2:
        short.append(f"--n-samples-per-prompt (is {options.n_samples_per_prompt})")
    if options.eval_enabled and options.n_samples_per_eval_prompt < 2:
        short.append(f"--n-samples-per-eval-prompt (is {options.n_samples_per_eval_prompt})")
    if short:
        flags = [entry.split(" ", 1)[0] for entry in short]
        raise GroupRewardSampleCountError(
            "the taskset's tasks define @group_reward scorers, which rank the rollouts of one "
            f"task against each other and need at least 2 of them: {', '.join(short)}.",
            flags=flags,
            fix=f"pass {' and '.join(f'{flag} 2' for flag in flags)} or more.",
        )


# -- the whole sequence ---------------------------------------------------------------------


@dataclass(frozen=True)
class PreparedRun:
    versions: Mapping[str, str]
    options: MilesOptions
    config_path: Path
    config: EnvConfig
    taskset: LoadedTaskset


def prepare_run(
    args: Any,
    environ: Mapping[str, str] | None = None,
    version_of: Callable[[str], str] = importlib.metadata.version,
) -> PreparedRun:
    """Run the checks of steps 1-5 in order and return what they produced.

    ``environ`` defaults to ``os.environ``; ``version_of`` reads an installed version. The
    checks are the stages of :mod:`miles_verifiers.trainer.construction`, the rollout function's one
    construction path.
    """
    # Imported here: the construction table is built from this module's checks.
    from miles_verifiers.trainer import construction

    given = construction.inputs(
        args, environ=environ, use_miles=False, dispatch_budget_factor=1, version_of=version_of
    )
    stages = construction.stages_named("versions", "options", "config", "taskset", "group reward")
    made = construction.build(given, stages)
    return PreparedRun(
        made["versions"], made["options"], made["config_path"], made["config"], made["taskset"]
    )
