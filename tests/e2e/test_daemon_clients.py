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

from conftest import Daemon, GATEWAY, gateway_env, text, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 60
ADD = {"app": "org.aai.test", "tool": "add", "args": {"a": 40, "b": 2}}
ECHO = {"app": "org.aai.test", "tool": "echo", "args": {"text": "x"}}





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
                    # Every era: a 2026-07-28 client's requests carry no session, and its
                    # connection stands in for one (the forwarder's, or the client's name).
                    remembered = choice != "allow_once"
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
    add = ["schedule", "add", "hello", "--cron", "0 0 1 1 *", "--workflow", "hello", "--grant", "org.aai.test:echo", "--json"]
    d = Daemon(home, gateway_env(home, bus))
    try:
        added = d.cli(*add)
        assert added.returncode == 0, added.stdout + added.stderr
        report = json.loads(added.stdout)
        assert report["will_run"] is True, report
        assert f"running in the gateway daemon (pid {d.pid}" in report["scheduler"], report
        listed = json.loads(d.cli("schedule", "list", "--json").stdout)
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
    d = Daemon(home, gateway_env(home, bus))
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


def _browsers_of(home):
    """Pids of processes running on a browser profile under `home` (by their arguments;
    Chromium rewrites its command line into one string, so the bytes are searched)."""
    marker = f"--user-data-dir={home / 'browser'}".encode()
    found = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/cmdline", "rb") as f:
                args = f.read()
            with open(f"/proc/{entry}/stat") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if state not in ("Z", "X") and marker in args:
            found.append(int(entry))
    return found


def _browser_config(home, site_port):
    (home / "config.json").write_text(json.dumps({
        "policy": {"profiles": {"p": {"preset": "full_auto"}}, "default_profile": "p"},
        "browser": {"resolve": {"shop.test:80": f"127.0.0.1:{site_port}"}},
    }))


class _Page:
    """A page on 127.0.0.1 for the browser to open."""

    def __init__(self):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"<!doctype html><title>Shop</title><h1>still here</h1>"
                self.send_response(200)
                self.send_header("content-type", "text/html")
                self.send_header("content-length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


NAVIGATE = {"app": "local.browser", "tool": "browser_navigate", "args": {"url": "http://shop.test/"}}


async def _navigate_through(d):
    async with d.client(name="browser-client") as c:
        opened = await c.call_tool("aai_exec", NAVIGATE)
        assert not opened.is_error, text(opened)
        snap = await c.call_tool("aai_exec", {"app": "local.browser", "tool": "browser_snapshot", "args": {}})
        assert "still here" in text(snap), text(snap)


class _Stdio:
    """`aai-gateway` on stdio as a client starts it, spoken to in plain JSON-RPC lines, so the
    test knows its pid and can kill it."""

    def __init__(self, env):
        self.proc = subprocess.Popen([str(GATEWAY)], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=subprocess.DEVNULL, text=True)
        self.next = 0
        self.request("initialize", {"protocolVersion": "2025-11-25", "capabilities": {},
                                    "clientInfo": {"name": "stdio-browser", "version": "1"}})
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n")
        self.proc.stdin.flush()

    def request(self, method, params):
        self.next += 1
        self.proc.stdin.write(json.dumps({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params}) + "\n")
        self.proc.stdin.flush()
        while True:
            line = self.proc.stdout.readline()
            assert line, "the gateway closed its output"
            message = json.loads(line)
            if message.get("id") == self.next:
                return message


@pytest.mark.parametrize("killed", ["daemon", "stdio"])
async def test_a_killed_gateway_takes_its_browser_along_and_the_next_one_starts(home, bus, killed, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    page = _Page()
    _browser_config(home, page.port)
    env = gateway_env(home, bus)
    try:
        if killed == "daemon":
            d = Daemon(home, env)
            try:
                with anyio.fail_after(TIMEOUT):
                    await _navigate_through(d)
            except BaseException:
                d.close()
                raise
            victim = d.proc
        else:
            g = _Stdio(env)
            answer = g.request("tools/call", {"name": "aai_exec", "arguments": NAVIGATE})
            assert not answer["result"].get("isError"), answer
            victim = g.proc
        assert _browsers_of(home), "the browser runs on the client's profile"
        victim.send_signal(signal.SIGKILL)
        victim.wait(timeout=10)
        # No clean-up ran in the killed gateway: the browser ends because its gateway did.
        wait_until(lambda: not _browsers_of(home), 20, "every browser process of the killed gateway gone")
        # The next gateway's browser starts on the same profile.
        d = Daemon(home, env)
        try:
            with anyio.fail_after(TIMEOUT):
                await _navigate_through(d)
            assert (home / "browser" / "browser-client").is_dir()
        finally:
            d.close()
        wait_until(lambda: not _browsers_of(home), 20, "the browser gone with its daemon")
    finally:
        page.server.shutdown()


def _write_config(home, config):
    """Replaces config.json the way editors do: a new file renamed over the old one."""
    tmp = home / "config.json.tmp"
    tmp.write_text(config if isinstance(config, str) else json.dumps(config))
    tmp.rename(home / "config.json")


async def test_the_daemon_reloads_its_config_and_keeps_the_last_good_one(home, bus, monkeypatch):
    from cdp import Chromium
    from test_dashboard import open_dashboard

    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    _write_config(home, {"exposure": "full"})
    d = Daemon(home, gateway_env(home, bus))
    heard = []

    async def on_message(message):
        heard.append(type(getattr(message, "root", message)).__name__)

    async def listed_after_change(c, wanted):
        """Waits for list_changed, then lists; again while the list is not yet `wanted`
        (a change may be announced in more than one notification)."""
        while True:
            await anyio.to_thread.run_sync(lambda: wait_until(lambda: "ToolListChangedNotification" in heard, 20, "list_changed"))
            heard.clear()
            names = {t.name for t in (await c.list_tools()).tools}
            if wanted(names):
                return names

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {d.token}"}, timeout=30)
    try:
        with anyio.fail_after(TIMEOUT):
            async with Client(streamable_http_client(d.url, http_client=http), mode="legacy", cache=None,
                              message_handler=on_message) as c:
                names = {t.name for t in (await c.list_tools()).tools}
                assert {"app_org_aai_test", "app_local_files"} <= names and "aai_apps" not in names, names
                assert not (await c.call_tool("aai_exec", ECHO)).is_error
                await anyio.sleep(0.5)
                heard.clear()
                # Exposure and policy: in force at once, and the client is told.
                _write_config(home, {"exposure": "compact", "policy": {"default_profile": "p", "profiles": {"p": {
                    "tool_overrides": {"org.aai.test:echo": "always_block"}}}}})
                await listed_after_change(c, lambda names: "aai_apps" in names and "app_org_aai_test" not in names)
                blocked = await c.call_tool("aai_exec", ECHO)
                assert blocked.is_error and blocked.structured_content["type"] == "PERMISSION_DENIED", text(blocked)
                # A toolset turned off, exposure back to full.
                _write_config(home, {"exposure": "full", "local": {"files": False}})
                await listed_after_change(c, lambda names: "app_org_aai_test" in names and "app_local_files" not in names)
                assert not (await c.call_tool("aai_exec", ECHO)).is_error
                # An invalid file: the last good config stays, and the log, status and
                # dashboard say why.
                _write_config(home, '{"exposure": "compact", "local": {"files": true}, "no_such_setting": 1}')
                await anyio.to_thread.run_sync(lambda: wait_until(lambda: d.status().get("config_problem"), 20, "the problem reported"))
                assert "no_such_setting" in d.status()["config_problem"]
                names = {t.name for t in (await c.list_tools()).tools}
                assert "app_org_aai_test" in names and "app_local_files" not in names, names
                assert not (await c.call_tool("aai_exec", ECHO)).is_error
                assert "last good config stays in force" in d.log.read_text()
                status = d.cli("status")
                assert "config.json is invalid, so the last good config stays in force" in status.stdout, status.stdout
                assert "no_such_setting" in status.stdout
                browser = Chromium()
                try:
                    page = open_dashboard(d, browser)
                    page.wait("!document.getElementById('config-problem').hidden")
                    shown = page.eval("document.getElementById('config-problem').textContent")
                    assert "last good config stays in force" in shown and "no_such_setting" in shown, shown
                finally:
                    browser.close()
                # A note beside a trailing comma: the comma is the problem reported.
                _write_config(home, '{\n  "$comment": "x",\n  "exposure": "compact",\n}\n')
                await anyio.to_thread.run_sync(lambda: wait_until(
                    lambda: "trailing comma" in (d.status().get("config_problem") or ""), 20, "the comma reported"))
                assert "$comment" not in d.status()["config_problem"]
                # Fixed: in force again, and the problem is gone.
                _write_config(home, {"exposure": "compact"})
                await listed_after_change(c, lambda names: "aai_apps" in names)
                assert d.status().get("config_problem") is None
    finally:
        d.close()
