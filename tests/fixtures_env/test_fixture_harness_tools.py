import json
from contextlib import AsyncExitStack

import pytest
import verifiers.v1 as vf
from mv_tools.calculator import Calculator

from miles_verifiers_testkit.harness.tools import open_toolbox
from tests.fixtures_env.fixture_env_support import ToolsetServer

pytestmark = pytest.mark.anyio


@pytest.fixture
async def calculator_url():
    async with ToolsetServer(Calculator(vf.ToolsetConfig())) as server:
        yield server.url


async def _toolbox(stack, url, **kwargs):
    return await open_toolbox(stack, {"calculator": url}, timeout_s=30, **kwargs)


async def test_tools_are_named_server_underscore_tool(calculator_url):
    async with AsyncExitStack() as stack:
        toolbox = await _toolbox(stack, calculator_url)
    [schema] = toolbox.schemas
    assert schema["type"] == "function"
    assert schema["function"]["name"] == "calculator_add"
    assert set(schema["function"]["parameters"]["properties"]) == {"a", "b"}


async def test_tool_call_returns_the_tool_result_as_text(calculator_url):
    async with AsyncExitStack() as stack:
        toolbox = await _toolbox(stack, calculator_url)
        assert await toolbox.call("calculator_add", json.dumps({"a": 20, "b": 22})) == "42"


async def test_unknown_tool_is_reported_to_the_model(calculator_url):
    async with AsyncExitStack() as stack:
        toolbox = await _toolbox(stack, calculator_url)
        result = await toolbox.call("calculator_mul", "{}")
    assert result.startswith("error: unknown tool 'calculator_mul'")
    assert "calculator_add" in result


@pytest.mark.parametrize(
    ("arguments", "complaint"), [("{not json", "not valid JSON"), ("[1, 2]", "JSON object")]
)
async def test_malformed_arguments_are_reported_to_the_model(calculator_url, arguments, complaint):
    async with AsyncExitStack() as stack:
        toolbox = await _toolbox(stack, calculator_url)
        result = await toolbox.call("calculator_add", arguments)
    assert result.startswith("error:") and complaint in result


async def test_tool_side_errors_come_back_as_error_text(calculator_url):
    async with AsyncExitStack() as stack:
        toolbox = await _toolbox(stack, calculator_url)
        result = await toolbox.call("calculator_add", json.dumps({"a": "x", "b": 1}))
    assert result.startswith("error:")


async def test_disabled_tools_are_hidden_from_the_model(calculator_url):
    async with AsyncExitStack() as stack:
        toolbox = await _toolbox(stack, calculator_url, disabled=["calculator_add"])
        result = await toolbox.call("calculator_add", "{}")
    assert toolbox.schemas == []
    assert result.startswith("error: unknown tool")
