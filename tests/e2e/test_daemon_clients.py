"""The daemon with today's clients: approvals in both protocol eras over HTTP and through the
stdio forwarder, a config that changes under a running daemon, sessions that are never closed,
and what `schedule` says about the daemon that runs it."""

import json
import os
import signal
import subprocess

import anyio
import httpx2
import mcp.client.session as session_module
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from conftest import GATEWAY, Daemon, gateway_env, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 60
ADD = {"app": "org.aai.test", "tool": "add", "args": {"a": 40, "b": 2}}
ECHO = {"app": "org.aai.test", "tool": "echo", "args": {"text": "x"}}


def text(result):
    return "".join(getattr(c, "text", "") for c in result.content)


class Logged(Daemon):
    """A daemon whose log goes to a file the test reads (a pipe nobody reads would fill)."""

    def __init__(self, home, env):
        self.log = home.parent / "daemon.log"
        with open(self.log, "a") as log:
            proc = subprocess.Popen([str(GATEWAY), "serve", "--listen", "127.0.0.1:0"], env=env,
                                    stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
        info = home / "run" / "serve.json"
        wait_until(lambda: info.exists() or proc.poll() is not None, 20, "serve.json")
        assert proc.poll() is None, self.log.read_text()
        served = json.loads(info.read_text())
        self.home, self.env, self.proc = home, env, proc
        self.url, self.pid = served["url"], served["pid"]
        self.token = (home / "run" / "token").read_text().strip()
        self.base = self.url.removesuffix("/mcp")

    def status(self):
        """What `/control/status` says (the same the `status` command prints)."""
        r = httpx2.get(f"{self.base}/control/status", headers={"Authorization": f"Bearer {self.token}"}, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()


def approval_daemon(home, bus):
    """A daemon whose clients are asked before `add` and `echo` run."""
    (home / "config.json").write_text(json.dumps({"policy": {"default_profile": "p", "profiles": {"p": {
        "tool_overrides": {"org.aai.test:add": "require_approval", "org.aai.test:echo": "require_approval"}}}}}))
    return Daemon(home, gateway_env(home, bus))


def era_client(d, era, transport, name, on_elicit, monkeypatch):
    info = types.Implementation(name=name, version="1")
    if era == "2026-07-28":
        mode = era
    else:
        monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", era)
        mode = "legacy"
    if transport == "http":
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {d.token}"}, timeout=30)
        target = streamable_http_client(d.url, http_client=http)
    else:
        # `aai-gateway` as a client starts it, with the daemon running: it forwards.
        target = StdioServerParameters(command=str(GATEWAY), args=[], env=d.env)
    return Client(target, mode=mode, elicitation_callback=on_elicit, client_info=info, cache=None)


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_each_approval_choice_works_through_the_daemon(home, bus, monkeypatch, era, transport):
    d = approval_daemon(home, bus)
    try:
        for choice in ("deny", "allow_once", "allow_session", "always_tool", "always_app"):
            asked = []

            async def on_elicit(context, params):
                asked.append(params.message)
                return types.ElicitResult(action="accept", content={"decision": choice})

            name = f"{transport}-{era}-{choice}"
            with anyio.fail_after(TIMEOUT):
                async with era_client(d, era, transport, name, on_elicit, monkeypatch) as c:
                    first = await c.call_tool("aai_exec", ADD)
                    assert len(asked) == 1 and f"Allow {name} to run" in asked[0], asked
                    if choice == "deny":
                        assert first.is_error and "the user chose Deny" in text(first), text(first)
                        continue
                    # Not "altered or has expired": the round opened where the retry landed.
                    assert not first.is_error and text(first) == "42", (choice, text(first))
                    second = await c.call_tool("aai_exec", ADD)
                    assert not second.is_error and text(second) == "42", text(second)
                    remembered = choice != "allow_once"
                    if choice == "allow_session" and era == "2026-07-28":
                        # The stateless era has no session at the daemon: each call is its own.
                        remembered = False
                    assert len(asked) == (1 if remembered else 2), (choice, asked)
                    echoed = await c.call_tool("aai_exec", ECHO)
                    assert not echoed.is_error, text(echoed)
                    # Only "always this app" covers the app's other tools.
                    assert len(asked) == (1 if remembered else 2) + (0 if choice == "always_app" else 1), (choice, asked)
        rows = [json.loads(line) for line in d.cli("audit", "export").stdout.splitlines() if line.strip()]
        denied = [r for r in rows if r["caller"].endswith("-deny") and r["tool"] == "add"]
        assert [r["result"] for r in denied] == ["denied"], denied
    finally:
        d.close()


def test_schedule_says_whether_the_running_daemon_runs_the_task(home, bus):
    (home / "workflows").mkdir()
    (home / "workflows" / "hello.json").write_text(json.dumps(
        {"description": "hello", "steps": [{"app": "org.aai.test", "tool": "echo", "args": {"text": "hi"}}]}))
    add = ["schedule", "add", "hello", "--cron", "0 0 1 1 *", "--workflow", "hello", "--grant", "org.aai.test:echo"]
    d = Logged(home, gateway_env(home, bus))
    try:
        added = d.cli(*add)
        assert added.returncode == 0, added.stdout + added.stderr
        report = json.loads(added.stdout)
        assert report["will_run"] is True, report
        assert f"running in the gateway daemon (pid {d.pid}" in report["scheduler"], report
        listed = json.loads(d.cli("schedule", "list").stdout)
        assert listed["scheduler_running"] is True and f"pid {d.pid}" in listed["scheduler"], listed
        disabled = d.cli(*add, "--disabled")
        assert json.loads(disabled.stdout)["will_run"] is False, disabled.stdout
    finally:
        d.close()
    added = subprocess.run([str(GATEWAY), *add], env=gateway_env(home, bus), capture_output=True, text=True, timeout=30)
    report = json.loads(added.stdout)
    assert report["will_run"] is False and report["scheduler"].startswith("not running: no gateway daemon runs"), report


async def _open_and_abandon(http, d, name):
    """Opens a session the way a client does, then forgets it: no DELETE, no stream."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": name, "version": "1"}}}
    headers = {"Authorization": f"Bearer {d.token}", "Accept": "application/json, text/event-stream"}
    while True:
        r = await http.post(d.url, headers=headers, json=body)
        if r.status_code != 429:  # the daemon's rate limit: wait the second it asks
            break
        await anyio.sleep(float(r.headers.get("retry-after", "1")))
    assert r.status_code == 200 and r.headers.get("mcp-session-id"), (r.status_code, r.text)


async def test_abandoned_sessions_end_and_an_active_one_is_not_cut(home, bus, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    (home / "config.json").write_text(json.dumps({"sessions": {"idle_seconds": 3, "per_client": 8, "total": 64}}))
    d = Logged(home, gateway_env(home, bus))
    try:
        with anyio.fail_after(120):
            async with d.client(name="busy-client") as active, httpx2.AsyncClient(timeout=30) as http:
                assert d.status()["sessions"] == 1
                for n in range(400):
                    # The same client name: the cap ends its abandoned sessions, not the one in use.
                    await _open_and_abandon(http, d, "busy-client" if n % 2 else f"other-{n % 10}")
                    if n % 50 == 49:
                        got = await active.call_tool("aai_exec", ECHO)
                        assert not got.is_error, text(got)
                        # 1 active + at most 8 of busy-client, each other-N at most 8, all under 64.
                        assert d.status()["sessions"] <= 1 + 8 + 5 * 8, d.status()
                # Abandoned sessions end once idle; the one a client holds open stays.
                await anyio.to_thread.run_sync(lambda: wait_until(lambda: d.status()["sessions"] == 1, 60, "only the active session left"))
                got = await active.call_tool("aai_exec", ECHO)
                assert not got.is_error, text(got)
        status = d.cli("status")
        assert "0 MCP sessions open" in status.stdout, status.stdout
    finally:
        d.close()
