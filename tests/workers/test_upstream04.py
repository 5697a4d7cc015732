"""The non-public Verifiers 0.4.0 pieces the 0.4 episode worker uses (``episodes.v04.upstream``) are still
there, in the shape used, and the 0.4 fixture chat loop's MCP client works with mcp 2. Run by the
episodes' interpreter when it has Verifiers 0.4 (``MILES_VERIFIERS_EPISODE_WORKER_PYTHON``, as
``tox -e verifiers04`` sets it); skipped elsewhere."""

from __future__ import annotations

from tests.workers.worker04 import needs_verifiers04
from tests.workers.worker04 import run_in_worker04 as _run

pytestmark = needs_verifiers04


def test_interception_resolve_client_builds_a_train_client_whose_client_is_our_transport():
    # Entries 1 and 2: the module attribute the server calls, and TrainClient.client.
    done = _run(
        """
        from verifiers.v1 import TrainClientConfig
        from verifiers.v1.interception import server
        from miles_verifiers.episodes.v04.upstream import LentTransport, TransportLoans, install_transport_hook

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
        from miles_verifiers.episodes.transport.errors import overlong_prompt

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


def test_the_chat_loops_toolbox_lists_and_calls_mv_tools04s_calculator_over_mcp_2():
    # The server as Verifiers 0.4 starts it for a rollout (python -m, its port in a file).
    done = _run(
        """
        import asyncio, os, subprocess, sys, tempfile, time, urllib.error, urllib.request
        from contextlib import AsyncExitStack
        from pathlib import Path
        from mv_arith04.tools import open_toolbox

        port_file = Path(tempfile.mkdtemp()) / "port"
        env = {**os.environ, "MCP_PORT_FILE": str(port_file), "VF_CONFIG": "{}"}
        server = subprocess.Popen(
            [sys.executable, "-m", "mv_tools04.calculator"], env=env, stderr=subprocess.DEVNULL
        )

        async def check(url):
            async with AsyncExitStack() as stack:
                tools = await open_toolbox(stack, {"calculator": url}, timeout_s=30)
                [schema] = tools.schemas
                assert schema["function"]["name"] == "calculator_add", schema
                assert await tools.call("calculator_add", '{"a": 2, "b": 40}') == "42"
                assert (await tools.call("calculator_add", '{"a": 2}')).startswith("error: ")
                assert (await tools.call("calculator_sub", "{}")).startswith("error: unknown")
                off = await open_toolbox(
                    stack, {"calculator": url}, timeout_s=30, disabled=["calculator_add"]
                )
                assert off.schemas == [], off.schemas

        try:
            deadline = time.monotonic() + 120
            while not (port_file.exists() and port_file.read_text().strip()):
                assert time.monotonic() < deadline and server.poll() is None, "no port"
                time.sleep(0.1)
            url = f"http://127.0.0.1:{port_file.read_text().strip()}/mcp"
            while True:  # the port is written before the server listens; any reply will do
                try:
                    urllib.request.urlopen(url, timeout=5)
                    break
                except urllib.error.HTTPError:
                    break
                except OSError:
                    assert time.monotonic() < deadline and server.poll() is None, "not serving"
                    time.sleep(0.1)
            asyncio.run(check(url))
            print("ok")
        finally:
            server.terminate()
            server.wait(30)
        """
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]
