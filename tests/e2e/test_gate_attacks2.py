"""Attacks on containment by the agent itself (issue 26, after the Landlock launcher, the
session-socket namespace and the control credential landed). Each test shows an attack by its
effect and fails while the attack works."""

import http.server
import json
import os
import subprocess
import sys
import threading
from pathlib import Path

import anyio
import mcp.client.session as session_module
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import GATEWAY, gateway_env, text

pytestmark = pytest.mark.anyio
TIMEOUT = 90
HERE = Path(__file__).resolve().parent



class Page:
    """A loopback page for the browser to open (any page starts the gateway's Chromium)."""

    def __init__(self):
        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                body = b"<html><body>hello</body></html>"
                self.send_response(200)
                self.send_header("Content-Type", "text/html")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


def _config(home, work, extra=None):
    # "Always allow the terminal" in effect: high is auto-approved (critical still is not).
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development",
                   "risk_policies": {"low": "auto_approve", "medium": "auto_approve", "high": "auto_approve"}}}},
        **(extra or {}),
    }))


async def test_a_contained_command_drives_the_gateways_browser_through_its_devtools_port(home, bus, tmp_path, monkeypatch):
    """The gateway's Chromium runs unconfined with `--remote-debugging-port=0` on loopback, and
    Landlock leaves the network alone: a contained command finds the port in /proc/net/tcp,
    speaks CDP to it without any credential, has the browser open `file://AAI_HOME/run/control`
    (the control credential Landlock hides from the command) and read it back, then turns the
    downloads the gateway denied back on with a download folder inside AAI_HOME and writes a
    file there."""
    work = tmp_path / "work"
    work.mkdir()
    page = Page()
    _config(home, work, {"browser": {"resolve": {"site.test:80": f"127.0.0.1:{page.port}"}}})
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    asked = []

    async def on_elicit(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    info = types.Implementation(name="attacker", version="1")
    try:
        with anyio.fail_after(TIMEOUT):
            async with Client(params, mode="legacy", elicitation_callback=on_elicit, client_info=info, cache=None) as c:
                opened = await c.call_tool("aai_exec", {"app": "local.browser", "tool": "browser_navigate",
                                                        "args": {"url": "http://site.test/"}})
                assert not opened.is_error, text(opened)
                ran = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                    "command": f"{sys.executable} {HERE / 'cdp_from_inside.py'} {home} {home}"}})
                assert not ran.is_error, text(ran)
                out = ran.structured_content
                got = json.loads(out["stdout"].strip().splitlines()[-1]) if out["stdout"].strip() else {}
    finally:
        page.close()
    control = (home / "run" / "control").read_text().strip()
    assert asked == [], asked
    broken = []
    if control and got.get("control") == control:
        broken.append("read the control credential (run/control) through the gateway's browser")
    if (home / "escaped.txt").exists():
        broken.append("wrote AAI_HOME/escaped.txt through the browser's downloads")
    if got.get("devtools"):
        broken.append("reached the browser's DevTools endpoint on loopback")
    assert not broken, "a contained command " + "; ".join(broken)


async def _bash(home, bus, env_extra, commands):
    params = StdioServerParameters(command=str(GATEWAY), args=[], env={**gateway_env(home, bus), **env_extra})
    results = []
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", client_info=types.Implementation(name="attacker", version="1"),
                          cache=None) as c:
            for command in commands:
                ran = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute",
                                                     "args": {"command": command}})
                results.append(ran)
    return results


async def test_a_contained_command_plants_code_in_a_default_writable_cache_that_the_user_runs(home, bus, tmp_path, monkeypatch, request):
    """`~/.cache` is writable by default, but tools keep things there that the user's own
    programs later run uncontained: Poetry's virtualenvs (`~/.cache/pypoetry/virtualenvs`),
    pre-commit's hook checkouts, Playwright's browsers, corepack's package managers, uv's
    hard-linked site-packages. A `.pth` file dropped into such a virtualenv runs at every start
    of its Python, as the user, outside the sandbox."""
    import shutil
    import tempfile

    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    # The user's home outside the temporary folder (which is writable whole by design).
    user = Path(tempfile.mkdtemp(prefix="attack2-home-", dir=HERE.parents[1] / "target"))
    request.addfinalizer(lambda: shutil.rmtree(user, ignore_errors=True))
    (user / ".config").mkdir()
    venv = user / ".cache" / "pypoetry" / "virtualenvs" / "proj-py3"
    subprocess.run(["python3", "-m", "venv", "--without-pip", str(venv)], check=True, timeout=60)
    site = next(venv.glob("lib/python3*/site-packages"))
    work = tmp_path / "work"
    work.mkdir()
    canary = tmp_path / "ran-outside"
    # What the agent writes with file_write into its allowed folder, then copies.
    (work / "zz.pth").write_text(f"import os; open({str(canary)!r}, 'w').write('agent code ran as the user')\n")
    _config(home, work)
    [control, ran] = await _bash(home, bus, {"HOME": str(user)}, [
        f"cp {work / 'zz.pth'} {user / '.config'}/", f"cp {work / 'zz.pth'} {site}/"])
    # The same copy into ~/.config is refused: the home outside the caches is contained.
    assert not (user / ".config" / "zz.pth").exists(), text(control)
    # Later, the user works on their project (uncontained).
    subprocess.run([str(venv / "bin" / "python"), "-c", "pass"], timeout=30, env={**os.environ, "HOME": str(user)})
    assert not canary.exists(), (
        f"the contained command's code ran as the user from ~/.cache ({text(ran)[:200]})")
