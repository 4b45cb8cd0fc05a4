"""The built-in local apps through the official MCP SDK, on a real X server (Xvfb) with a real
notification daemon (dunst) on the test session bus: notifications, the clipboard, displays,
and the file and terminal apps end to end."""

import json
import os
import shutil

import anyio
import mcp.client.session as session_module
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import GATEWAY, gateway_env, text, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 30


def client(home, bus, display, monkeypatch):
    env = gateway_env(home, bus)
    env["DISPLAY"] = display
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    return Client(StdioServerParameters(command=str(GATEWAY), args=[], env=env), mode="legacy", cache=None)



async def test_system_tools_on_a_real_desktop(home, bus, desktop, monkeypatch):
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, desktop["display"], monkeypatch) as c:
            names = [t.name for t in (await c.list_tools()).tools]
            assert {"app_local_files", "app_local_terminal", "app_local_system"} <= set(names)
            guide = text(await c.call_tool("app_local_system", {}))
            assert "notification_send(title: string, body: string" in guide, guide

            sent = await c.call_tool("aai_exec", {"app": "local.system", "tool": "notification_send",
                                                  "args": {"title": "Build done", "body": "All 42 tests \"passed\"", "urgency": "critical"}})
            assert not sent.is_error, text(sent)
            assert sent.structured_content["sent"] is True
            wait_until(lambda: desktop["record"].exists() and desktop["record"].read_text().strip(), 10, "dunst ran no script")
            app, summary, body, urgency = desktop["record"].read_text().strip().split("\t")
            assert (app, summary, body, urgency) == ("aai-gateway", "Build done", "All 42 tests \"passed\"", "CRITICAL")

            wrote = await c.call_tool("aai_exec", {"app": "local.system", "tool": "clipboard_write", "args": {"text": "héllo clipboard ✓"}})
            assert not wrote.is_error, text(wrote)
            read = await c.call_tool("aai_exec", {"app": "local.system", "tool": "clipboard_read"})
            assert not read.is_error, text(read)
            assert read.structured_content["text"] == "héllo clipboard ✓"

            info = await c.call_tool("aai_exec", {"app": "local.system", "tool": "system_info"})
            displays = info.structured_content["displays"]
            if shutil.which("xrandr"):
                assert [(d["width"], d["height"]) for d in displays] == [(1280, 1024)], displays


async def test_files_and_terminal_through_mcp(home, bus, tmp_path, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
        # Writing files runs unasked; what the terminal does is judged as the default profile
        # judges it (a command in the box runs, losing the allowed folder's files is asked).
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development",
                   "tool_overrides": {"local.files:file_write": "auto_approve"}}}},
    }))
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None) as c:
            wrote = await c.call_tool("aai_exec", {"app": "local.files", "tool": "file_write",
                                                   "args": {"path": str(work / "a.txt"), "content": "alpha\nbeta\n"}})
            assert not wrote.is_error, text(wrote)
            ran = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute",
                                                 "args": {"command": f"cd {work} && wc -l < a.txt"}})
            assert ran.structured_content["stdout"].strip() == "2" and ran.structured_content["exit_code"] == 0
            blocked = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute",
                                                     "args": {"command": f"rm -rf {work}"}})
            assert blocked.is_error and blocked.structured_content["type"] == "PERMISSION_DENIED"
            assert "allowed folder" in text(blocked) or "approval" in text(blocked), text(blocked)
            assert (work / "a.txt").exists()
            outside = await c.call_tool("aai_exec", {"app": "local.files", "tool": "file_read", "args": {"path": str(home / "config.json")}})
            assert outside.is_error and outside.structured_content["type"] == "PERMISSION_DENIED"


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_terminal_progress_and_cancel_through_mcp(home, bus, tmp_path, monkeypatch, version):
    """A long command sends progress with its latest output; a cancelled command is stopped
    and the next call on the session runs at once."""
    work = tmp_path / "work"
    work.mkdir()
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "full_auto"}}},
    }))
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    if version == "2026-07-28":
        client = Client(params, mode=version, cache=None)
    else:
        monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", version)
        client = Client(params, mode="legacy", cache=None)
    progress = []

    async def on_progress(value, total, message):
        progress.append((value, message))

    bash = lambda command: {"app": "local.terminal", "tool": "bash_execute", "args": {"command": command}}
    with anyio.fail_after(TIMEOUT):
        async with client as c:
            ran = await c.call_tool("aai_exec", bash("for i in 1 2 3 4; do echo tick$i; sleep 1; done"), progress_callback=on_progress)
            assert ran.structured_content["stdout"].endswith("tick4")
            assert len(progress) >= 2 and any("tick" in (m or "") for _, m in progress), progress
            assert [v for v, _ in progress] == sorted(v for v, _ in progress)

            pidfile = work / "pid"
            async with anyio.create_task_group() as group:
                async def long_call():
                    await c.call_tool("aai_exec", bash(f"sh -c 'echo $$ > {pidfile}; exec sleep 60'"))
                group.start_soon(long_call)
                while not (pidfile.exists() and pidfile.read_text().strip()):
                    await anyio.sleep(0.02)
                group.cancel_scope.cancel()  # the SDK sends notifications/cancelled
            pid = int(pidfile.read_text())
            after = await c.call_tool("aai_exec", bash("echo next"))
            assert after.structured_content["stdout"] == "next", after
            with anyio.fail_after(5):
                while os.path.exists(f"/proc/{pid}") and open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[0] != "Z":
                    await anyio.sleep(0.05)
