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
