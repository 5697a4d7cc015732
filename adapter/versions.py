"""Gate on the installed verifiers/renderers/mcp versions, with the reason for each bound.

The adapter drives Verifiers' V1 API and private pieces of renderers that later releases
removed, and pip happily resolves versions that break at the first request: so the range is
checked up front, and every rejection says why its bound exists.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from packaging.version import InvalidVersion, Version

from miles_verifiers.errors import SetupError


@dataclass(frozen=True)
class VersionRule:
    """``minimum <= version < below`` for one distribution, with the reason for each end."""

    distribution: str
    minimum: str
    below: str
    too_old: str
    too_new: str
    # Another way out, when the version cannot change in this process.
    otherwise: str = ""

    @property
    def spec(self) -> str:
        return f"{self.distribution}>={self.minimum},<{self.below}"

    @property
    def fix(self) -> str:
        install = f'pip install "{self.spec}"'
        return f"{install}; or {self.otherwise}" if self.otherwise else install


SUPPORTED_VERSIONS: tuple[VersionRule, ...] = (
    VersionRule(
        distribution="verifiers",
        minimum="0.2.0",
        below="0.2.1",
        too_old="the Verifiers V1 API the adapter drives (Environment, Episode, TrainClient) "
        "first shipped in 0.2.0",
        too_new="0.2.1 needs openai>=2.9, which cannot share a process with SGLang's openai "
        "pin, and changes the EnvConfig schema; 0.3 and later drop Environment and "
        "@group_reward altogether",
        otherwise="leave this process as it is and run the episodes in a virtualenv of their own "
        "(python -m venv /opt/episodes && /opt/episodes/bin/pip install "
        "'miles-verifiers[verifiers02]' <your taskset package>), then set "
        "MILES_VERIFIERS_EPISODE_WORKER_PYTHON=/opt/episodes/bin/python",
    ),
    VersionRule(
        distribution="renderers",
        minimum="0.1.8",
        below="0.1.11",
        too_old="verifiers 0.2.0 needs renderers 0.1.8 or later (earlier releases, "
        "pre-releases included, lack the token-level client it calls)",
        too_new="0.1.11 removed RendererPool and renderers.client._maybe_offload, which "
        "verifiers 0.2.0 imports on every model turn, so every rollout would fail",
    ),
    VersionRule(
        distribution="mcp",
        minimum="1.14.1",
        below="2",
        too_old="verifiers 0.2.0 needs mcp 1.14.1 or later for its tool and user servers",
        too_new="mcp 2 removed mcp.server.fastmcp, which every verifiers 0.2.0 tool server "
        "and user simulator imports",
    ),
)


# What an episode worker (MILES_VERIFIERS_EPISODE_WORKER_PYTHON) may run instead; never the
# trainer's process: 0.4 needs openai>=2.54, SGLang pins openai 2.8.
WORKER_VERSIONS_04: tuple[VersionRule, ...] = (
    VersionRule(
        distribution="verifiers",
        minimum="0.4.0",
        below="0.4.1",
        too_old="0.3.x changed the V1 API again in 0.4.0 (errors, branch trainability); the "
        "episode worker drives 0.4.0 only",
        too_new="only 0.4.0 has been checked against the episode worker: the V1 API has "
        "changed in every release so far",
    ),
    VersionRule(
        distribution="renderers",
        minimum="0.1.12",
        below="0.2",
        too_old="verifiers 0.4.0 calls renderers' generate with process_multimodal, added in 0.1.12",
        too_new="0.2 is an untested major change of the renderer API verifiers 0.4.0 calls",
    ),
    VersionRule(
        distribution="mcp",
        minimum="2.0.0",
        below="2.1",
        too_old="verifiers 0.4.0 requires mcp 2.0.0 exactly",
        too_new="verifiers 0.4.0 requires mcp 2.0.0 exactly",
    ),
)


def uses_slots_api(verifiers_version: str | None) -> bool:
    """Whether ``verifiers_version`` is 0.3 or newer (Env/slots/run_slot, not Environment/Episode);
    an unreadable or missing version is not (the 0.2 path's own gate then reports it)."""
    try:
        version = Version(verifiers_version or "")
    except InvalidVersion:
        return False
    return Version(version.base_version) >= Version("0.3")


@dataclass(frozen=True)
class VersionProblem:
    distribution: str
    found: str | None
    reason: str
    fix: str

    def describe(self) -> str:
        found = "not installed" if self.found is None else f"found {self.found}"
        return f"{self.distribution} ({found}): {self.reason}. Fix: {self.fix}"


class UnsupportedVersionError(SetupError, RuntimeError):
    """Installed dependency versions the adapter cannot run with (all of them at once)."""

    def __init__(self, problems: Sequence[VersionProblem]) -> None:
        self.problems = tuple(problems)
        lines = "\n".join(f"  - {p.describe()}" for p in self.problems)
        super().__init__(
            "The Verifiers rollout function cannot run with the installed packages:\n" + lines
        )

    @property
    def distributions(self) -> list[str]:
        return [p.distribution for p in self.problems]


def _out_of_range(rule: VersionRule, found: str | None) -> str | None:
    if found is None:
        return f"it is required ({rule.spec})"
    try:
        version = Version(found)
    except InvalidVersion:
        return f"this is not a PEP 440 version, so it cannot be checked against {rule.spec}"
    if version < Version(rule.minimum):
        return f"older than {rule.minimum}: {rule.too_old}"
    # Compare the release part so that pre-releases of the excluded version (0.1.11.dev1,
    # 0.2.1rc1), which PEP 440 orders below it, are rejected too.
    if Version(version.base_version) >= Version(rule.below):
        return f"{rule.below} or newer: {rule.too_new}"
    return None


def check_versions(
    installed: Mapping[str, str | None], rules: Sequence[VersionRule] = SUPPORTED_VERSIONS
) -> list[VersionProblem]:
    """Every problem across ``rules``; a distribution absent from ``installed`` is missing."""
    found = [(rule, installed.get(rule.distribution)) for rule in rules]
    return [
        VersionProblem(rule.distribution, version, reason, rule.fix)
        for rule, version in found
        if (reason := _out_of_range(rule, version)) is not None
    ]


def installed_versions(
    distributions: Sequence[str],
    version_of: Callable[[str], str] = importlib.metadata.version,
) -> dict[str, str | None]:
    found: dict[str, str | None] = {}
    for name in distributions:
        try:
            found[name] = version_of(name)
        except importlib.metadata.PackageNotFoundError:
            found[name] = None
    return found


def require_supported_versions(
    rules: Sequence[VersionRule] = SUPPORTED_VERSIONS,
    version_of: Callable[[str], str] = importlib.metadata.version,
) -> dict[str, str]:
    """Return the installed versions, or raise :class:`UnsupportedVersionError`."""
    installed = installed_versions([r.distribution for r in rules], version_of)
    problems = check_versions(installed, rules)
    if problems:
        raise UnsupportedVersionError(problems)
    return {name: version for name, version in installed.items() if version is not None}
