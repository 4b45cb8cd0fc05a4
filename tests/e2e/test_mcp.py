"""The built gateway driven by the official Python MCP SDK, at each protocol version."""

import json
import re
import time

import anyio
import mcp.client.session as session_module
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import GATEWAY, descriptor_doc, gateway_env, install, text

pytestmark = pytest.mark.anyio

VERSIONS = ["2025-06-18", "2025-11-25", "2026-07-28"]
NAME_RULE = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
TIMEOUT = 30


def client_for(home, bus, version, monkeypatch, message_handler=None):
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    if version == "2026-07-28":
        return Client(params, mode="2026-07-28", message_handler=message_handler, cache=None)
    # The SDK offers its newest handshake version; pin the older one where asked.
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", version)
    return Client(params, mode="legacy", message_handler=message_handler, cache=None)



def error_of(result):
    assert result.is_error, text(result)
    return result.structured_content


@pytest.fixture(params=VERSIONS)
def version(request):
    return request.param


async def test_list_guide_and_exec(home, bus, version, monkeypatch):
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch) as client:
            assert client.protocol_version == version
            tools = (await client.list_tools()).tools
            names = [t.name for t in tools]
            assert "app_org_aai_test" in names and "aai_exec" in names and "app_org_aai_absent" in names
            assert all(NAME_RULE.match(n) for n in names)
            assert len(set(names)) == len(names)
            entry = next(t for t in tools if t.name == "app_org_aai_test")
            assert entry.description.startswith("Test Service:")

            guide = text(await client.call_tool("app_org_aai_test", {}))
            assert "- echo(text: string)" in guide
            assert 'Example: aai_exec {"app":"org.aai.test"' in guide

            result = await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": 'a " & (do shell script "x")'}})
            assert not result.is_error and text(result) == 'a " & (do shell script "x")'
            result = await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "add", "args": {"a": 40, "b": 2}})
            assert text(result) == "42"
            result = await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "describe", "args": {"info": {"k": "v", "n": [1, 2]}}})
            assert result.structured_content == {"k": "v", "n": [1, 2], "count": 2}
            result = await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "json", "args": {}})
            assert result.structured_content == {"ok": True, "items": [1, 2]}


async def test_spec_aliases(home, bus, version, monkeypatch):
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch) as client:
            assert "- add(a: int, b: int)" in text(await client.call_tool("app:org.aai.test", {}))
            assert text(await client.call_tool("aai:exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "x"}})) == "x"
            assert text(await client.call_tool("org.aai.test:echo", {"text": "y"})) == "y"
            # aai_exec also takes the tool name of an app.
            assert text(await client.call_tool("aai_exec", {"app": "app_org_aai_test", "tool": "echo", "args": {"text": "z"}})) == "z"


async def test_a_name_that_is_no_tool_is_json_rpc_invalid_params_with_the_nearest_names(home, bus, version, monkeypatch):
    """The spec's unknown tool: -32602 naming the nearest tools, for every name that names no
    tool (an app that is not there, a path). A tool of an app that is there
    (`<appId>:<tool>`) and aai_exec's app keep their tool errors, which name the nearest."""
    from mcp.shared.exceptions import MCPError

    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch) as client:
            for name, nearest in (("aai_exce", "aai_exec"), ("app-org-aai-test", "app_org_aai_test"), ("echo", None),
                                  ("app_org_aai_nope", "app_org_aai_test"), ("../../etc/passwd", None),
                                  ("app_../../etc/passwd", None), ("org.aai.test/../x:echo", None),
                                  ("/etc/passwd:x", None), ("workflow_../x", None)):
                with pytest.raises(MCPError) as raised:
                    await client.call_tool(name, {})
                error = raised.value.error
                assert error.code == -32602, error
                assert f"Unknown tool: {json.dumps(name)}" in error.message, error.message
                if nearest:
                    assert f"`{nearest}`" in error.message and nearest in error.data["nearest"], error
            # The session goes on, and lookups answer as tool errors that say what exists.
            assert text(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "on"}})) == "on"
            err = error_of(await client.call_tool("org.aai.test:nope", {}))
            assert err["type"] == "TOOL_NOT_FOUND" and "echo" in err["message"], err
            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.nope", "tool": "echo", "args": {}}))
            assert err["type"] == "APP_NOT_FOUND", err


async def test_errors(home, bus, version, monkeypatch):
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch) as client:
            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.nope", "tool": "echo", "args": {}}))
            assert (err["code"], err["type"]) == (-32002, "APP_NOT_FOUND")
            assert "org.aai.test" in err["message"]

            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "nope", "args": {}}))
            assert (err["code"], err["type"]) == (-32003, "TOOL_NOT_FOUND")
            assert "echo" in err["message"] and "add" in err["message"]

            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "add", "args": {"a": "forty", "b": 2}}))
            assert (err["code"], err["type"]) == (-32005, "INVALID_PARAMS")
            assert err["detail"]["field"] == "a"
            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {}}))
            assert err["detail"]["field"] == "text"

            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.absent", "tool": "echo", "args": {"text": "x"}}))
            assert (err["code"], err["type"]) == (-32009, "APP_NOT_RUNNING")

            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "slow", "args": {"millis": 5000}}))
            assert (err["code"], err["type"]) == (-32008, "TIMEOUT")

            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "fail", "args": {}}))
            assert (err["code"], err["type"]) == (-32001, "AUTOMATION_FAILED")
            assert err["detail"]["dbus_error"] == "org.freedesktop.DBus.Error.Failed"

            err = error_of(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "deny", "args": {}}))
            assert (err["code"], err["type"]) == (-32004, "PERMISSION_DENIED")

            # Still serving after every error.
            assert text(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "ok"}})) == "ok"


async def test_resources(home, bus, version, monkeypatch):
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch) as client:
            resources = (await client.list_resources()).resources
            uris = {str(r.uri) for r in resources}
            assert "app:org.aai.test" in uris
            mine = next(r for r in resources if str(r.uri) == "app:org.aai.test")
            assert mine.mime_type == "application/aai+json" and mine.name == "Test Service"
            read = await client.read_resource("app:org.aai.test")
            doc = json.loads(read.contents[0].text)
            assert doc["appId"] == "org.aai.test" and list(doc["platforms"]) == ["linux"]


async def test_large_results_are_capped(home, bus, version, monkeypatch):
    (home / "config.json").write_text(json.dumps({"max_result_chars": 1000}))
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch) as client:
            result = await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "big", "args": {"bytes": 5000}})
            body = text(result)
            assert body.startswith("x" * 1000)
            assert "cut to 1000 of 5000 characters (4000 not shown)" in body


async def test_concurrent_calls_do_not_wait_for_slow_ones(home, bus, version, monkeypatch):
    finished = []
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch) as client:
            await client.list_tools()

            async def slow(i):
                await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "slow_ok", "args": {"millis": 3000}})
                finished.append(("slow", i))

            async def fast():
                await anyio.sleep(0.3)  # let the slow calls get in flight first
                result = await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "fast"}})
                assert text(result) == "fast"
                finished.append(("fast", 0))

            async with anyio.create_task_group() as group:
                for i in range(49):
                    group.start_soon(slow, i)
                group.start_soon(fast)
    assert len(finished) == 50
    assert finished[0] == ("fast", 0), finished[:3]


async def test_list_changed_when_descriptors_change(home, bus, version, monkeypatch):
    events = []

    async def on_message(message):
        events.append(type(getattr(message, "root", message)).__name__)

    async def tools(client):
        return {t.name: t for t in (await client.list_tools()).tools}

    async def changed(client, action):
        """Runs `action` and waits for both list_changed notifications it must cause."""
        if version == "2026-07-28":
            async with client.listen(tools_list_changed=True, resources_list_changed=True) as sub:
                action()
                seen = set()
                async for event in sub:
                    seen.add(type(event).__name__)
                    if {"ToolsListChanged", "ResourcesListChanged"} <= seen:
                        return
        else:
            events.clear()
            action()
            while not ({"ToolListChangedNotification", "ResourceListChangedNotification"} <= set(events)):
                await anyio.sleep(0.05)

    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch, message_handler=on_message) as client:
            assert "app_org_aai_added" not in await tools(client)
            # Let notifications of the first scan pass, then watch for ours.
            await anyio.sleep(0.5)

            await changed(client, lambda: install(home, "org.aai.added", descriptor_doc("org.aai.added")))
            assert "app_org_aai_added" in await tools(client)

            renamed = descriptor_doc("org.aai.added")
            renamed["name"] = "Renamed"
            await changed(client, lambda: install(home, "org.aai.added", renamed))
            assert (await tools(client))["app_org_aai_added"].description.startswith("Renamed:")

            await changed(client, lambda: (home / "org.aai.added" / "aai.json").unlink())
            assert "app_org_aai_added" not in await tools(client)
            resources = {str(r.uri) for r in (await client.list_resources()).resources}
            assert "app:org.aai.added" not in resources


async def test_compact_mode(home, bus, version, monkeypatch):
    (home / "config.json").write_text(json.dumps({"exposure": "compact"}))
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["aai_apps", "aai_guide", "web_discover", "aai_batch", "aai_exec"]
            found = text(await client.call_tool("aai_apps", {"query": "tester"}))
            assert found.startswith("org.aai.test — Test Service")
            assert "org.aai.absent" not in found
            assert "- echo(text: string)" in text(await client.call_tool("aai_guide", {"app": "org.aai.test"}))
            # Calls of the full mode still work.
            assert "- echo(text: string)" in text(await client.call_tool("app_org_aai_test", {}))
            assert text(await client.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "c"}})) == "c"
