"""Rendered prompts for every model identity the project builds tokenizers for.

These pin what Renderers (through Verifiers' TrainClient) feeds the engine: when a Renderers
or Verifiers release changes a template, a bridge or a span, the snapshot diff and the drift
summary say which case changed and where. The prompts are rendered where the episodes run (the
worker interpreter when one is set), and each Renderers release has its own snapshot folder,
so the output of every release a supported Verifiers pulls in stays side by side. Refresh with
``tox -e snapshots -- --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from miles_verifiers_conformance.render_corpus import IDENTITIES, cases_for
from miles_verifiers_conformance.snapshots import rendered_prompts

PARAMS = [
    pytest.param(f"{identity.slug}-{case}", id=f"{identity.slug}-{case}")
    for identity in IDENTITIES
    for case in cases_for(identity)
]


@pytest.fixture(scope="session")
def rendered() -> dict[str, str]:
    return rendered_prompts()


@pytest.mark.clause("SNP-1")
@pytest.mark.parametrize("case", PARAMS)
def test_rendered_prompt_matches_snapshot(
    case: str, rendered: dict[str, str], renderers_snapshot: Callable[[str], None]
) -> None:
    renderers_snapshot(rendered[case])
