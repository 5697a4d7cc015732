"""Loopback traffic never goes through an HTTP proxy named by the environment."""

from __future__ import annotations

import pytest

from miles_verifiers.engine.proxies import (
    direct_mounts,
    ensure_loopback_bypass,
    environment_proxy_for,
    is_loopback_host,
)

PROXY = "http://127.0.0.1:9"


@pytest.mark.parametrize("host", ["localhost", "LOCALHOST", "127.0.0.1", "127.3.2.1", "::1"])
def test_loopback_hosts_are_recognised(host: str) -> None:
    assert is_loopback_host(host)


@pytest.mark.parametrize("host", ["10.0.0.1", "engine.internal", "localhost.example.com", ""])
def test_other_hosts_are_not_loopback(host: str) -> None:
    assert not is_loopback_host(host)


def test_direct_mounts_cover_the_loopback_names_and_a_loopback_engine_host() -> None:
    mounts = direct_mounts(["http://127.0.0.2:30000", "http://10.0.0.1:30000"])
    assert mounts == {
        "all://localhost": None,
        "all://127.0.0.1": None,
        "all://[::1]": None,
        "all://127.0.0.2": None,
    }


def test_a_remote_engine_goes_through_the_environment_proxy() -> None:
    environ = {"HTTP_PROXY": PROXY}
    assert environment_proxy_for("http://10.0.0.1:30000/generate", environ) == PROXY


def test_a_loopback_engine_never_goes_through_a_proxy() -> None:
    assert environment_proxy_for("http://127.0.0.1:30000/generate", {"HTTP_PROXY": PROXY}) is None


def test_no_proxy_exempts_a_remote_engine() -> None:
    environ = {"http_proxy": PROXY, "no_proxy": "engine.internal"}
    assert environment_proxy_for("http://engine.internal:30000/generate", environ) is None


def test_a_proxy_setting_gets_the_loopback_names_added_to_no_proxy() -> None:
    environ = {"HTTP_PROXY": PROXY, "NO_PROXY": "corp.example"}
    assert ensure_loopback_bypass(environ) == ("localhost", "127.0.0.1", "::1")
    assert environ["NO_PROXY"] == environ["no_proxy"] == "corp.example,localhost,127.0.0.1,::1"


def test_without_a_proxy_the_environment_is_left_alone() -> None:
    environ = {"NO_PROXY": "corp.example"}
    assert ensure_loopback_bypass(environ) == ()
    assert environ == {"NO_PROXY": "corp.example"}


def test_loopback_names_already_in_no_proxy_are_not_added_again() -> None:
    environ = {"https_proxy": PROXY, "no_proxy": "localhost,127.0.0.1,::1"}
    assert ensure_loopback_bypass(environ) == ()
    assert environ == {"https_proxy": PROXY, "no_proxy": "localhost,127.0.0.1,::1"}
