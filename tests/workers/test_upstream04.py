"""The non-public Verifiers 0.4.0 pieces the 0.4 episode worker uses (``_episodes.upstream04``) are still
there, in the shape used. Run by the episodes' interpreter when it has Verifiers 0.4
(``MILES_VERIFIERS_EPISODE_WORKER_PYTHON``, as ``tox -e verifiers04`` sets it); skipped elsewhere."""

from __future__ import annotations

import os
import subprocess
import textwrap

import pytest

PYTHON = os.environ.get("MILES_VERIFIERS_EPISODE_WORKER_PYTHON")


def _run(script: str) -> subprocess.CompletedProcess[str]:
    assert PYTHON is not None
    return subprocess.run(
        [PYTHON, "-c", textwrap.dedent(script)], capture_output=True, text=True, timeout=300
    )


def _has_verifiers04() -> bool:
    if not PYTHON:
        return False
    done = _run(
        "import importlib.metadata as m; print(m.version('verifiers'))"
    )
    return done.returncode == 0 and done.stdout.strip().startswith("0.4.")


pytestmark = pytest.mark.skipif(
    not _has_verifiers04(), reason="needs a worker interpreter with verifiers 0.4"
)


def test_interception_resolve_client_builds_a_train_client_whose_client_is_our_transport():
    # Entries 1 and 2: the module attribute the server calls, and TrainClient.client.
    done = _run(
        """
        from verifiers.v1 import TrainClientConfig
        from verifiers.v1.interception import server
        from miles_verifiers._episodes.upstream04 import LentTransport, TransportLoans, install_transport_hook

        loans = install_transport_hook(TransportLoans())
        url, lent = loans.lend("c1", object())
        ours = server.resolve_client(TrainClientConfig(base_url=url, api_key_var="NO_KEY"))
        other = server.resolve_client(
            TrainClientConfig(base_url="http://127.0.0.1:9/v1", api_key_var="NO_KEY")
        )
        assert ours.client is lent, ours.client
        assert not isinstance(other.client, LentTransport)
        assert install_transport_hook(TransportLoans()) is loans  # installed once
        print("ok")
        """
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


def test_an_overlong_prompt_reaches_a_04_harness_as_a_context_overflow():
    # Verifiers 0.4's TrainClient answers Renderers' OverlongPromptError with an HTTP 400;
    # its harness utilities then read the text as a context overflow (and compact or stop).
    done = _run(
        """
        import httpx, openai, renderers
        from verifiers.v1.harnesses.utils.compaction import is_context_overflow
        from miles_verifiers._transport.errors import overlong_prompt

        error = overlong_prompt("the prompt has 9 tokens; the SGLang engine accepts fewer than 8")
        assert isinstance(error, renderers.OverlongPromptError), type(error)
        request = httpx.Request("POST", "http://127.0.0.1/v1/chat/completions")
        seen = openai.BadRequestError(
            str(error), response=httpx.Response(400, request=request), body=None
        )
        assert is_context_overflow(seen), str(error)
        print("ok")
        """
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
