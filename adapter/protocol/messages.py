"""The messages between the rollout function and its episode workers, and their version.

Plain JSON, no pickled Verifiers object: a worker may run another Verifiers in another
interpreter if it speaks the same major protocol version (a newer minor's fields are ignored).
Each :class:`Request` is answered by the :class:`Reply` of its ``id``; a setup by :class:`Ready`.
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal

from pydantic import Field

from miles_verifiers.errors import RolloutCallError
from miles_verifiers.protocol.records import (
    EpisodeErrorRecord,
    ProtocolModel,
    TaskRecord,
    TraceRecord,
)

# 2.1 added Verifiers' verdicts to the trace record and the 0.4 seats to the description.
PROTOCOL_VERSION = "2.1"
# The class that answers these messages (``pkgutil.resolve_name``), named by a string: the
# trainer side must not import the episode side, yet the in-process backend and Ray actors run it.
HANDLER = "miles_verifiers.episodes.worker:WorkerHandler"


class ProtocolVersionError(RolloutCallError, ValueError):
    """A message was written for a protocol version this side cannot read."""


def check_version(version: str, *, we: str, they: str) -> None:
    """Refuse ``version`` unless its major number equals ours (minor additions are compatible)."""
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise ProtocolVersionError(
            f"episode worker protocol version {version!r} is not '<major>.<minor>'"
        )
    if int(head) != int(PROTOCOL_VERSION.split(".", 1)[0]):
        raise ProtocolVersionError(
            f"the {we} speaks episode worker protocol {PROTOCOL_VERSION} and the {they} speaks "
            f"protocol {version}; different major versions cannot talk. Fix: install the same "
            "miles-verifiers release in the worker's environment as in the trainer's."
        )


class CleanupSpec(ProtocolModel):
    """Seconds each wind-down step of a call may take, on the trainer and on the worker."""

    abort_s: float = 10.0
    grace_s: float = 10.0
    shutdown_s: float = 15.0
    # How long interception servers wait, at the call's end, for handlers still running.
    handler_s: float = 1.0


class RendererSpecModel(ProtocolModel):
    tokenizer_source: str
    identity: str | None
    chat_template_kwargs_json: str = "{}"
    pool_size: int = Field(2, ge=1)


class WorkerSetup(ProtocolModel):
    """Sent once to a fresh worker: what it needs to build environments and clients."""

    kind: Literal["setup"] = "setup"
    config_path: str
    config_text: str
    expected_tasks: int = Field(ge=1)
    renderer: RendererSpecModel
    # TransportSettings without engine_url and rid_prefix (both known per call).
    transport: dict[str, dict[str, Any]]
    cleanup: CleanupSpec


class CallStart(ProtocolModel):
    kind: Literal["call_start"] = "call_start"
    call_id: str
    mode: Literal["train", "eval"]
    # This worker's own rid prefix for the call: its aborts reach only its requests.
    rid_prefix: str
    engine_url: str
    model: str
    max_concurrency: int = Field(ge=1)


class CallEnd(ProtocolModel):
    kind: Literal["call_end"] = "call_end"
    call_id: str


class GroupRequest(ProtocolModel):
    """Run one task's episode: rollout ``k`` samples with ``sampling[k]`` (seeds included)."""

    kind: Literal["group"] = "group"
    call_id: str
    slot: int
    task_index: int = Field(ge=0)
    sampling: list[dict[str, Any]] = Field(min_length=1)
    deadline_s: float = Field(gt=0)


class DescribeRequest(ProtocolModel):
    """What is this taskset? Asked at construction, before any call."""

    kind: Literal["describe"] = "describe"
    config_path: str
    config_text: str
    # None: no tokenizer was named (the trainer reports that), so none is loaded.
    renderer: RendererSpecModel | None
    # The flags the renderer identity is found from, on the side that has Renderers.
    hf_checkpoint: str | None = None
    tokenizer_path: str | None = None


RequestBody = Annotated[
    WorkerSetup | CallStart | CallEnd | GroupRequest | DescribeRequest,
    Field(discriminator="kind"),
]


class Request(ProtocolModel):
    version: str = PROTOCOL_VERSION
    id: int
    body: RequestBody


class GroupResult(ProtocolModel):
    kind: Literal["group_result"] = "group_result"
    traces: list[TraceRecord]
    failure: Literal["episode_error", "episode_timeout"] | None = None
    error: EpisodeErrorRecord | None = None


class Done(ProtocolModel):
    kind: Literal["done"] = "done"


class Ready(ProtocolModel):
    """The worker's hello, answering its setup: what it speaks and runs."""

    kind: Literal["ready"] = "ready"
    protocol: str = PROTOCOL_VERSION
    # Distribution name -> installed version (miles-verifiers, verifiers, renderers, python).
    versions: dict[str, str] = Field(default_factory=dict)


class RuntimeDescription(ProtocolModel):
    """A runtime the config names; ``local``: Verifiers' ``runtime_is_local``."""

    type: str
    local: bool


class SeatDescription(ProtocolModel):
    """One seat (agent) of a Verifiers 0.4 environment, as its config and ``setup()`` leave it."""

    name: str
    # Its standing after the environment's setup(); None: setup() could not be run to see it.
    trainable: bool | None
    # Only the keys the config sets under [<seat>.sampling] (merged over the run's sampling).
    sampling: dict[str, Any] = Field(default_factory=dict)
    model: str | None = None  # [<seat>] model, when pinned
    has_client: bool = False  # whether [<seat>.client] is set
    runtime: RuntimeDescription
    # Traces one episode makes this seat produce (best-of-n: its n); None: run() decides.
    runs_per_episode: int | None = None


class ServiceRuntimeDescription(ProtocolModel):
    """A runtime outside the seats: a tool server's, or one the config names elsewhere."""

    role: Literal["toolset", "config"]
    name: str  # the toolset class, or the config path
    # The TOML table that sets it; None when the taskset's code does (Task.toolsets).
    key: str | None
    runtime: RuntimeDescription


class Description(ProtocolModel):
    """What construction checks that needs the taskset loaded (the trainer never loads it)."""

    kind: Literal["description"] = "description"
    env_id: str
    tasks: list[TaskRecord] = Field(min_length=1)
    has_group_reward: bool
    # The Renderers model id prompts are rendered as (None: the tokenizer's own name).
    renderer_identity: str | None
    vocab_size: int | None = None
    versions: dict[str, str] = Field(default_factory=dict)
    # Verifiers 0.4 only (None from a 0.2 worker): the environment's class, its seats in order.
    env_type: str | None = None
    seats: list[SeatDescription] | None = None
    service_runtimes: list[ServiceRuntimeDescription] = Field(default_factory=list)
    # What loading the config set aside, one sentence each; the trainer warns with them.
    config_notes: list[str] = Field(default_factory=list)
    # The tables the environment config sits under (["env"] in a vf-eval file).
    config_prefix: list[str] = Field(default_factory=list)


class Refused(ProtocolModel):
    """The worker could not carry out the request (a setup problem, an unknown call ...)."""

    kind: Literal["refused"] = "refused"
    error_type: str
    message: str
    # The class's bases, nearest first: the other side raises the nearest one it knows.
    error_bases: tuple[str, ...] = ()


ReplyBody = Annotated[
    GroupResult | Done | Ready | Description | Refused, Field(discriminator="kind")
]


class Reply(ProtocolModel):
    version: str = PROTOCOL_VERSION
    id: int
    body: ReplyBody


def _read(data: bytes | str, what: str, we: str, they: str) -> dict[str, Any]:
    """The message's JSON, refusing another major version before its body is read."""
    raw = json.loads(data)
    version = raw.get("version") if isinstance(raw, dict) else None
    if not isinstance(version, str):
        raise ProtocolVersionError(f"an episode worker {what} carries no protocol version")
    check_version(version, we=we, they=they)
    return raw


def read_request(data: bytes | str) -> Request:
    return Request.model_validate(_read(data, "request", "episode worker", "trainer"))


def read_reply(data: bytes | str) -> Reply:
    return Reply.model_validate(_read(data, "reply", "trainer", "episode worker"))
