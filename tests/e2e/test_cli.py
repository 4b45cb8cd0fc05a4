"""The command line as a person uses it: in a real terminal (a pseudo-terminal), and the
server's log file."""

import json
import os
import pty
import select
import subprocess
import time

import anyio
import mcp.client.session as session_module
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import GATEWAY, gateway_env

ADD = json.dumps({"a": 40, "b": 2})


def in_terminal(args, env, answer=None, seconds=20):
    """Runs the gateway with stdin, stdout and stderr on one pseudo-terminal; types `answer`
    when it asks. Returns (exit code, everything shown)."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen([str(GATEWAY), *args], env=env, stdin=follower, stdout=follower, stderr=follower, close_fds=True)
    os.close(follower)
    shown = b""
    deadline = time.monotonic() + seconds
    answered = False
    while time.monotonic() < deadline:
        ready, _, _ = select.select([leader], [], [], 0.2)
        if ready:
            try:
                chunk = os.read(leader, 65536)
            except OSError:
                break
            if not chunk:
                break
            shown += chunk
            if answer is not None and not answered and b"[y/N]" in shown:
                os.write(leader, answer.encode() + b"\n")
                answered = True
        elif proc.poll() is not None:
            break
    proc.wait(timeout=10)
    os.close(leader)
    return proc.returncode, shown.decode(errors="replace")


def approval_config(home):
    config = {"policy": {"profiles": {"p": {"tool_overrides": {"org.aai.test:add": "require_approval"}}}, "default_profile": "p"}}
    (home / "config.json").write_text(json.dumps(config))


def test_call_in_a_terminal_asks_y_n_and_shows_no_stray_warnings(home, bus):
    approval_config(home)
    env = gateway_env(home, bus)
    code, shown = in_terminal(["call", "org.aai.test", "add", "--args", ADD], env, answer="y")
    assert code == 0, shown
    assert "Allow cli to run \"add\"" in shown and "[y/N]" in shown, shown
    assert "42" in shown
    assert "ansi" not in shown.lower() and "\x1b[" not in shown, repr(shown)
    code, shown = in_terminal(["call", "org.aai.test", "add", "--args", ADD], env, answer="n")
    assert code == 1 and "PERMISSION_DENIED" in shown and "declined" in shown, shown
    # Not in a terminal: nobody to ask, the grant command is given.
    out = subprocess.run([str(GATEWAY), "call", "org.aai.test", "add", "--args", ADD], env=env, capture_output=True, text=True, timeout=30, stdin=subprocess.DEVNULL)
    assert out.returncode == 1 and "consent grant org.aai.test add" in out.stderr, out.stderr




@pytest.mark.anyio
async def test_the_server_writes_a_private_log_file(home, bus, monkeypatch):
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    with anyio.fail_after(30):
        async with Client(params, mode="legacy", cache=None) as c:
            await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "logged"}})
    log = home / "logs" / "aai-gateway.log"
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and "client disconnected" not in (log.read_text() if log.exists() else ""):
        time.sleep(0.1)
    body = log.read_text()
    assert "serving MCP on stdio" in body and "call ok" in body, body
    assert "\x1b[" not in body
    assert oct(log.stat().st_mode & 0o777) == "0o600"
    assert oct((home / "logs").stat().st_mode & 0o777) == "0o700"
