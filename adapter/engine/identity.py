"""Which model the engine serves (``GET /model_info``), compared with the one the run trains.

Miles starts its engines with ``--model-path <--hf-checkpoint>``, so names usually match exactly;
a local copy and the hub id of one model (``/models/Qwen3-0.6B``, ``Qwen/Qwen3-0.6B``, an HF cache
snapshot) also match, by their last name component.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from miles_verifiers.errors import SetupError

# Fields of /model_info that name what the engine loaded, in the order they are reported.
SERVED_MODEL_FIELDS = ("model_path", "tokenizer_path")


class EngineModelMismatchError(SetupError, RuntimeError):
    """The engine serves another model than the one this run trains (a setup error)."""


def model_key(name: str) -> str:
    """The last path component (an HF cache snapshot's ``models--org--name``), case-folded."""
    parts = PurePosixPath(name.strip().rstrip("/")).parts
    for part in reversed(parts):
        if part.startswith("models--"):
            return part.rsplit("--", 1)[-1].casefold()
    return (parts[-1] if parts else "").casefold()


def check_served_model(
    expected: str, model_info: object, engine_url: str, *, aliases: Sequence[str] = ()
) -> None:
    """Refuse a ``model_info`` naming only other models than ``expected`` and its ``aliases``."""
    info = model_info if isinstance(model_info, Mapping) else {}
    names = (info.get(field) for field in SERVED_MODEL_FIELDS)
    served = tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n.strip()))
    known = [expected, *(a for a in aliases if a)]
    if not served or any(
        name == want or model_key(name) == model_key(want) for name in served for want in known
    ):
        return
    raise EngineModelMismatchError(
        f"the SGLang engine at {engine_url} serves {served[0]!r} (its /model_info "
        f"{'/'.join(SERVED_MODEL_FIELDS)}: {', '.join(repr(s) for s in served)}), but this run "
        f"trains {expected!r} (--hf-checkpoint). Samples from another model would be trained on "
        "as if they were the policy's. Fix: start the engine with --model-path "
        f"{expected} (Miles does this itself from --hf-checkpoint), or point "
        "--sglang-router-ip/--sglang-router-port at an engine that serves it."
    )
