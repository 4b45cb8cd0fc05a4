"""Workflow files through the official MCP SDK and the CLI: offered as `workflow_<name>` with
their inputs as the schema, inputs checked, values passed as data, `if`, `retry`,
`timeout_ms` and `on_error`, every step through the gate with its own audit rows."""

import json
import subprocess

import anyio
import pytest

from conftest import GATEWAY, gateway_env
from test_consent import audit, client

pytestmark = pytest.mark.anyio
TIMEOUT = 60

REPORT = {
    "description": "Add two numbers and echo the sum",
    "inputs": {"type": "object", "properties": {"a": {"type": "integer"}, "note": {"type": "string"}}, "required": ["a", "note"]},
    "steps": [
        {"app": "org.aai.test", "tool": "add", "args": {"a": {"$input": "/a"}, "b": 1}},
        {"app": "org.aai.test", "tool": "fail", "retry": 2, "on_error": "continue"},
        {"app": "org.aai.test", "tool": "echo", "args": {"text": {"$input": "/note"}}, "if": {"$from": "/0/result", "equals": 42}},
        {"app": "org.aai.test", "tool": "echo", "args": {"text": "never"}, "if": {"$from": "/0/result", "equals": 7}},
        {"app": "org.aai.test", "tool": "slow", "args": {"millis": 5000}, "timeout_ms": 300},
        {"app": "org.aai.test", "tool": "echo", "args": {"text": "after the stop"}},
    ],
}


def install_workflow(home, name, doc):
    folder = home / "workflows"
    folder.mkdir(exist_ok=True)
    (folder / f"{name}.json").write_text(json.dumps(doc))


def cli(home, bus, *args):
    return subprocess.run([str(GATEWAY), *args], env=gateway_env(home, bus), capture_output=True, text=True, timeout=60)


async def test_a_workflow_is_a_tool_that_runs_its_steps_through_the_gate(home, bus, monkeypatch):
    install_workflow(home, "report", REPORT)
    install_workflow(home, "broken", {"description": "d", "steps": [{"app": "a", "tool": "t", "args": {"x": {"$from": "/3/result"}}}]})
    note = "$(touch /tmp/aai-workflow-pwned) `id`"
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, [], []) as c:
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert "workflow_report" in tools and "workflow_broken" not in tools
            assert tools["workflow_report"].input_schema["required"] == ["a", "note"]
            bad = await c.call_tool("workflow_report", {"a": "forty-one", "note": "x"})
            assert bad.is_error and bad.structured_content["type"] == "INVALID_PARAMS"
            r = await c.call_tool("workflow_report", {"a": 41, "note": note})
    out = r.structured_content
    statuses = [s["status"] for s in out["steps"]]
    assert statuses == ["ok", "failed", "ok", "skipped", "failed", "skipped"], out
    assert out["steps"][0]["result"] == 42
    assert out["steps"][2]["result"] == note
    assert out["steps"][4]["error"]["type"] == "TIMEOUT"
    rows = [json.loads(line) for line in audit(home, "export").splitlines()]
    assert len([r for r in rows if r["tool"] == "fail" and r["result"] == "started"]) == 3, "tried three times"
    assert [r["args"] for r in rows if r["tool"] == "echo" and r["result"] == "success"] == [json.dumps({"text": note}, separators=(",", ":"))]
    assert "chain intact" in audit(home, "verify")


def test_the_cli_lists_validates_and_runs_workflows(home, bus):
    install_workflow(home, "report", REPORT)
    install_workflow(home, "broken", {"description": "d", "steps": []})
    listed = cli(home, bus, "workflow", "list")
    assert "report  6 step(s)  Add two numbers" in listed.stdout and "broken  INVALID" in listed.stdout, listed.stdout
    assert cli(home, bus, "workflow", "validate", "report").returncode == 0
    invalid = cli(home, bus, "workflow", "validate", "broken")
    assert invalid.returncode == 1 and "at least one step" in invalid.stderr
    ran = cli(home, bus, "workflow", "run", "report", "--json", "--inputs", json.dumps({"a": 41, "note": "from the cli"}))
    assert ran.returncode == 1, ran.stderr  # two steps fail on purpose
    report = json.loads(ran.stdout)
    assert report["steps"][2]["result"] == "from the cli"
    missing = cli(home, bus, "workflow", "run", "nope")
    assert missing.returncode == 1 and "TOOL_NOT_FOUND" in missing.stderr


async def test_clients_hear_when_a_workflow_is_added_or_changed(home, bus, monkeypatch):
    import mcp.client.session as session_module
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    changes = []

    async def on_message(message):
        if type(getattr(message, "root", message)).__name__ == "ToolListChangedNotification":
            changes.append(1)

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None, message_handler=on_message) as c:
            assert not any(t.name.startswith("workflow_") for t in (await c.list_tools()).tools)
            await anyio.sleep(0.5)
            changes.clear()
            install_workflow(home, "report", REPORT)
            while not changes:
                await anyio.sleep(0.05)
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert tools["workflow_report"].description == "Workflow: " + REPORT["description"]
            changes.clear()
            install_workflow(home, "report", {**REPORT, "description": "Changed"})
            while not changes:
                await anyio.sleep(0.05)
            tools = {t.name: t for t in (await c.list_tools()).tools}
            assert tools["workflow_report"].description == "Workflow: Changed"
