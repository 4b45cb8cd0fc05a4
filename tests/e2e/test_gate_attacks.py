"""Attacks on the gate's controls by the agent itself (issue 26, after the control credential,
the stop marker, per-principal buckets and the head timeout landed). Each test shows an attack
by its effect and fails while the attack works."""

import json
import os
import socket
import subprocess
import time

import anyio
import mcp.client.session as session_module
import mcp_types as types
import pytest

from conftest import Daemon, GATEWAY, gateway_env, queue_daemon, text

pytestmark = pytest.mark.anyio
TIMEOUT = 60



def _split(base):
    host, port = base.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def _still_open_after(socks, seconds):
    """The sockets of `socks` the peer has not closed (EOF or reset) within `seconds`."""
    import selectors

    open_ = set(socks)
    deadline = time.monotonic() + seconds
    with selectors.DefaultSelector() as sel:
        for s in socks:
            sel.register(s, selectors.EVENT_READ)
        while open_ and (left := deadline - time.monotonic()) > 0:
            for key, _ in sel.select(timeout=left):
                try:
                    data = key.fileobj.recv(4096)
                except OSError:
                    data = b""
                if not data:
                    sel.unregister(key.fileobj)
                    open_.discard(key.fileobj)
    return list(open_)


def test_tokenless_stop_requests_with_a_slow_body_hold_every_connection(home, bus):
    """`POST /control/stop` takes no credential and no bucket, and its handler reads the body
    with no time limit: a head that promises a body which never comes passes the 5 s head
    timeout and keeps its connection for good. Enough of them fill the connection cap, and the
    person's `aai-gateway approvals` (and status, dashboard, every new MCP client) is refused."""
    # A descriptor limit the daemon cannot raise: the cap is 300 - 256 = 44 connections.
    daemon = Daemon(home, gateway_env(home, bus), prefix=("prlimit", "--nofile=300:300", "--"))
    held = []
    try:
        host, port = _split(daemon.base)
        head = (f"POST /control/stop HTTP/1.1\r\nHost: {host}:{port}\r\n"
                "Content-Type: application/json\r\nContent-Length: 4000\r\n\r\n").encode()
        for _ in range(60):
            s = socket.create_connection((host, port), timeout=5)
            s.sendall(head)
            held.append(s)
        # Each connection sent a complete head and then nothing: like an idle one, it should be
        # closed within a few seconds (5 s head timeout, with slack for a busy machine).
        open_after = _still_open_after(held, 12)
        listed = daemon.cli("approvals")
        assert listed.returncode == 0, f"{len(open_after)} slow stop requests still held; " + listed.stderr
        assert not open_after, f"{len(open_after)} tokenless connections held past the head timeout"
    finally:
        for s in held:
            s.close()
        daemon.close()


@pytest.fixture
def small_disk(tmp_path):
    """A 24 MiB file system of its own (tmpfs), as a home folder on a disk the agent can fill."""
    if os.geteuid() != 0:
        pytest.skip("mounting a small file system needs root here")
    mount = tmp_path / "disk"
    mount.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=24m,mode=0700", "tmpfs", str(mount)], check=True, timeout=30)
    try:
        yield mount
    finally:
        subprocess.run(["umount", "-l", str(mount)], timeout=30)


async def _fill(c, folder):
    """The agent fills the disk with the file tool, in ever smaller files, until nothing fits."""
    size, n = 1 << 20, 0
    while size >= 1:
        n += 1
        wrote = await c.call_tool("aai_exec", {"app": "local.files", "tool": "file_write", "args": {
            "path": str(folder / f"fill-{n}"), "content": "x" * size}})
        if wrote.is_error:
            size //= 4
    return n


async def test_a_disk_the_agent_filled_turns_the_stop_off_again(small_disk, bus, monkeypatch):
    """The stop is the marker file first. When the marker cannot be written (the disk is full,
    which the agent's file tool can arrange on the disk AAI_HOME shares with its allowed
    folders), `aai-gateway stop` fails before it tells the daemon anything, and a stop pressed
    on the daemon itself (HTTP, dashboard, hotkey) is lifted again by the daemon's own marker
    watch within 0.1 s: the flag is on, the marker is absent, so the watch "resumes"."""
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    home, work = small_disk / "aai-home", small_disk / "work"
    home.mkdir()
    work.mkdir()
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development", "risk_policies": {
            "low": "auto_approve", "medium": "auto_approve", "high": "auto_approve"}}}}}))
    daemon = Daemon(home, gateway_env(home, bus))
    try:
        with anyio.fail_after(4 * TIMEOUT):
            async with daemon.client(name="disk-filler") as c:
                await _fill(c, work)
                # The person presses the stop from the command line: it must take.
                stopped = await anyio.to_thread.run_sync(daemon.cli, "stop")
                # And on the daemon (what the dashboard's button and the hotkey do).
                async with __import__("httpx2").AsyncClient(timeout=10) as http:
                    pressed = await http.post(daemon.base + "/control/stop", json={"by": "the person"})
                assert pressed.status_code == 200 and pressed.json()["stopped"] is True, pressed.text
                # Well past the marker watch's 0.1 s period. Then the space comes back — the
                # agent's own job that filled it and frees it after a while (a `fallocate …;
                # sleep; rm` that outlived the call), a cleanup, the person deleting files —
                # here the test frees it.
                await anyio.sleep(1)
                for f in work.glob("fill-*"):
                    f.unlink()
                canary = work / "ran-during-the-stop"
                after = await c.call_tool("aai_exec", {"app": "local.files", "tool": "file_write", "args": {
                    "path": str(canary), "content": "ran"}})
                status = await anyio.to_thread.run_sync(daemon.cli, "status")
                assert not canary.exists() and after.is_error and "emergency stop" in text(after), (
                    "a call ran after the stop was pressed twice; `aai-gateway stop` said: "
                    + stopped.stdout + stopped.stderr[-300:] + f" | status: {status.stdout} | canary written: {canary.exists()}")
                assert stopped.returncode == 0, stopped.stderr[-500:]
    finally:
        daemon.close()


class _CookieCatcher(__import__("http.server").server.BaseHTTPRequestHandler):
    """The agent's own little server on another loopback port: it keeps every Cookie header."""

    seen: list = []

    def do_GET(self):
        _CookieCatcher.seen.append(self.headers.get("Cookie") or "")
        body = b"<!doctype html><title>build report</title><p>ok</p>"
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass



async def test_the_dashboard_session_cookie_goes_to_every_port_of_loopback(home, bus, monkeypatch):
    """Cookies are not bound to a port: the dashboard's session cookie (`SameSite=Strict` is
    about sites, and every port of 127.0.0.1 is the same site) is sent by the person's browser
    to any server on 127.0.0.1. The agent listens on a port of its own (a dev server, `python3
    -m http.server`: no file of the gate is read, and it works under Landlock's file rules) and
    has the person's browser open it (`app_launch xdg-open http://127.0.0.1:PORT/`, a link in a
    README it wrote, a "preview" it asks the person to open). With the cookie it reads the CSRF
    token from `/api/state` (a GET needs only the cookie), forges the `Origin` header (it is
    not a browser) and answers its own queued call."""
    import re
    import threading

    import httpx2
    from http.server import ThreadingHTTPServer

    from cdp import Chromium

    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    daemon = queue_daemon(home, bus, 20)
    browser = Chromium()  # the person's browser
    catcher = ThreadingHTTPServer(("127.0.0.1", 0), _CookieCatcher)
    threading.Thread(target=catcher.serve_forever, daemon=True).start()
    _CookieCatcher.seen = []
    try:
        # The person logs into the dashboard, as `aai-gateway dashboard` does.
        out = daemon.cli("dashboard", "--no-open")
        link = re.search(r"http://\S+/login\?code=[0-9a-f]+", out.stdout).group(0)
        page = browser.new_page()
        page.goto(link)
        page.wait("document.body.dataset.live === 'yes'")
        with anyio.fail_after(TIMEOUT):
            async with daemon.client(name="cookie-thief") as c:
                pending = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "stolen"}})
                approval = pending.structured_content["detail"]["approval_id"]
                # The person's browser opens the agent's page (what xdg-open of the URL does).
                page.goto(f"http://127.0.0.1:{catcher.server_address[1]}/")
                # Browsers do send it (cookies know no ports): what matters is that it opens nothing.
                cookie = next((c for c in _CookieCatcher.seen if "aai_dashboard=" in c), "")
                assert cookie, "the catcher saw no cookie: the attack was not exercised"
                jar = {"Cookie": cookie}
                async with httpx2.AsyncClient(timeout=10) as http:
                    state = await http.get(daemon.base + "/api/state", headers=jar)
                    assert state.status_code == 403 and "csrf" not in state.text, state.text
                    events = await http.get(daemon.base + "/api/events", headers=jar)
                    assert events.status_code == 403, events.status_code
                    for key in ("", "0" * 64):
                        r = await http.post(daemon.base + "/api/approvals/answer", json={"id": approval, "answer": "allow_once"},
                                            headers={**jar, "Origin": daemon.base, "X-AAI-CSRF": key})
                        assert r.status_code == 403, r.text
                ran = await c.call_tool("aai_exec", {"approval_id": approval})
                assert ran.is_error, "the agent answered its own approval: " + text(ran)
    finally:
        catcher.shutdown()
        browser.close()
        daemon.close()


def test_the_login_code_is_readable_in_the_openers_command_line(home, bus, tmp_path):
    """`aai-gateway dashboard` hands the one-time login link to `xdg-open` (and it to the
    browser) as a command-line argument: every process of the user can read it in
    `/proc/<pid>/cmdline` (Landlock does not hide /proc) while the browser starts, which takes
    hundreds of milliseconds cold. The agent's watcher redeems the code first and holds a 12 h
    dashboard session; the person sees "link used already" and simply asks for another."""
    import re
    import urllib.request

    daemon = queue_daemon(home, bus, 20)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    go = tmp_path / "browser-may-go"
    # A stand-in for xdg-open starting a browser: it holds its argv until the test lets it go.
    (bin_dir / "xdg-open").write_text(
        f"#!/bin/sh\ni=0\nwhile [ ! -e {go} ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n")
    (bin_dir / "xdg-open").chmod(0o755)
    env = {**daemon.env, "PATH": f"{bin_dir}:{os.environ['PATH']}", "DISPLAY": ":0"}
    try:
        out = subprocess.run([str(GATEWAY), "dashboard"], env=env, capture_output=True, text=True, timeout=30)
        assert out.returncode == 0, out.stderr
        assert "code=" not in out.stdout  # not printed: the person's browser got it
        # The agent's watcher: every process's command line.
        found = []
        for pid in filter(str.isdigit, os.listdir("/proc")):
            try:
                cmdline = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace")
            except OSError:
                continue
            found += re.findall(r"http://[^\x00]+/login\?code=[0-9a-f]+", cmdline)
        if found:
            # (What the watcher does with it when the assertion below fails.)
            class NoRedirect(urllib.request.HTTPRedirectHandler):
                def redirect_request(self, *args):
                    return None
            opener = urllib.request.build_opener(NoRedirect)
            try:
                opener.open(found[0], timeout=10)
            except urllib.error.HTTPError as answer:
                found.append(answer.headers.get("Set-Cookie") or "")
        assert not found, f"the login link in another process's command line, and what it gave: {found}"
    finally:
        go.write_text("")
        daemon.close()


def _flood_status(host, port, stop_at):
    request = f"GET /control/status HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode()
    while time.monotonic() < stop_at:
        try:
            with socket.create_connection((host, port), timeout=2) as s:
                s.sendall(request)
                s.recv(4096)
        except OSError:
            pass


def test_a_tokenless_flood_keeps_the_person_out_of_the_dashboard(home, bus):
    """The dashboard's `/login` counts in the unauthenticated bucket, the one a tokenless
    flood empties: while the agent floods, the person's one-time link is answered 429 and the
    dashboard (its approvals, its stop button) cannot be opened."""
    import multiprocessing
    import re
    import urllib.request

    daemon = queue_daemon(home, bus, 20)
    host, port = _split(daemon.base)
    # The person asks for a link (before the flood, so the command line is not slowed by it).
    out = daemon.cli("dashboard", "--no-open")
    link = re.search(r"http://\S+/login\?code=[0-9a-f]+", out.stdout).group(0)
    stop_at = time.monotonic() + 8
    # Processes, not threads: one Python process sends only ~1,000 requests a second.
    threads = [multiprocessing.Process(target=_flood_status, args=(host, port, stop_at)) for _ in range(6)]
    try:
        for t in threads:
            t.start()
        # The flood has emptied the unauthenticated bucket (400 requests of burst) once a
        # status request of our own is refused; the person opens the link right then.
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline:
            try:
                urllib.request.urlopen(daemon.base + "/control/status", timeout=5)
            except urllib.error.HTTPError as refused:
                if refused.code == 429:
                    break
            except OSError:
                pass

        class NoRedirect(urllib.request.HTTPRedirectHandler):
            def redirect_request(self, *args):
                return None

        try:
            urllib.request.build_opener(NoRedirect).open(link, timeout=10)
            status = 200
        except urllib.error.HTTPError as answer:
            status = answer.code
        assert status == 303, f"the person's login link was answered {status} during the agent's flood"
    finally:
        for t in threads:
            t.join(timeout=15)
            if t.is_alive():
                t.kill()
        daemon.close()


def test_control_commands_send_the_credential_to_whoever_holds_a_dead_daemons_port(home, bus):
    """A daemon that died without cleaning up (killed, out of memory) leaves `run/serve.json`
    and `run/token`. `daemon::running` only asks whether the recorded pid is alive, not whether
    it is the daemon (`is_daemon`, which the stdio path uses), so once that pid is reused — a
    fork loop of the agent's gets there in seconds with pid_max 32768 — the person's
    `aai-gateway approvals` sends the control credential as a bearer token to whatever now
    listens on the recorded port: the agent's own listener."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    if not os.access("/proc/sys/kernel/ns_last_pid", os.W_OK):
        pytest.skip("choosing the next pid (ns_last_pid) needs root here")
    daemon = queue_daemon(home, bus, 20)
    host, port = _split(daemon.base)
    control = (home / "run" / "control").read_text().strip()
    daemon.proc.kill()  # a crash, the OOM killer: no clean-up
    daemon.proc.wait(timeout=10)
    assert (home / "run" / "serve.json").exists()
    heard = []

    class Squatter(BaseHTTPRequestHandler):
        def _any(self):
            heard.append(self.headers.get("Authorization") or "")
            body = b'{"pending": []}'
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        do_GET = do_POST = _any

        def log_message(self, *args):
            pass

    squatter = ThreadingHTTPServer((host, port), Squatter)
    threading.Thread(target=squatter.serve_forever, daemon=True).start()
    # The agent's fork loop, made exact: the next process gets the dead daemon's pid.
    reused = None
    for _ in range(20):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(daemon.pid - 1))
        proc = subprocess.Popen(["sleep", "60"])
        if proc.pid == daemon.pid:
            reused = proc
            break
        proc.kill()
        proc.wait()
    assert reused, "could not reuse the pid (another process took it each time)"
    try:
        listed = daemon.cli("approvals")
        assert not any(control in h for h in heard), (
            f"the control credential went to the process on the dead daemon's port; the person saw: {listed.stdout}{listed.stderr[-200:]}")
    finally:
        reused.kill()
        reused.wait()
        squatter.shutdown()


async def test_typing_into_the_persons_own_terminal_answers_the_agents_approval(home, bus, tmp_path, monkeypatch):
    """A terminal window the person opened is not contained (it runs as the person, with the
    control credential readable): text the agent types there runs as the person. With input
    auto-approved as medium, the agent types `aai-gateway approvals approve <its id>` into it and
    its own queued call runs. Classifying typed text like `bash_execute` does not cover this:
    the window is not the agent's contained terminal."""
    import shutil

    from conftest import start_xvfb

    for tool in ("Xvfb", "openbox", "xterm", "xdotool"):
        assert shutil.which(tool), f"{tool} is missing: run scripts/test.sh"
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    display, xvfb = start_xvfb("1280x800x24")
    procs = [xvfb]
    daemon = None
    try:
        desk = {**os.environ, "DISPLAY": display}
        from conftest import start_openbox
        procs.append(start_openbox(desk))
        # The person's own terminal, with their gateway on the PATH.
        person = {**gateway_env(home, bus), "DISPLAY": display,
                  "PATH": f"{GATEWAY.parent}:{os.environ['PATH']}", "PS1": "$ "}
        xterm = subprocess.Popen(["xterm", "-title", "person's shell", "-geometry", "160x50+0+0",
                                  "-e", "bash", "--norc", "--noprofile"],
                                 env=person, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        procs.append(xterm)

        def shown():
            out = subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "person's shell"],
                                 env=desk, capture_output=True, text=True, timeout=5)
            return out.stdout.strip()

        from conftest import wait_until
        try:
            wait_until(lambda: shown() or xterm.poll() is not None, 60, "the person's xterm")
        except AssertionError:
            tree = subprocess.run(["xwininfo", "-root", "-tree"], env=desk, capture_output=True, text=True, timeout=10)
            raise AssertionError(f"the person's xterm never showed; windows:\n{tree.stdout[-3000:]}{tree.stderr}")
        assert xterm.poll() is None, f"xterm exited {xterm.returncode}: {xterm.stderr.read().decode(errors='replace')}"
        window = shown()
        subprocess.run(["xdotool", "windowactivate", "--sync", window.split()[0]], env=desk, timeout=10)
        (home / "config.json").write_text(json.dumps({
            "approval_wait_seconds": 1,
            "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development",
                "risk_policies": {"low": "auto_approve", "medium": "auto_approve"},
                "tool_overrides": {"org.aai.test:echo": "require_approval"}}}}}))
        daemon = Daemon(home, {**gateway_env(home, bus), "DISPLAY": display})
        with anyio.fail_after(TIMEOUT):
            async with daemon.client(name="typist") as c:
                pending = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "typed-in"}})
                approval = pending.structured_content["detail"]["approval_id"]
                typed = await c.call_tool("aai_exec", {"app": "local.input", "tool": "type_text", "args": {
                    "text": f"aai-gateway approvals approve {approval}\n"}})
                # Asked every time (not auto-approved as medium, whatever grants exist): this
                # client cannot answer, so nothing is typed.
                assert typed.is_error, text(typed)
                ran = None
                if not typed.is_error:
                    deadline = time.monotonic() + 20
                    while time.monotonic() < deadline:
                        ran = await c.call_tool("aai_exec", {"approval_id": approval})
                        if not ran.is_error or "pending" not in text(ran):
                            break
                        await anyio.sleep(0.2)
                assert ran is None or ran.is_error, "typed into the person's terminal, its own call ran: " + text(ran)
    finally:
        if daemon:
            daemon.close()
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
