"""Typed settings for the SGLang transport; the engine address may be a callable (Miles sets
the router's ip and port only after it has constructed the rollout function)."""

from __future__ import annotations

import enum
import re
from collections.abc import Callable
from typing import Annotated, Any

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from miles_verifiers.engine.routers import RouterKind
from miles_verifiers.errors import SetupError

DEFAULT_ROUTING_HEADER = "X-SMG-Routing-Key"
RID_PREFIX_PATTERN = re.compile(r"^[A-Za-z0-9_]{1,64}$")
# SGLang 0.5.23 refuses more than 32 stop strings; refuse them here, at configuration time.
MAX_STOP_STRINGS = 32

PositiveInt = Annotated[int, Field(gt=0)]


class EngineAddressError(SetupError, ValueError):
    """The engine/router address could not be resolved or is not an http(s) base URL."""


class RoutingPolicy(enum.StrEnum):
    """Router policies that read a routing key get the session id: a rollout's turns share a
    worker's prefix cache."""

    NONE = "none"
    CONSISTENT_HASHING = "consistent_hashing"
    MANUAL = "manual"

    @property
    def sends_routing_key(self) -> bool:
        return self is not RoutingPolicy.NONE


class TimeoutPolicy(BaseModel):
    """Seconds allowed for each phase of one HTTP call; all finite, so nothing waits forever."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    connect_s: float = Field(10.0, gt=0)
    # One /generate call lasts as long as its longest completion; generous but bounded.
    read_s: float = Field(1800.0, gt=0)
    write_s: float = Field(30.0, gt=0)
    # Waiting for a free pooled connection when more requests are in flight than connections.
    pool_s: float = Field(1800.0, gt=0)

    def to_httpx(self) -> httpx.Timeout:
        return httpx.Timeout(
            connect=self.connect_s, read=self.read_s, write=self.write_s, pool=self.pool_s
        )


class RetryPolicy(BaseModel):
    """Bounded retries with exponential backoff (connection failures and 5xx answers only)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    max_retries: int = Field(3, ge=0, le=20)
    initial_backoff_s: float = Field(0.5, ge=0)
    max_backoff_s: float = Field(8.0, ge=0)

    @model_validator(mode="after")
    def _ordered(self) -> RetryPolicy:
        if self.max_backoff_s < self.initial_backoff_s:
            raise ValueError(
                f"max_backoff_s ({self.max_backoff_s}) must be at least initial_backoff_s "
                f"({self.initial_backoff_s})"
            )
        return self

    def delays(self) -> tuple[float, ...]:
        """The sleep before each retry: initial, doubled each time, capped at max_backoff_s."""
        return tuple(
            min(self.max_backoff_s, self.initial_backoff_s * 2**attempt)
            for attempt in range(self.max_retries)
        )


class TransportSettings(BaseModel):
    """Everything the SGLang transport needs, validated once. Limits as Miles means them:
    ``max_response_len`` caps new tokens, ``context_len`` prompt plus new tokens,
    ``max_prompt_len`` a session's first prompt only."""

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    # The SGLang router's or engine's base URL, or a callable evaluated on every request.
    engine_url: str | Callable[[], str]
    max_response_len: PositiveInt
    context_len: PositiveInt | None = None
    max_prompt_len: PositiveInt | None = None
    served_model_names: tuple[str, ...] = ()
    # len(tokenizer): an engine answer with a token id at or above it is refused (None: unchecked).
    vocab_size: PositiveInt | None = None
    stop_token_ids: tuple[Annotated[int, Field(ge=0)], ...] = ()
    stop: tuple[str, ...] = ()
    no_stop_trim: bool = True
    skip_special_tokens: bool = False
    lora_path: str | None = None
    extra_key: str | None = None
    priority: int | None = None
    routing: RoutingPolicy = RoutingPolicy.NONE
    routing_header: str = DEFAULT_ROUTING_HEADER
    timeouts: TimeoutPolicy = TimeoutPolicy()
    retry: RetryPolicy = RetryPolicy()
    max_connections: PositiveInt = 512
    router: RouterKind = RouterKind.PASS_THROUGH  # the Rust one's dropped keys are warned about
    # Read the engine's limits from GET /server_info once per transport, keep requests inside.
    probe_engine_limits: bool = False
    session_cache_size: PositiveInt = 10_000
    rid_prefix: str | None = None  # of every rid sent; None: a random one per transport

    @field_validator("engine_url")
    @classmethod
    def _check_static_url(cls, value: Any) -> Any:
        if isinstance(value, str):
            _check_base_url(value)
        elif not callable(value):
            raise ValueError("must be a URL string or a zero-argument callable returning one")
        return value

    @field_validator("served_model_names", "stop")
    @classmethod
    def _strings(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        if any(not item for item in value):
            raise ValueError("every entry must be a non-empty string")
        if info.field_name == "stop" and len(value) > MAX_STOP_STRINGS:
            raise ValueError(
                f"at most {MAX_STOP_STRINGS} stop strings are accepted by SGLang, got {len(value)}"
            )
        return value

    @field_validator("lora_path", "extra_key")
    @classmethod
    def _empty_is_an_error(cls, value: str | None) -> str | None:
        if value is not None and not value:
            raise ValueError("must be a non-empty string, or None to leave it unset")
        return value

    @field_validator("routing_header")
    @classmethod
    def _header_name(cls, value: str) -> str:
        if not re.fullmatch(r"[A-Za-z0-9-]+", value):
            raise ValueError(f"{value!r} is not a valid HTTP header name")
        return value

    @field_validator("rid_prefix")
    @classmethod
    def _rid_prefix(cls, value: str | None) -> str | None:
        # No '-': rids are "<prefix>-<n>", so an abort by "<prefix>-" reaches no other transport.
        if value is not None and not RID_PREFIX_PATTERN.fullmatch(value):
            raise ValueError(
                f"{value!r} must be 1-64 characters of letters, digits or '_' (no '-')"
            )
        return value

    @model_validator(mode="after")
    def _limits_fit(self) -> TransportSettings:
        if self.context_len is not None:
            if self.context_len < 2:
                raise ValueError(
                    f"context_len={self.context_len} leaves no room for a prompt and a response; "
                    "use at least 2",
                )
            if self.max_prompt_len is not None and self.max_prompt_len > self.context_len - 1:
                raise ValueError(
                    f"max_prompt_len={self.max_prompt_len} must be at most context_len - 1 = "
                    f"{self.context_len - 1}, so a first prompt always leaves room to generate",
                )
        return self


def _check_base_url(url: str) -> None:
    try:
        parsed = httpx.URL(url)
    except (httpx.InvalidURL, TypeError) as exc:
        raise EngineAddressError(f"engine_url {url!r} is not a valid URL: {exc}") from exc
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise EngineAddressError(
            f"engine_url {url!r} must be an http(s) URL with a host, e.g. http://127.0.0.1:30000"
        )
    if parsed.query or parsed.fragment:
        raise EngineAddressError(f"engine_url {url!r} must not carry a query or fragment")


def resolve_engine_url(settings: TransportSettings) -> str:
    """The engine/router base URL, without a trailing slash, evaluated now."""
    source = settings.engine_url
    if isinstance(source, str):
        url = source
    else:
        try:
            url = source()
        except Exception as exc:
            raise EngineAddressError(
                f"the engine_url callable failed ({type(exc).__name__}: {exc}); the SGLang "
                "router address is probably not set yet"
            ) from exc
        if not isinstance(url, str):
            raise EngineAddressError(
                f"the engine_url callable returned {type(url).__name__}, expected a URL string"
            )
    _check_base_url(url)
    return url.rstrip("/")
