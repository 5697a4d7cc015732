"""Engine addresses: --engine-url parsing and writing the router address into args."""

from __future__ import annotations

import argparse

import pytest

from miles_verifiers_testkit.runner.engine import (
    EngineAddress,
    EngineUrlError,
    parse_engine_url,
    point_args_at,
)


def test_an_http_host_port_url_is_parsed():
    assert parse_engine_url("http://10.0.0.1:30000") == EngineAddress(
        "10.0.0.1", 30000, embedded=False
    )


@pytest.mark.parametrize(
    "url",
    [
        "https://10.0.0.1:30000",
        "http://10.0.0.1",
        "http://10.0.0.1:30000/generate",
        "10.0.0.1:30000",
    ],
)
def test_urls_that_are_not_bare_http_addresses_are_refused(url):
    with pytest.raises(EngineUrlError, match="--engine-url"):
        parse_engine_url(url)


def test_pointing_args_sets_the_router_fields_miles_fills_in():
    args = argparse.Namespace(sglang_router_ip=None, sglang_router_port=None)
    point_args_at(args, EngineAddress("127.0.0.1", 4321, embedded=True))
    assert (args.sglang_router_ip, args.sglang_router_port) == ("127.0.0.1", 4321)
    assert args.sglang_model_routers == {"default": ("127.0.0.1", 4321)}


def test_a_loopback_engine_is_checked_directly_despite_a_proxy_setting(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import http.server
    import socket
    import threading

    from miles_verifiers_testkit.runner.engine import require_reachable

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_proxy = f"http://127.0.0.1:{probe.getsockname()[1]}"
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.setenv(name, dead_proxy)
    for name in ("NO_PROXY", "no_proxy", "all_proxy"):
        monkeypatch.delenv(name, raising=False)

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            self.send_response(200)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.HTTPServer(("127.0.0.1", 0), Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        require_reachable(EngineAddress("127.0.0.1", server.server_address[1], embedded=False))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
