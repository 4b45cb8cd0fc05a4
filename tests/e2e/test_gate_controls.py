"""The controls of the gate against the agent itself (issue 26): the MCP token reaches MCP only,
approvals/resume/login take the control credential, stopping is open to everyone and cannot be
switched off — not by a flood of tokenless requests, not by idle connections, not by a stdio
gateway serving around a slow daemon, not by `aai-gateway call` during a stop."""

import json
import os
import socket
import subprocess
import threading
import time

import anyio
import httpx2
import mcp.client.session as session_module
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.types import Implementation

from conftest import Daemon, GATEWAY, gateway_env, queue_daemon, text, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 60



def control_credential(home):
    return (home / "run" / "control").read_text().strip()


@pytest.fixture
def daemon(home, bus, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 1)
    yield d
    d.close()


async def test_the_mcp_token_reaches_mcp_only_and_the_control_credential_the_controls(daemon):
    control = control_credential(daemon.home)
    assert (daemon.home / "run" / "control").stat().st_mode & 0o777 == 0o600
    assert control != daemon.token and len(control) == 64
    mcp_token = {"Authorization": f"Bearer {daemon.token}"}
    person = {"Authorization": f"Bearer {control}"}
    with anyio.fail_after(TIMEOUT):
        # A client queues a call, then tries to answer it itself with the token it holds.
        async with daemon.client(name="self-approver") as c:
            pending = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "mine"}})
            approval = pending.structured_content["detail"]["approval_id"]
            async with httpx2.AsyncClient(timeout=10) as http:
                for method, path, body in [
                    ("POST", "/control/approvals/answer", {"id": approval, "answer": "always_app"}),
                    ("GET", "/control/approvals", None),
                    ("POST", "/control/login", None),
                    ("POST", "/control/resume", None),
                    ("POST", "/control/shutdown", None),
                ]:
                    for headers in (mcp_token, {}):
                        r = await http.request(method, daemon.base + path, headers=headers, json=body)
                        assert r.status_code == 401, (path, headers.keys(), r.status_code, r.text)
                        assert "control credential" in r.json()["error"], r.text
                # Nothing was answered: the call is still pending, and the control credential
                # cannot open MCP either.
                r = await http.get(daemon.base + "/control/approvals", headers=person)
                assert r.status_code == 200 and approval in r.text, r.text
                r = await http.post(daemon.url, headers={**person, "Accept": "application/json, text/event-stream"},
                                    json={"jsonrpc": "2.0", "id": 1, "method": "ping"})
                assert r.status_code == 401, r.text
                # The login link is the person's: minted with the control credential only.
                r = await http.post(daemon.base + "/control/login", headers=person)
                assert r.status_code == 200 and "/login?code=" in r.json()["url"]
                # Status and stop take no credential at all (stopping is always safe).
                r = await http.get(daemon.base + "/control/status")
                assert r.status_code == 200 and r.json()["stopped"] is False
            early = await c.call_tool("aai_exec", {"approval_id": approval})
            assert early.is_error and early.structured_content["detail"]["reason"] == "pending_approval"
    # The person's command line answers with the control credential.
    assert daemon.cli("approvals", "deny", approval).returncode == 0


async def test_the_command_line_refuses_gate_changes_without_the_control_credential(daemon):
    # A process that cannot read AAI_HOME/run/control (an agent's contained command; here,
    # another user) is refused every command that changes the gate, with what to do.
    nobody = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--"]
    home = daemon.home
    os.chmod(home.parent, 0o755)
    os.chmod(home, 0o755)
    os.chmod(home / "run", 0o755)
    try:
        for args in (
            ["approvals"],
            ["approvals", "approve", "ap-000000000000000000000000"],
            ["resume"],
            ["dashboard", "--no-open"],
            ["consent", "grant", "local.terminal", "--client", "evil"],
            ["schedule", "enable", "x"],
            ["store", "uninstall", "org.aai.test"],
            ["auth", "logout", "org.aai.test"],
        ):
            out = subprocess.run(nobody + [str(GATEWAY), *args], env=daemon.env, capture_output=True, text=True, timeout=30)
            assert out.returncode != 0, (args, out.stdout)
            assert "control credential" in out.stderr and "run the command yourself" in out.stderr, (args, out.stderr)
        # Stopping stays open to every local caller of the user; the status is open too.
        status = subprocess.run(nobody + [str(GATEWAY), "status"], env=daemon.env, capture_output=True, text=True, timeout=30)
        assert "control credential" not in status.stderr
    finally:
        os.chmod(home / "run", 0o700)
        os.chmod(home, 0o700)


def _flood_requests(base, stop_at, counts):
    """Tokenless GETs of the status as fast as one thread can send them."""
    host, port = base.removeprefix("http://").rsplit(":", 1)
    request = f"GET /control/status HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    while time.monotonic() < stop_at:
        try:
            with socket.create_connection((host, int(port)), timeout=2) as s:
                s.sendall(request)
                # Answered means an HTTP answer (a refusal for the rate included), not a close.
                counts.append(1 if s.recv(4096).startswith(b"HTTP/1.1 ") else 0)
        except OSError:
            counts.append(0)


def _idle_connections(base, n):
    host, port = base.removeprefix("http://").rsplit(":", 1)
    held = []
    for _ in range(n):
        try:
            held.append(socket.create_connection((host, int(port)), timeout=2))
        except OSError:
            break
    return held


async def test_the_stop_answers_under_floods_of_requests_and_idle_connections(home, bus, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    (home / "config.json").write_text(json.dumps({
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development"}}}}))
    # A descriptor limit the daemon cannot raise (soft = hard = 1,024), as on many desktops.
    daemon = Daemon(home, gateway_env(home, bus), prefix=("prlimit", "--nofile=1024:1024", "--"))
    try:
        await _flood_and_stop(daemon)
    finally:
        daemon.close()


async def _flood_and_stop(daemon):
    with anyio.fail_after(TIMEOUT):
        async with daemon.client(name="flooded-client") as c:
            # Held open, without a byte: more than a default descriptor limit of 1,024.
            held = await anyio.to_thread.run_sync(_idle_connections, daemon.base, 2000)
            # Every slot the daemon has is taken by a connection that sent nothing: a new one is
            # still answered (the oldest silent connection makes room for it).
            fresh = await anyio.to_thread.run_sync(
                lambda: httpx2.get(daemon.base + "/control/status", timeout=10))
            assert fresh.status_code == 200, fresh.text
            counts = []
            stop_at = time.monotonic() + 4
            threads = [threading.Thread(target=_flood_requests, args=(daemon.base, stop_at, counts)) for _ in range(6)]
            for t in threads:
                t.start()
            try:
                await anyio.sleep(1)  # let the flood drain the open bucket first
                started = time.monotonic()
                stopped = await anyio.to_thread.run_sync(daemon.cli, "stop")
                took = time.monotonic() - started
                assert stopped.returncode == 0, stopped.stderr
                assert "emergency stop on" in stopped.stdout, stopped.stdout
                print(f"\nstop under a flood of {len(held)} idle connections and 6 request threads: {took * 1000:.0f} ms")
                # The authenticated client keeps its own rate: it is refused by the stop, not by
                # the flood's bucket.
                refused = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "x"}})
                assert refused.is_error and "emergency stop" in text(refused), text(refused)
                status = await anyio.to_thread.run_sync(daemon.cli, "status")
                assert "EMERGENCY STOP ON" in status.stdout, status.stdout + status.stderr
            finally:
                for t in threads:
                    t.join(timeout=10)
                for s in held:
                    s.close()
            assert len(counts) > 1000, len(counts)
            assert sum(counts) > len(counts) / 2, f"{sum(counts)} of {len(counts)} answered"
            print(f"{len(counts)} tokenless requests sent, {sum(counts)} answered")
    resumed = daemon.cli("resume")
    assert resumed.returncode == 0 and "lifted" in resumed.stdout, resumed.stdout + resumed.stderr


def test_a_connection_that_sends_no_request_head_is_closed(daemon):
    host, port = daemon.base.removeprefix("http://").rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=30) as silent, \
            socket.create_connection((host, int(port)), timeout=30) as partial:
        partial.sendall(b"GET /control/status HTTP/1.1\r\nHost: ")
        started = time.monotonic()
        # Both are closed by the daemon (EOF or reset) well before the 30 s socket timeout
        # (a timeout raises, failing the test).
        for s in (silent, partial):
            try:
                while s.recv(4096):
                    pass
            except ConnectionResetError:
                pass
        waited = time.monotonic() - started
        print(f"\nan idle connection was closed after {waited:.1f} s")


async def test_the_stop_reaches_in_process_gateways_and_the_cli_with_no_daemon(home, bus, tmp_path):
    env = gateway_env(home, bus)
    work = tmp_path / "work"  # beside AAI_HOME, not its parent: the sandbox writes only here
    work.mkdir()
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development", "risk_policies": {"medium": "auto_approve", "high": "auto_approve"}}}},
    }))
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=env)
    pidfile = work / "sleeper.pid"
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None,
                          client_info=Implementation(name="in-process-client", version="1")) as c:
            ok = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "before"}})
            assert not ok.is_error, text(ok)
            outcome = {}

            async def long_call():
                outcome["result"] = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                    "command": f"sleep 300 & echo $! > {pidfile}; wait", "timeout_ms": 120000}})

            async with anyio.create_task_group() as tg:
                tg.start_soon(long_call)
                await anyio.to_thread.run_sync(lambda: wait_until(lambda: pidfile.exists() and pidfile.read_text().strip(), 20, "the sleeper"))
                sleeper = int(pidfile.read_text())
                # No daemon runs: the stop is the marker, which this gateway watches.
                stopped = subprocess.run([str(GATEWAY), "stop"], env=env, capture_output=True, text=True, timeout=30)
                assert stopped.returncode == 0 and "emergency stop on" in stopped.stdout, stopped.stdout + stopped.stderr
            assert outcome["result"].is_error, text(outcome["result"])
            await anyio.to_thread.run_sync(lambda: wait_until(lambda: not os.path.exists(f"/proc/{sleeper}") or
                                                              open(f"/proc/{sleeper}/stat").read().split(")")[1].split()[0] == "Z",
                                                              10, "the sleeper killed by the stop"))
            refused = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "after"}})
            assert refused.is_error and "emergency stop" in text(refused), text(refused)
            # `aai-gateway call` runs nothing during a stop either.
            called = subprocess.run([str(GATEWAY), "call", "org.aai.test", "echo", "--args", '{"text": "cli"}'],
                                    env=env, capture_output=True, text=True, timeout=30)
            assert called.returncode != 0 and "emergency stop" in called.stderr, called.stdout + called.stderr
            status = subprocess.run([str(GATEWAY), "status"], env=env, capture_output=True, text=True, timeout=30)
            assert "EMERGENCY STOP ON" in status.stdout, status.stdout + status.stderr
            # A new in-process gateway starts stopped.
            async with Client(params, mode="legacy", cache=None,
                              client_info=Implementation(name="later-client", version="1")) as later:
                again = await later.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "later"}})
                assert again.is_error and "emergency stop" in text(again), text(again)
            resumed = subprocess.run([str(GATEWAY), "resume"], env=env, capture_output=True, text=True, timeout=30)
            assert resumed.returncode == 0 and "lifted" in resumed.stdout, resumed.stdout + resumed.stderr

            def runs_again():
                return not subprocess.run([str(GATEWAY), "call", "org.aai.test", "echo", "--args", '{"text": "cli"}'],
                                          env=env, capture_output=True, text=True, timeout=30).returncode

            await anyio.to_thread.run_sync(lambda: wait_until(runs_again, 10, "calls after the resume"))
            back = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "back"}})
            assert not back.is_error, text(back)


async def test_a_stdio_gateway_waits_for_a_slow_daemon_instead_of_serving_around_it(daemon):
    # The daemon is alive but answers nothing (stopped with SIGSTOP): a stdio client must not
    # be served in-process behind its back.
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=daemon.env)
    os.kill(daemon.pid, 19)  # SIGSTOP
    errlog = daemon.home / "stdio.err"
    try:
        with open(errlog, "w") as err:
            proc = subprocess.Popen([str(GATEWAY)], env=daemon.env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
            try:
                init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
                    "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "waiting", "version": "1"}}}
                proc.stdin.write((json.dumps(init) + "\n").encode())
                proc.stdin.flush()
                wait_until(lambda: "alive but does not answer" in errlog.read_text(), 20, "the wait's reason in the log")
                assert "serving this client here" not in errlog.read_text()
                assert proc.poll() is None
                os.kill(daemon.pid, 18)  # SIGCONT: now it answers, and the client is forwarded
                line = proc.stdout.readline()
                assert json.loads(line)["id"] == 1, line
                wait_until(lambda: "forwarding this client" in errlog.read_text(), 20, "forwarded")
            finally:
                proc.kill()
                proc.wait(timeout=10)
    finally:
        os.kill(daemon.pid, 18)
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None,
                          client_info=Implementation(name="after-wait", version="1")) as c:
            assert (await c.list_tools()).tools


async def test_a_granted_shell_cannot_act_as_the_user_on_the_gate(home, bus, tmp_path, monkeypatch):
    """Under a standing "always allow the terminal" grant, the agent's shell tries every way
    it once had to reach the gate's controls; each fails, and by effect nothing changed."""
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    work = tmp_path / "work"
    work.mkdir()
    (home / "tokens").mkdir(mode=0o700)
    (home / "tokens" / "com.example.json").write_text('{"api_key": "SECRET-API-KEY"}')
    (home / "config.json").write_text(json.dumps({
        "approval_wait_seconds": 1,
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
        "policy": {"default_profile": "ask", "profiles": {"ask": {"preset": "development", "risk_policies": {
            "low": "require_approval", "medium": "require_approval", "high": "require_approval"}}}},
    }))
    config_before = (home / "config.json").read_text()
    d = Daemon(home, gateway_env(home, bus))
    try:
        granted = d.cli("consent", "grant", "local.terminal", "--client", "shell-agent")
        assert granted.returncode == 0, granted.stderr
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="shell-agent") as c:
                pending = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "queued"}})
                approval = pending.structured_content["detail"]["approval_id"]

                async def sh(command):
                    got = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                        "command": command, "working_dir": str(work)}})
                    return got, json.dumps(got.structured_content or {}) + text(got)

                ok, out = await sh("echo inside > inside.txt && cat inside.txt")
                assert not ok.is_error and "inside" in out, out
                gw = str(GATEWAY)
                for attempt in (
                    f"{gw} approvals approve {approval}",
                    f"{gw} consent grant local.terminal --client shell-agent-2",
                    f"{gw} resume",
                    f"{gw} dashboard --no-open",
                    f"{gw} schedule add evil --cron '* * * * *' --workflow x --grant local.terminal:bash_execute",
                ):
                    _, out = await sh(f"AAI_HOME={home} {attempt}; echo EXIT=$?")
                    assert "EXIT=0" not in out, (attempt, out)
                    # Refused for want of the control credential, or — the gateway's home
                    # being out of the box's view — for want of any daemon to act on.
                    assert ("control credential" in out or "PERMISSION_DENIED" in out
                            or "no gateway daemon is running" in out), (attempt, out)
                for secret in ("run/token", "run/control", "tokens/com.example.json", "data.db"):
                    _, out = await sh(f"cat {home / secret} | head -c 200; echo EXIT=$?")
                    assert "SECRET-API-KEY" not in out and d.token not in out, (secret, out)
                _, out = await sh(f"""echo '{{"policy": {{"default_profile": "x"}}}}' > {home / 'config.json'}; echo EXIT=$?""")
                _, out = await sh(f"curl -s -X POST {d.base}/control/approvals/answer -H 'Authorization: Bearer '$(cat {home}/run/token) "
                                  f"-d '{{\"id\": \"{approval}\", \"answer\": \"always_app\"}}'; echo")
                assert "answered" not in out, out
        # By effect: the approval still waits, no grant was added, the config is unchanged.
        listed = d.cli("approvals")
        assert approval in listed.stdout, listed.stdout + listed.stderr
        grants = d.cli("consent", "list").stdout
        assert "shell-agent-2" not in grants, grants
        assert (home / "config.json").read_text() == config_before
        assert (work / "inside.txt").read_text().strip() == "inside"
    finally:
        d.close()
