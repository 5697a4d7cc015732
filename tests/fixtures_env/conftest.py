"""Checks that the fixture taskset packages are installed before these tests import them."""

import importlib.util

import pytest

ENV_PACKAGES = (
    "mv_arith",
    "mv_dialogue",
    "mv_tools",
    "mv_group",
    "mv_compact",
    "mv_longprompt",
    "mv_faulty",
)

_missing = [name for name in ENV_PACKAGES if importlib.util.find_spec(name) is None]
if _missing:
    raise ImportError(
        "fixture taskset packages are not installed: "
        + ", ".join(_missing)
        + ". Install them from the repository root with: "
        + " ".join(
            f"pip install --no-deps ./fixtures/environments/{name} &&" for name in _missing
        ).removesuffix(" &&")
    )


@pytest.fixture
def anyio_backend() -> str:
    """Async tests here run on asyncio, the loop Verifiers itself uses."""
    return "asyncio"
