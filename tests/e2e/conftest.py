"""Fixtures for end-to-end tests: the built gateway, a private D-Bus session bus with the
test service, and a fresh AAI_HOME per test. Every wait is bounded."""

import json
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx2
import pytest
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

ROOT = Path(__file__).resolve().parents[2]
TARGET = Path(os.environ.get("CARGO_TARGET_DIR", ROOT / "target")) / "debug"
GATEWAY = Path(os.environ.get("AAI_GATEWAY_BIN", TARGET / "aai-gateway"))
SERVICE = Path(os.environ.get("AAI_TEST_SERVICE_BIN", TARGET / "aai-test-dbus-service"))
FIXTURE = ROOT / "crates" / "test-support" / "fixtures" / "test-service.aai.json"
EXAMPLES = ROOT / "examples" / "apps"

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-BUS Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>session</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow send_destination="*" eavesdrop="true"/>
    <allow eavesdrop="true"/>
    <allow own="*"/>
  </policy>
</busconfig>
"""


class Bus:
    def __init__(self, directory: Path):
        assert shutil.which("dbus-daemon"), "dbus-daemon is missing: apt-get install -y dbus-daemon"
        config = directory / "session.conf"
        config.write_text(BUS_CONFIG.format(socket=directory / "bus"))
        self.daemon = subprocess.Popen(
            ["dbus-daemon", f"--config-file={config}", "--nofork", "--print-address=1"],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.address = _readline_within(self.daemon.stdout, 10).strip()
        assert self.address, "dbus-daemon printed no address"
        self.services = []

    def spawn_service(self, name="org.aai.Test"):
        assert SERVICE.exists(), f"{SERVICE} is missing: run `cargo build --workspace --bins` first"
        proc = subprocess.Popen(
            [str(SERVICE), name],
            env={**os.environ, "DBUS_SESSION_BUS_ADDRESS": self.address},
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        self.services.append(proc)
        assert _readline_within(proc.stdout, 10).strip() == "ready", f"test service {name} did not start"

    def close(self):
        for proc in self.services + [self.daemon]:
            proc.kill()
            proc.wait(timeout=10)


def text(result):
    """The text of a tool result: its text blocks joined."""
    return "".join(getattr(c, "text", "") or "" for c in result.content)


@pytest.fixture(scope="session")
def chromium():
    """One headless Chromium for the whole run; each test opens its own pages."""
    from cdp import Chromium

    browser = Chromium()
    yield browser
    browser.close()


def wait_until(predicate, seconds, what):
    """Polls `predicate` until it holds; fails naming `what` after `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"{what} within {seconds} s")


def start_xvfb(size, *extra):
    """Xvfb on a free display number; returns (display, process) once it accepts clients.

    Xvfb picks the number itself and writes it to `-displayfd` only when it is ready, so nothing
    here guesses from lock files (another Xvfb of a parallel build may take a number between a
    check and a start) or from the socket appearing (it appears before the server answers).
    `-noreset`: a server that resets when its last client leaves drops a client that connects
    meanwhile."""
    assert shutil.which("Xvfb"), "Xvfb is missing: apt-get install -y xvfb"
    read, write = os.pipe()
    proc = subprocess.Popen(["Xvfb", "-displayfd", str(write), "-noreset", "-screen", "0", size, "-nolisten", "tcp", *extra],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, pass_fds=(write,))
    os.close(write)
    try:
        with os.fdopen(read, "r") as stream:
            number = _readline_within(stream, 30).strip()
    except Exception:
        proc.kill()
        raise
    if not number.isdigit():
        proc.kill()
        raise AssertionError(f"Xvfb did not report a display (exit {proc.poll()})")
    return f":{number}", proc


def start_openbox(env):
    """openbox on `env["DISPLAY"]`, returned once it manages the screen. A window mapped while
    the window manager is still starting can have its map request taken over and never be
    shown: every window a test opens waits for this."""
    wm = subprocess.Popen(["openbox"], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def managing():
        assert wm.poll() is None, "openbox exited at start"
        out = subprocess.run(["xprop", "-root", "_NET_SUPPORTING_WM_CHECK"], env=env,
                             capture_output=True, text=True, timeout=10)
        return "window id #" in out.stdout

    wait_until(managing, 30, "openbox manages the screen")
    return wm


def _readline_within(stream, seconds):
    import selectors

    selector = selectors.DefaultSelector()
    selector.register(stream, selectors.EVENT_READ)
    if not selector.select(timeout=seconds):
        return ""
    return stream.readline()


@pytest.fixture
def anyio_backend():
    return "asyncio"


@pytest.fixture
def bus():
    directory = Path(tempfile.mkdtemp(prefix="aai-bus-"))
    bus = Bus(directory)
    bus.spawn_service()
    yield bus
    bus.close()
    shutil.rmtree(directory, ignore_errors=True)


def install(home: Path, app_id: str, doc: dict) -> Path:
    path = home / app_id / "aai.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc))
    tmp.rename(path)
    return path


def descriptor_doc(app_id="org.aai.test", service="org.aai.Test") -> dict:
    doc = json.loads(FIXTURE.read_text())
    doc["appId"] = app_id
    doc["platforms"]["linux"]["service"] = service
    return doc


@pytest.fixture
def home(tmp_path):
    home = tmp_path / "aai-home"
    home.mkdir()
    install(home, "org.aai.test", descriptor_doc())
    absent = descriptor_doc("org.aai.absent", "org.aai.Nobody")
    absent.update(name="Absent App", aliases=[], description="Points at a bus name nobody owns")
    install(home, "org.aai.absent", absent)
    return home


def gateway_env(home: Path, bus: Bus | None) -> dict:
    # No desktop: a call needing approval must not pop up a dialog on a developer's screen.
    env = {k: v for k, v in os.environ.items() if not k.startswith("AAI_") and k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    env["AAI_HOME"] = str(home)
    env["AAI_LOG"] = "debug"
    if bus is not None:
        env["DBUS_SESSION_BUS_ADDRESS"] = bus.address
    return env


@pytest.fixture
def desktop(bus, tmp_path):
    """Xvfb on a free display and dunst on the test bus; notifications are recorded to a file."""
    for tool in ("Xvfb", "dunst"):
        assert shutil.which(tool), f"{tool} is missing: apt-get install -y xvfb dunst x11-xserver-utils"
    display, xvfb = start_xvfb("1280x1024x24")
    record = tmp_path / "notified.jsonl"
    script = tmp_path / "record.sh"
    script.write_text(f"#!/bin/sh\nprintf '%s\\t%s\\t%s\\t%s\\n' \"$1\" \"$2\" \"$3\" \"$5\" >> {record}\n")
    script.chmod(0o755)
    config = tmp_path / "dunstrc"
    config.write_text(f"[global]\nfont = Monospace 8\n\n[record]\nsummary = \"*\"\nscript = {script}\n")
    env = {**os.environ, "DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": bus.address}
    dunst = subprocess.Popen(["dunst", "-config", str(config)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def owned():
        out = subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                              "org.freedesktop.DBus.NameHasOwner", "string:org.freedesktop.Notifications"],
                             env=env, capture_output=True, text=True, timeout=5)
        return "boolean true" in out.stdout

    try:
        wait_until(owned, 10, "dunst did not take org.freedesktop.Notifications")
        yield {"display": display, "record": record}
    finally:
        for proc in (dunst, xvfb):
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()


class Daemon:
    """`aai-gateway serve` on a free port, its log in a file the test can read (a pipe nobody
    reads would fill): `log`, by default `daemon.log` beside the home. `prefix` runs it under
    a program that execs it (prlimit)."""

    def __init__(self, home: Path, env: dict, prefix=(), log: Path | None = None):
        self.home = home
        self.env = env
        self.log = log or home.parent / "daemon.log"
        with open(self.log, "a") as out:
            self.proc = subprocess.Popen([*prefix, str(GATEWAY), "serve", "--listen", "127.0.0.1:0"], env=env,
                                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=out)
        info = home / "run" / "serve.json"

        def ours():
            # (A killed daemon's files stay until this one replaces them.)
            try:
                return json.loads(info.read_text())["pid"] == self.proc.pid
            except (OSError, ValueError, KeyError):
                return False

        wait_until(lambda: ours() or self.proc.poll() is not None, 20, "serve.json of this daemon")
        assert self.proc.poll() is None, self.log.read_text()[-3000:]
        served = json.loads(info.read_text())
        self.url = served["url"]
        self.pid = served["pid"]
        self.token = (home / "run" / "token").read_text().strip()
        self.base = self.url.removesuffix("/mcp")

    def client(self, token=None, name="http-test-client", mode="legacy", message_handler=None):
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {token or self.token}"}, timeout=30)
        return Client(streamable_http_client(self.url, http_client=http), mode=mode, cache=None,
                      client_info=Implementation(name=name, version="1.0"), message_handler=message_handler)

    def cli(self, *args):
        return subprocess.run([str(GATEWAY), *args], env=self.env, capture_output=True, text=True, timeout=30)

    def status(self):
        """What `/control/status` says (the same the `status` command prints)."""
        r = httpx2.get(f"{self.base}/control/status", headers={"Authorization": f"Bearer {self.token}"}, timeout=10)
        assert r.status_code == 200, r.text
        return r.json()

    def kill(self):
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=10)

    def close(self):
        """Stops it as a service manager would (SIGTERM, then SIGKILL after 15 s); its exit
        code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=5)
        return self.proc.returncode


def queue_daemon(home, bus, wait, rules=()):
    """A daemon whose clients must ask for every call (the approval queue waits `wait` s);
    `rules` give named clients other profiles."""
    (home / "config.json").write_text(json.dumps({
        # Commands run in a box whose /tmp is its own: they write beside AAI_HOME, in `out`.
        "local": {"sandbox": {"allowed_directories": [str(home.parent / "out")]}},
        "approval_wait_seconds": wait,
        "policy": {"default_profile": "ask", "profiles": {"ask": {"preset": "development", "risk_policies": {
            "low": "require_approval", "medium": "require_approval", "high": "require_approval"}}},
            "rules": list(rules)},
    }))
    return Daemon(home, gateway_env(home, bus))


class OAuthSite:
    """A web app with an OAuth 2.0 authorization server (code + PKCE S256) and an API, on
    plain HTTP on loopback."""

    def __init__(self):
        import base64
        import hashlib
        import urllib.parse

        self.codes = {}
        self.tokens = set()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                for k, v in headers:
                    self.send_header(k, v)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_HEAD(self):
                self.reply(200, {})

            def do_GET(self):
                base = f"http://127.0.0.1:{site.port}"
                path, _, query = self.path.partition("?")
                q = dict(urllib.parse.parse_qsl(query))
                if path == "/.well-known/aai.json":
                    self.reply(200, {
                        "schema_version": "1.0", "appId": "com.example.notes", "name": "Notes Online",
                        "platforms": {"web": {"automation": "restapi", "base_url": f"{base}/api",
                                              "auth": {"type": "oauth2", "client_id": "aai", "scopes": ["notes:read"],
                                                       "auth_url": f"{base}/authorize", "token_url": f"{base}/token"},
                                              "tools": [{"name": "me", "description": "Who am I", "endpoint": "/me", "readOnly": True}]}},
                    })
                elif path == "/authorize":
                    assert q["code_challenge_method"] == "S256"
                    code = f"code{len(site.codes)}"
                    site.codes[code] = q["code_challenge"]
                    location = q["redirect_uri"] + "?" + urllib.parse.urlencode({"code": code, "state": q["state"]})
                    self.reply(302, {}, [("location", location)])
                elif path == "/api/me":
                    if self.headers.get("authorization", "").removeprefix("Bearer ") in site.tokens:
                        self.reply(200, {"user": "ada"})
                    else:
                        self.reply(401, {"error": "unauthorized"})
                else:
                    self.reply(404, {})

            def do_POST(self):
                length = int(self.headers.get("content-length", 0))
                form = dict(urllib.parse.parse_qsl(self.rfile.read(length).decode()))
                challenge = site.codes.pop(form.get("code", ""), None)
                verifier = form.get("code_verifier", "").encode()
                computed = base64.urlsafe_b64encode(hashlib.sha256(verifier).digest()).rstrip(b"=").decode()
                if self.path != "/token" or challenge != computed:
                    self.reply(400, {"error": "invalid_grant"})
                    return
                site.tokens.add("e2e-access-token-77")
                self.reply(200, {"access_token": "e2e-access-token-77", "token_type": "Bearer", "expires_in": 3600})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
