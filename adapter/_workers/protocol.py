"""The messages between the rollout function and its episode workers, and their version.

Everything here is plain JSON (pydantic models): no pickled Verifiers object crosses, so a
worker may run another Verifiers version than the trainer process, as long as it speaks the
same major protocol version. A worker refuses a request of another major version with an
error that names both versions.

Every request is a :class:`Request` (``version``, ``id``, one ``body``); the worker answers
each with a :class:`Reply` of the same ``id``.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from miles_verifiers._errors import RolloutCallError
from miles_verifiers._workers.records import TraceRecord

PROTOCOL_VERSION = "1.0"


class ProtocolVersionError(RolloutCallError, ValueError):
    """A message was written for a protocol version this side cannot read."""


def major(version: str) -> int:
    head = version.split(".", 1)[0]
    if not head.isdigit():
        raise ProtocolVersionError(
            f"episode worker protocol version {version!r} is not '<major>.<minor>'"
        )
    return int(head)


def check_version(version: str, *, ours: str = PROTOCOL_VERSION) -> None:
    """Refuse ``version`` unless its major number equals ours (minor additions are compatible)."""
    if major(version) != major(ours):
        raise ProtocolVersionError(
            f"this episode worker speaks protocol {ours} and cannot serve a request of "
            f"protocol {version}. Fix: install the same miles-verifiers major version in the "
            "worker's environment as in the trainer's."
        )


class _Message(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# -- requests ----------------------------------------------------------------------------------


class CleanupSpec(_Message):
    """Seconds each wind-down step of a call may take on the worker (see ``CleanupLimits``)."""

    abort_s: float
    grace_s: float
    shutdown_s: float
    handler_s: float


class RendererSpecModel(_Message):
    tokenizer_source: str
    identity: str | None
    chat_template_kwargs_json: str = "{}"
    pool_size: int = Field(2, ge=1)


class WorkerSetup(_Message):
    """Sent once to a fresh worker: what it needs to build environments and clients."""

    kind: Literal["setup"] = "setup"
    config_path: str
    config_text: str
    expected_tasks: int = Field(ge=1)
    renderer: RendererSpecModel
    # TransportSettings without engine_url and rid_prefix (both known per call).
    transport: dict[str, dict[str, Any]]
    cleanup: CleanupSpec
    # Import paths of the trainer process, added where they exist (taskset packages on them).
    sys_path: list[str] = Field(default_factory=list)


class CallStart(_Message):
    kind: Literal["call_start"] = "call_start"
    call_id: str
    mode: Literal["train", "eval"]
    # This worker's own rid prefix for the call: its aborts reach only its requests.
    rid_prefix: str
    engine_url: str
    model: str
    max_concurrency: int = Field(ge=1)


class CallEnd(_Message):
    kind: Literal["call_end"] = "call_end"
    call_id: str


class GroupRequest(_Message):
    """Run one task's episode: rollout ``k`` samples with ``sampling[k]`` (seeds included)."""

    kind: Literal["group"] = "group"
    call_id: str
    slot: int
    task_index: int = Field(ge=0)
    sampling: list[dict[str, Any]] = Field(min_length=1)
    deadline_s: float = Field(gt=0)

    @property
    def n(self) -> int:
        return len(self.sampling)


RequestBody = Annotated[
    WorkerSetup | CallStart | CallEnd | GroupRequest, Field(discriminator="kind")
]


class Request(_Message):
    version: str = PROTOCOL_VERSION
    id: int
    body: RequestBody


# -- replies -------------------------------------------------------------------------------------


class EpisodeErrorRecord(_Message):
    """Why an episode failed as a whole (its class name and message)."""

    type: str
    message: str


class GroupResult(_Message):
    kind: Literal["group_result"] = "group_result"
    traces: list[TraceRecord]
    failure: Literal["episode_error", "episode_timeout"] | None = None
    error: EpisodeErrorRecord | None = None


class Done(_Message):
    kind: Literal["done"] = "done"


class Refused(_Message):
    """The worker could not carry out the request (a setup problem, an unknown call ...)."""

    kind: Literal["refused"] = "refused"
    error_type: str
    message: str


ReplyBody = Annotated[GroupResult | Done | Refused, Field(discriminator="kind")]


class Reply(_Message):
    version: str = PROTOCOL_VERSION
    id: int
    body: ReplyBody


def read_request(data: bytes | str) -> Request:
    """Parse a request, refusing another major version before reading its body."""
    import json

    raw = json.loads(data)
    version = raw.get("version") if isinstance(raw, dict) else None
    if not isinstance(version, str):
        raise ProtocolVersionError("an episode worker request carries no protocol version")
    check_version(version)
    return Request.model_validate(raw)


def read_reply(data: bytes | str) -> Reply:
    import json

    raw = json.loads(data)
    version = raw.get("version") if isinstance(raw, dict) else None
    if not isinstance(version, str):
        raise ProtocolVersionError("an episode worker reply carries no protocol version")
    check_version(version)
    return Reply.model_validate(raw)
