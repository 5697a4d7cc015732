"""Which model the engine serves, compared with the one the run trains.

SGLang's ``GET /model_info`` names the checkpoint it loaded (``model_path``) and its tokenizer
(``tokenizer_path``). Miles starts its engines with ``--model-path <--hf-checkpoint>``, so the
common case is an exact match; a local copy and the hub id of the same model (``/models/Qwen3-0.6B``
vs ``Qwen/Qwen3-0.6B``, or an HF cache snapshot of it) are also accepted, by their last name
component. Pure functions only.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath

from miles_verifiers.errors import SetupError

__all__ = ["EngineModelMismatchError", "check_served_model", "model_key", "served_models"]

# Fields of /model_info that name what the engine loaded, in the order they are reported.
SERVED_MODEL_FIELDS = ("model_path", "tokenizer_path")


class EngineModelMismatchError(SetupError, RuntimeError):
    """The engine serves another model than the one this run trains (a setup error)."""


def model_key(name: str) -> str:
    """The comparable name of a model: the last path component (an HF cache snapshot gives the
    repo name from its ``models--org--name`` folder), case-folded."""
    parts = PurePosixPath(name.strip().rstrip("/")).parts
    for part in reversed(parts):
        if part.startswith("models--"):
            return part.rsplit("--", 1)[-1].casefold()
    return (parts[-1] if parts else "").casefold()


def served_models(model_info: object) -> tuple[str, ...]:
    """The model names a ``/model_info`` answer reports (empty when it reports none)."""
    if not isinstance(model_info, Mapping):
        return ()
    names = (model_info.get(field) for field in SERVED_MODEL_FIELDS)
    return tuple(dict.fromkeys(n for n in names if isinstance(n, str) and n.strip()))


def check_served_model(
    expected: str, model_info: object, engine_url: str, *, aliases: Sequence[str] = ()
) -> None:
    """Raise :class:`EngineModelMismatchError` when ``model_info`` names only other models.

    ``aliases`` are other names the run knows its model by (``--sglang-tokenizer-path``, which
    an engine launched with ``--tokenizer-path`` reports). An answer that names no model at all
    proves nothing and passes.
    """
    served = served_models(model_info)
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
