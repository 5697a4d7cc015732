"""Rendered prompts for every model identity the project builds tokenizers for.

These pin what Renderers (through Verifiers' TrainClient) feeds the engine: when a Renderers
or Verifiers release changes a template, a bridge or a span, the snapshot diff and the drift
summary say which case changed and where. Refresh with ``tox -e snapshots -- --snapshot-update``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from miles_verifiers_conformance.render_corpus import (
    CASES,
    IDENTITIES,
    CaseResult,
    Identity,
    RendererFactory,
    cases_for,
)
from miles_verifiers_conformance.snapshot_text import document, step_lines
from miles_verifiers_conformance.snapshots import (
    VERSIONS_FILE,
    installed_versions,
    read_versions,
    version_mismatch,
)

PARAMS = [
    pytest.param(identity, case, id=f"{identity.slug}-{case}")
    for identity in IDENTITIES
    for case in cases_for(identity)
]


@pytest.fixture(scope="session")
def tokenizer_for() -> Callable[[str], Any]:
    """Tokenizers loaded once per session, by hub id, as Renderers loads them."""
    from renderers.base import load_tokenizer

    loaded: dict[str, Any] = {}

    def get(model_id: str) -> Any:
        if model_id not in loaded:
            loaded[model_id] = load_tokenizer(model_id)
        return loaded[model_id]

    return get


def render_document(
    identity: Identity, case: str, result: CaseResult, decode: Callable[[list[int]], str]
) -> str:
    fields = {
        "model": identity.model_id,
        "case": case,
        "renderer": result.renderer,
        "chat_template_kwargs": dict(result.kwargs),
    }
    if result.rejected:
        fields["outcome"] = f"the renderer rejects these kwargs ({result.rejected})"
    sections = [
        step_lines(
            s.title, s.token_ids, s.message_indices, s.messages, s.sampled_mask, s.notes, decode
        )
        for s in result.steps
    ]
    return document(fields, sections)


@pytest.mark.clause("SNP-1")
@pytest.mark.parametrize(("identity", "case"), PARAMS)
def test_rendered_prompt_matches_snapshot(
    identity: Identity,
    case: str,
    tokenizer_for: Callable[[str], Any],
    token_snapshot: Callable[[str], None],
) -> None:
    tokenizer = tokenizer_for(identity.model_id)
    result = CASES[case](RendererFactory(identity, tokenizer))

    token_snapshot(render_document(identity, case, result, lambda ids: tokenizer.decode(ids)))


@pytest.mark.clause("SNP-2")
def test_snapshots_were_recorded_with_the_installed_versions() -> None:
    problem = version_mismatch(read_versions(VERSIONS_FILE), installed_versions())

    assert problem is None, problem
