"""What the trainer side derives from Miles' ``args`` to reach the engines: their address (read
at call time: Miles starts SGLang after building the rollout function), each mode's transport
settings and sampling values."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from miles_verifiers.engine.routers import RouterKind, keys_dropped_by_router
from miles_verifiers.engine.sampling import RENAMED_KEYS
from miles_verifiers.engine.settings import RoutingPolicy, TransportSettings
from miles_verifiers.errors import SetupError


class EngineAddressUnsetError(SetupError, ValueError):
    """Miles has not set the SGLang router address on ``args`` yet."""


def engine_url_from_args(args: Any) -> str:
    """The router (or engine) base URL Miles set on ``args``: ``sglang_model_routers["default"]``
    when it serves several models, else ``sglang_router_ip``/``sglang_router_port``."""
    routers = getattr(args, "sglang_model_routers", None)
    if isinstance(routers, Mapping) and routers.get("default"):
        host, port = routers["default"]
    else:
        host = getattr(args, "sglang_router_ip", None)
        port = getattr(args, "sglang_router_port", None)
    if not host or not port:
        raise EngineAddressUnsetError(
            "the SGLang router address is not set (args.sglang_router_ip/sglang_router_port "
            "are empty). Miles fills them in when it starts the rollout engines, after building "
            "the rollout function; call the rollout function only after that, or pass "
            "--sglang-router-ip and --sglang-router-port for an engine you run yourself."
        )
    host = str(host)
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 literal
    return f"http://{host}:{int(port)}"


def build_transport_settings(
    options: Any, mode: str, args: Any, model_name: str
) -> TransportSettings:
    """The transport settings of ``mode`` ("train" or "eval"); the address is read at each use."""
    sampling = options.train if mode == "train" else options.eval
    routing = (
        RoutingPolicy(options.sglang_router_policy) if options.routes_by_key else RoutingPolicy.NONE
    )
    router = RouterKind.for_miles(options.use_miles_router)
    # With --lora-train-only the engines serve the base model only (no adapter is loaded).
    lora_path = "miles_lora" if options.lora_enabled and not options.lora_train_only else None
    return TransportSettings(
        engine_url=functools.partial(engine_url_from_args, args),
        max_response_len=sampling.max_response_len,
        context_len=sampling.max_context_len,
        max_prompt_len=sampling.max_prompt_len,
        served_model_names=(model_name,),
        stop_token_ids=tuple(sampling.stop_token_ids or ()),
        stop=tuple(sampling.stop or ()),
        skip_special_tokens=sampling.skip_special_tokens,
        lora_path=lora_path,
        routing=routing,
        max_connections=max(1, min(options.max_concurrency, 1024)),
        probe_engine_limits=True,
        router=router,
    )


def router_drop_warning(values: Mapping[str, Any], router: Any, mode: str) -> str | None:
    """The warning for configured sampling keys the router drops (the run goes on without them)."""
    lost = keys_dropped_by_router((RENAMED_KEYS.get(key, key) for key in values), router)
    if not lost:
        return None
    return (
        f"{mode} sampling sets {', '.join(lost)}, which the {router.value} in front of the "
        "engines drops without an error, so it has no effect. Run Miles with "
        "--use-miles-router (its router forwards every key), or leave it unset."
    )


def sampling_config_values(sampling: Any, seed: int | None = None) -> dict[str, Any]:
    """The Verifiers ``SamplingConfig`` fields for one mode's sampling options (template
    switches are not among them: they are baked into the shared renderer pool)."""
    values: dict[str, Any] = {
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "max_tokens": sampling.max_response_len,
    }
    if sampling.top_k is not None:
        values["top_k"] = sampling.top_k
    if sampling.min_new_tokens is not None:
        values["min_tokens"] = sampling.min_new_tokens
    if seed is not None:
        values["sampling_seed"] = seed
    return values
