"""The long-lived gateway (`aai-gateway serve`) through the official MCP SDK's Streamable HTTP
client: both protocol eras, the bearer token, Host and Origin checks, limits, the runtime files,
stdio clients forwarded to it with their identity, and the emergency stop killing every process
a call started (a `setsid` escapee and a double fork included)."""

import json
import re
import os
import shutil
import subprocess
import time
from pathlib import Path

import anyio
import httpx2
import mcp.client.session as session_module
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client
from mcp import types
from mcp.types import Implementation

from conftest import Daemon, GATEWAY, gateway_env, queue_daemon, start_xvfb, text, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 30


@pytest.fixture
def daemon(home, bus, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    (home / "config.json").write_text(json.dumps({
        # Commands run in a box whose /tmp is its own: they write beside AAI_HOME, in `out`.
        "local": {"sandbox": {"allowed_directories": [str(home.parent / "out")]}},
        "max_request_bytes": 262144,
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development", "risk_policies": {"high": "auto_approve"}}}},
    }))
    d = Daemon(home, gateway_env(home, bus))
    yield d
    d.close()



@pytest.mark.parametrize("mode", ["legacy", "2026-07-28"])
async def test_streamable_http_serves_both_eras(daemon, mode):
    with anyio.fail_after(TIMEOUT):
        async with daemon.client(mode=mode) as c:
            names = {t.name for t in (await c.list_tools()).tools}
            assert {"aai_exec", "app_org_aai_test"} <= names, names
            got = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "over http"}})
            assert not got.is_error, text(got)
            assert "over http" in text(got)
    # The call was audited under the client's own name.
    audit = daemon.cli("audit", "export")
    assert audit.returncode == 0, audit.stderr
    assert "http-test-client" in audit.stdout


async def test_every_request_needs_the_token_the_host_and_the_origin(daemon):
    body = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    good = {"Authorization": f"Bearer {daemon.token}"}
    async with httpx2.AsyncClient(timeout=10) as http:
        for bad, status in [
            ({}, 401),
            ({"Authorization": "Bearer " + "0" * 64}, 401),
            ({"Authorization": f"Bearer {daemon.token[:-1]}"}, 401),
            ({"Authorization": f"bearer{daemon.token}"}, 401),
            ({**good, "Host": "evil.example:80"}, 403),
            ({**good, "Host": f"attacker.test:{daemon.base.rsplit(':', 1)[1]}"}, 403),
            ({**good, "Origin": "http://evil.example"}, 403),
            ({**good, "Origin": "null"}, 403),
        ]:
            r = await http.post(daemon.url, headers={**headers, **bad}, json=body)
            assert r.status_code == status, (bad, r.status_code, r.text)
            assert "error" in r.json()
            # Refused before its body was read: the client must not reuse the connection.
            assert r.headers.get("connection") == "close", r.headers
        # A refused request with a large unread body does not break the next one on this client.
        padded = {**body, "params": {**body["params"], "pad": "y" * 200_000}}
        for _ in range(3):
            r = await http.post(daemon.url, headers=headers, json=padded)
            assert r.status_code == 401
            r = await http.get(f"{daemon.base}/control/status", headers=good)
            assert r.status_code == 200, r.text
        # The dashboard's own origin may call; a body over the limit is refused without harm.
        r = await http.post(daemon.url, headers={**headers, **good, "Origin": daemon.base}, json=body)
        assert r.status_code == 200, r.text
        assert r.headers.get("mcp-session-id"), r.headers
        assert len(r.headers["mcp-session-id"]) >= 32
        huge = {"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"pad": "x" * 300_000}}
        r = await http.post(daemon.url, headers={**headers, **good}, json=huge)
        assert r.status_code == 413, r.status_code
        r = await http.get(f"{daemon.base}/control/status", headers=good)
        assert r.json()["pid"] == daemon.pid


def test_runtime_files_are_private_and_removed_on_exit(daemon):
    run = daemon.home / "run"
    for name in ("serve.json", "token"):
        assert (run / name).stat().st_mode & 0o777 == 0o600, name
    assert run.stat().st_mode & 0o777 == 0o700
    assert len(daemon.token) == 64 and int(daemon.token, 16) >= 0
    # A second daemon for the same user refuses to start and names the first.
    second = daemon.cli("serve", "--listen", "127.0.0.1:0")
    assert second.returncode == 2 and daemon.url in second.stderr, second.stderr
    status = daemon.cli("status")
    assert status.returncode == 0 and daemon.url in status.stdout
    assert daemon.close() == 0
    assert not (run / "serve.json").exists() and not (run / "token").exists()
    after = daemon.cli("status")
    assert after.returncode == 2 and "no gateway daemon is running" in after.stderr


def test_serve_listens_on_loopback_only(home, bus):
    env = gateway_env(home, bus)
    for listen in ("0.0.0.0:0", "192.0.2.1:7377", "not-an-address"):
        out = subprocess.run([str(GATEWAY), "serve", "--listen", listen], env=env, capture_output=True, text=True, timeout=30)
        assert out.returncode == 2, (listen, out.stderr)
        assert "--listen" in out.stderr
    assert not (home / "run" / "serve.json").exists()


async def test_stdio_clients_forward_to_the_daemon_with_their_identity(daemon):
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=daemon.env)
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None,
                          client_info=Implementation(name="stdio-forwarded-client", version="2.0")) as c:
            got = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "via the daemon"}})
            assert not got.is_error, text(got)
            # The daemon's stop reaches this stdio client: it is served by the daemon.
            stopped = daemon.cli("stop")
            assert stopped.returncode == 0, stopped.stderr
            refused = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "again"}})
            assert refused.is_error and "emergency stop" in text(refused)
            assert daemon.cli("resume").returncode == 0
            again = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "resumed"}})
            assert not again.is_error, text(again)
    audit = daemon.cli("audit", "export")
    rows = [json.loads(line) for line in audit.stdout.splitlines() if line.strip()]
    callers = {row.get("caller") for row in rows}
    assert "stdio-forwarded-client" in callers, callers


def _alive(pid):
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return False
    return state not in ("Z", "X")


def _cgroups(daemon):
    """Whether this machine gives each call a cgroup (`aai-gateway doctor` says)."""
    report = json.loads(daemon.cli("doctor", "--json").stdout)
    check = next(t for a in report if a["app"] == "aai-gateway" for t in a["tools"] if t["tool"] == "process_isolation")
    return check["backend"] is not None


async def test_emergency_stop_kills_every_process_and_refuses_calls(daemon, tmp_path):
    # In a folder made beforehand: the terminal runs contained, and nothing new can be made
    # directly in tmp_path, which holds the gateway's home (only what was beside it is writable).
    (tmp_path / "out").mkdir()
    pids = tmp_path / "out" / "pids"
    # A plain child, a setsid escapee and a double-forked grandchild, then a long wait; with
    # cgroups also one that left the session, cleared its environment and double-forked,
    # which only its cgroup still holds.
    command = (f"sleep 300 & echo $! >> {pids}; "
               f"setsid sh -c 'echo $$ >> {pids}; exec sleep 300' & "
               f"( sh -c 'echo $$ >> {pids}; exec sleep 300' & ) ; ")
    expected = 3
    if _cgroups(daemon):
        command += f"setsid env -i /bin/sh -c '( /bin/sh -c \"echo \\$\\$ >> {pids}; exec sleep 300\" & )' ; "
        expected = 4
    command += "sleep 300"
    with anyio.fail_after(TIMEOUT):
        async with daemon.client() as c:
            async with anyio.create_task_group() as tg:
                outcome = {}

                async def run():
                    outcome["result"] = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute",
                                                                       "args": {"command": command, "timeout_ms": 120000}})

                tg.start_soon(run)
                await anyio.to_thread.run_sync(lambda: wait_until(lambda: pids.exists() and len(pids.read_text().split()) == expected, 15, "the children"))
                started = [int(p) for p in pids.read_text().split()]
                assert all(_alive(p) for p in started)
                stopped = await anyio.to_thread.run_sync(daemon.cli, "stop")
                assert stopped.returncode == 0, stopped.stderr
                assert "emergency stop on" in stopped.stdout
                # It counts what it ended: at least every child started above.
                ended = re.search(r"(\d+) process\(es\) killed", stopped.stdout)
                assert ended and int(ended.group(1)) >= expected, stopped.stdout
            result = outcome["result"]
            assert result.is_error and "emergency stop" in text(result), text(result)
            await anyio.to_thread.run_sync(lambda: wait_until(lambda: not any(_alive(p) for p in started), 2, "every child dead"))
            refused = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "no"}})
            assert refused.is_error and refused.structured_content["type"] == "PERMISSION_DENIED"
            assert "aai-gateway resume" in text(refused)
            assert daemon.cli("resume").returncode == 0
            ok = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "yes"}})
            assert not ok.is_error, text(ok)
            # The terminal starts afresh and says why the old session is gone.
            fresh = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {"command": "echo fresh"}})
            assert not fresh.is_error, text(fresh)
            assert fresh.structured_content["stdout"] == "fresh"
            assert "emergency stop" in fresh.structured_content["previous_session"]
    audit = daemon.cli("audit", "export")
    assert "emergency_stop" in audit.stdout and "resume" in audit.stdout
    verify = daemon.cli("audit", "verify")
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_ctrl_shift_esc_presses_the_emergency_stop(home, bus):
    assert shutil.which("xdotool"), "xdotool is missing: apt-get install -y xdotool"
    display, xvfb = start_xvfb("800x600x24")
    try:
        env = {**gateway_env(home, bus), "DISPLAY": display}
        d = Daemon(home, env)
        try:
            assert "EMERGENCY STOP ON" not in d.cli("status").stdout
            pressed = subprocess.run(["xdotool", "key", "ctrl+shift+Escape"], env=env, capture_output=True, text=True, timeout=10)
            assert pressed.returncode == 0, pressed.stderr
            wait_until(lambda: "EMERGENCY STOP ON" in d.cli("status").stdout, 5, "the stop after Ctrl+Shift+Esc")
            audit = d.cli("audit", "export")
            assert "Ctrl+Shift+Esc" in audit.stdout
        finally:
            d.close()
    finally:
        xvfb.kill()
        xvfb.wait(timeout=10)


async def _while_queued(d, c, text_value, then):
    """Calls echo, waits until the call is in the approval queue, runs `then(approval_id)`
    and returns the call's result and when it came back."""
    outcome = {}

    async def call():
        outcome["result"] = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": text_value}})
        outcome["at"] = time.monotonic()

    def queued():
        out = d.cli("approvals").stdout
        if out.startswith("ap-"):
            outcome["id"] = out.split()[0]
        return "id" in outcome

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await anyio.to_thread.run_sync(lambda: wait_until(queued, 10, "the approval in the queue"))
        then(outcome["id"])
    return outcome["result"], outcome["at"]


def _audit_rows(d):
    out = d.cli("audit", "export")
    assert out.returncode == 0, out.stderr
    return [json.loads(line) for line in out.stdout.splitlines() if line.strip()]


async def test_two_resumes_at_once_run_the_call_once_whatever_the_answer(home, bus, monkeypatch):
    """The agent resumes one approved call twice at the same moment: it runs once, for every
    answer kind — a grant the first resume leaves (session, tool, app) does not let the second
    run too. A denied approval's resume says it was denied."""
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 1)
    try:
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="twice-client") as c:
                for n, answer in enumerate(["allow_once", "allow_session", "always_tool", "always_app"]):
                    marker = f"resumed-{n}-{answer}"
                    pending = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": marker}})
                    approval = pending.structured_content["detail"]["approval_id"]
                    answered = d.cli("approvals", "answer", approval, answer)
                    assert answered.returncode == 0, answered.stderr
                    results = []

                    async def resume():
                        results.append(await c.call_tool("aai_exec", {"approval_id": approval}))

                    async with anyio.create_task_group() as tg:
                        tg.start_soon(resume)
                        tg.start_soon(resume)
                    ran = [r for r in results if not r.is_error]
                    assert len(ran) == 1, [text(r) for r in results]
                    refused = next(r for r in results if r.is_error)
                    assert "already used" in text(refused), text(refused)
                    rows = [r for r in _audit_rows(d) if r.get("tool") == "echo" and r.get("result") == "success"
                            and marker in json.dumps(r.get("args"))]
                    assert len(rows) == 1, (answer, rows)
                    # Grants left by the answer are withdrawn for the next round.
                    d.cli("consent", "revoke", "org.aai.test", "--client", "twice-client")
                pending = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "no"}})
                approval = pending.structured_content["detail"]["approval_id"]
                assert d.cli("approvals", "deny", approval).returncode == 0
                first = await c.call_tool("aai_exec", {"approval_id": approval})
                second = await c.call_tool("aai_exec", {"approval_id": approval})
                for refused in (first, second):
                    assert refused.is_error and "ran once" not in text(refused), text(refused)
                assert "denied" in text(second), text(second)
    finally:
        d.close()


async def test_a_call_nobody_can_ask_about_waits_in_the_queue_and_resumes_once(home, bus, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 1)
    try:
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="no-elicitation-client") as c:
                pending = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "approved text"}})
                assert pending.is_error, text(pending)
                detail = pending.structured_content["detail"]
                assert detail["reason"] == "pending_approval", pending.structured_content
                approval = detail["approval_id"]
                assert approval in text(pending) and "approval_id" in text(pending)
                listed = d.cli("approvals")
                assert listed.returncode == 0 and approval in listed.stdout and "allow_once" in listed.stdout
                # As data, with --json: the queue, one approval, the daemon's status.
                as_json = json.loads(d.cli("--json", "approvals").stdout)
                assert [a["id"] for a in as_json["pending"]] == [approval], as_json
                one = json.loads(d.cli("--json", "approvals", "show", approval).stdout)
                assert one["id"] == approval and one["tool"] == "echo", one
                status = json.loads(d.cli("--json", "status").stdout)
                assert status["running"] is True and status["stopped"] is False and status["pid"], status
                # Resuming before the user answered: still pending, nothing ran.
                early = await c.call_tool("aai_exec", {"approval_id": approval})
                assert early.is_error and early.structured_content["detail"]["reason"] == "pending_approval"
                bogus = d.cli("approvals", "answer", approval, "always_everything")
                assert bogus.returncode == 2 and "not an answer" in bogus.stderr
                approved = d.cli("approvals", "approve", approval)
                assert approved.returncode == 0, approved.stderr
                assert d.cli("approvals", "deny", approval).returncode == 2  # answered already
                ran = await c.call_tool("aai_exec", {"approval_id": approval})
                assert not ran.is_error, text(ran)
                assert "approved text" in text(ran)
                again = await c.call_tool("aai_exec", {"approval_id": approval})
                assert again.is_error and "already used" in text(again)
            async with d.client(name="another-client") as other:
                foreign = await other.call_tool("aai_exec", {"approval_id": approval})
                assert foreign.is_error and "for this client" in text(foreign)
        ran_ok = [r for r in _audit_rows(d) if r.get("tool") == "echo" and r.get("result") == "success"]
        assert len(ran_ok) == 1, ran_ok
        assert "allowed_once" in ran_ok[0]["decision"], ran_ok
        assert any(r.get("tool") == "echo" and r.get("result") == "pending" for r in _audit_rows(d))
        assert d.cli("approvals").stdout.strip() == "no approvals are waiting"
    finally:
        d.close()


async def test_an_answer_within_the_wait_lets_the_call_finish(home, bus, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 20)
    try:
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="patient-client") as c:
                for decision, expect_ok in (("approve", True), ("deny", False)):
                    def answer(approval):
                        answered = d.cli("approvals", decision, approval)
                        assert answered.returncode == 0, answered.stderr

                    r, _ = await _while_queued(d, c, decision, answer)
                    assert r.is_error != expect_ok, text(r)
                    if not expect_ok:
                        assert "declined" in text(r)
    finally:
        d.close()


async def test_clients_of_the_daemon_hear_when_apps_change(daemon):
    """Both a Streamable HTTP client and a stdio client forwarded to the daemon get
    list_changed when a descriptor is installed, and then see the new app."""
    from conftest import descriptor_doc, install

    events = {"http": [], "stdio": []}

    def recorder(kind):
        async def on_message(message):
            events[kind].append(type(getattr(message, "root", message)).__name__)
        return on_message

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {daemon.token}"}, timeout=30)
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=daemon.env)
    with anyio.fail_after(TIMEOUT):
        async with Client(streamable_http_client(daemon.url, http_client=http), mode="legacy", cache=None,
                          message_handler=recorder("http")) as over_http, \
                Client(params, mode="legacy", cache=None, message_handler=recorder("stdio")) as over_stdio:
            for c in (over_http, over_stdio):
                assert "app_org_aai_added" not in {t.name for t in (await c.list_tools()).tools}
            await anyio.sleep(0.5)
            events["http"].clear()
            events["stdio"].clear()
            install(daemon.home, "org.aai.added", descriptor_doc("org.aai.added"))
            while not all("ToolListChangedNotification" in e for e in events.values()):
                await anyio.sleep(0.05)
            for c in (over_http, over_stdio):
                assert "app_org_aai_added" in {t.name for t in (await c.list_tools()).tools}


async def test_stale_runtime_files_naming_another_program_are_not_forwarded_to(home, bus, monkeypatch):
    """Runtime files naming a live process that is no gateway daemon (a crashed daemon's files,
    its pid since given to another program) whose port accepts but never answers: stdio
    clients are served in-process instead of waiting forever. (A live daemon that is slow is
    waited for: test_gate_controls.py.)"""
    import socket

    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(16)
    try:
        run = home / "run"
        run.mkdir(mode=0o700)
        (run / "serve.json").write_text(json.dumps({"url": f"http://127.0.0.1:{silent.getsockname()[1]}/mcp", "pid": os.getpid()}))
        (run / "token").write_text("0" * 64)
        params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
        with anyio.fail_after(TIMEOUT):
            async with Client(params, mode="legacy", cache=None) as c:
                got = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "served here"}})
                assert not got.is_error and "served here" in text(got)
    finally:
        silent.close()


async def test_the_stop_ends_calls_waiting_for_approval(home, bus, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 25)
    try:
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="waiting-client") as c:
                pressed = {}

                def stop(_approval):
                    pressed["at"] = time.monotonic()
                    assert d.cli("stop").returncode == 0

                r, came_back = await _while_queued(d, c, "never", stop)
                assert r.is_error and "emergency stop" in text(r), text(r)
                # It stopped waiting when the stop was pressed, not at the end of the 25 s wait.
                assert came_back - pressed["at"] < 20
        assert not any(row.get("tool") == "echo" and row.get("result") == "success" for row in _audit_rows(d))
    finally:
        d.close()


async def test_session_grants_end_when_the_http_or_forwarded_session_ends(home, bus, monkeypatch):
    """"Allow for this session" lasts as long as the client's session: over HTTP until the
    client closes it, through the stdio forwarder until the client leaves."""
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 20)
    asked = []

    async def allow_for_this_session(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_session"})

    def grants():
        out = d.cli("consent", "list")
        assert out.returncode == 0, out.stderr
        return out.stdout

    http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {d.token}"}, timeout=30)
    over_http = Client(streamable_http_client(d.url, http_client=http), mode="legacy", cache=None,
                       elicitation_callback=allow_for_this_session, client_info=Implementation(name="http-session", version="1"))
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=d.env)
    over_stdio = Client(params, mode="legacy", cache=None, elicitation_callback=allow_for_this_session,
                        client_info=Implementation(name="stdio-session", version="1"))
    try:
        for name, c in (("http-session", over_http), ("stdio-session", over_stdio)):
            with anyio.fail_after(TIMEOUT):
                async with c:
                    for _ in range(2):
                        r = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": name}})
                        assert not r.is_error, text(r)
                    assert f"client={name} org.aai.test:echo  session" in grants()
            await anyio.to_thread.run_sync(lambda: wait_until(lambda: name not in grants(), 10, f"{name}'s session grant ends"))
        assert len(asked) == 2, asked  # once per session
    finally:
        d.close()


async def test_session_grants_hold_for_2026_07_28_clients_over_http_and_the_forwarder(home, bus):
    """A 2026-07-28 client's requests carry no session: "Allow for this session" holds for its
    connection all the same — the stdio forwarder's, or over HTTP the client's — so the next
    identical call is not asked again; another connection is asked anew."""
    d = queue_daemon(home, bus, 20)
    asked = []

    async def allow_for_this_session(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_session"})

    def over_http(name):
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {d.token}"}, timeout=30)
        return Client(streamable_http_client(d.url, http_client=http), mode="2026-07-28", cache=None,
                      elicitation_callback=allow_for_this_session, client_info=Implementation(name=name, version="1"))

    def over_stdio(name):
        params = StdioServerParameters(command=str(GATEWAY), args=[], env=d.env)
        return Client(params, mode="2026-07-28", cache=None, elicitation_callback=allow_for_this_session,
                      client_info=Implementation(name=name, version="1"))

    try:
        for name, make in (("http-2026", over_http), ("stdio-2026", over_stdio), ("stdio-2026", over_stdio)):
            before = len(asked)
            with anyio.fail_after(TIMEOUT):
                async with make(name) as c:
                    for n in range(3):
                        r = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": name}})
                        assert not r.is_error, text(r)
            # Asked once per connection: a second forwarded connection of the same client is
            # a session of its own.
            assert len(asked) == before + 1, (name, asked)
    finally:
        d.close()


async def test_a_reused_id_in_a_session_is_refused_and_the_first_request_still_answered(daemon):
    """Over HTTP, a request with the id of one still running in its session took over that id's
    route: the first POST waited for ever. Now the second is refused (400, a JSON-RPC error with
    a null id), the first is answered, and the id is free again once it was. Without a session
    (2026-07-28) each request is its own exchange: both are answered."""
    headers = {"Authorization": f"Bearer {daemon.token}", "Accept": "application/json, text/event-stream",
               "Content-Type": "application/json", "MCP-Protocol-Version": "2025-06-18"}

    def call(i, tool, args, meta=None):
        params = {"name": "aai_exec", "arguments": {"app": "org.aai.test", "tool": tool, "args": args}}
        if meta:
            params["_meta"] = meta
        return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": params}

    def answer(response):
        frames = [json.loads(line[5:]) for line in response.text.splitlines() if line.startswith("data:") and line[5:].strip()]
        return frames[-1] if frames else response.json()

    with anyio.fail_after(60):
        async with httpx2.AsyncClient(headers=headers, timeout=30) as http:
            r = await http.post(daemon.url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}})
            assert r.status_code == 200, r.text
            http.headers["Mcp-Session-Id"] = r.headers["mcp-session-id"]
            r = await http.post(daemon.url, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
            assert r.status_code == 202, r.text
            answers = {}
            first_sent = anyio.Event()

            async def first():
                request = http.build_request("POST", daemon.url, json=call(50, "slow", {"millis": 600}))
                response = await http.send(request, stream=True)
                first_sent.set()
                await response.aread()
                answers["first"] = response

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(first)
                await first_sent.wait()
                answers["second"] = await http.post(daemon.url, json=call(50, "echo", {"text": "dup"}))
            refused = answers["second"]
            assert refused.status_code == 400, refused.text
            error = refused.json()
            assert error["id"] == 50 and error["error"]["code"] == -32600 and "not been answered" in error["error"]["message"], error
            first_answer = answer(answers["first"])
            assert first_answer["id"] == 50 and "result" in first_answer, first_answer
            again = answer(await http.post(daemon.url, json=call(50, "echo", {"text": "again"})))
            assert again["result"]["content"][0]["text"] == "again", again

        # No session: two requests with one id are two exchanges, each answered.
        meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientInfo": {"name": "raw", "version": "1"},
                "io.modelcontextprotocol/clientCapabilities": {}}
        stateless = {**headers, "MCP-Protocol-Version": "2026-07-28", "Mcp-Method": "tools/call", "Mcp-Name": "aai_exec"}
        async with httpx2.AsyncClient(headers=stateless, timeout=30) as http:
            results = []

            async def post(tool, args):
                results.append(answer(await http.post(daemon.url, json=call(7, tool, args, meta))))

            async with anyio.create_task_group() as tasks:
                tasks.start_soon(post, "slow", {"millis": 600})
                tasks.start_soon(post, "echo", {"text": "beside"})
            assert sorted(r["id"] for r in results) == [7, 7] and all("result" in r for r in results), results
