"""Debian's Chromium, headless, driven over the DevTools protocol: just enough to open pages,
run script in them and wait for what they show. Every wait is bounded."""

import json
import shutil
import subprocess
import tempfile
import time
import urllib.request
from pathlib import Path

from websockets.sync.client import connect

from conftest import wait_until


class Chromium:
    def __init__(self):
        binary = shutil.which("chromium") or shutil.which("chromium-browser")
        assert binary, "chromium is missing: apt-get install -y chromium"
        self.profile = Path(tempfile.mkdtemp(prefix="aai-chromium-"))
        self.proc = subprocess.Popen(
            [binary, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
             "--no-proxy-server", "--disable-background-networking", "--disable-component-update",
             f"--user-data-dir={self.profile}", "--remote-debugging-port=0", "about:blank"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        active = self.profile / "DevToolsActivePort"
        wait_until(lambda: active.exists() and len(active.read_text().splitlines()) >= 2 or self.proc.poll() is not None,
                   30, "Chromium opens its DevTools port")
        assert self.proc.poll() is None, "Chromium exited at start"
        self.port = int(active.read_text().splitlines()[0])
        with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/json/version", timeout=10) as response:
            self.endpoint = Endpoint(json.loads(response.read())["webSocketDebuggerUrl"])

    def new_page(self):
        """A new tab in a browser context of its own (no cookies shared with other pages)."""
        context = self.endpoint.call("Target.createBrowserContext", disposeOnDetach=False)["browserContextId"]
        target = self.endpoint.call("Target.createTarget", url="about:blank", browserContextId=context)["targetId"]
        return Page(self, target, context)

    def close(self):
        self.endpoint.ws.close()
        self.proc.kill()
        self.proc.wait(timeout=10)
        shutil.rmtree(self.profile, ignore_errors=True)


class Endpoint:
    """One DevTools WebSocket: the browser's or a page's."""

    def __init__(self, url):
        self.ws = connect(url, max_size=None, open_timeout=10)
        self.next_id = 0

    def call(self, method, timeout=15, **params):
        self.next_id += 1
        mine = self.next_id
        self.ws.send(json.dumps({"id": mine, "method": method, "params": params}))
        deadline = time.monotonic() + timeout
        while True:
            left = deadline - time.monotonic()
            assert left > 0, f"{method} did not answer within {timeout} s"
            message = json.loads(self.ws.recv(timeout=left))
            if message.get("id") == mine:
                assert "error" not in message, (method, message["error"])
                return message["result"]


class Page(Endpoint):
    def __init__(self, browser, target, context):
        super().__init__(f"ws://127.0.0.1:{browser.port}/devtools/page/{target}")
        self.browser = browser
        self.target = target
        self.context = context

    def eval(self, expression):
        result = self.call("Runtime.evaluate", expression=expression, returnByValue=True, awaitPromise=True)
        assert "exceptionDetails" not in result, (expression, result["exceptionDetails"])
        return result["result"].get("value")

    def goto(self, url):
        self.call("Page.navigate", url=url)
        self.wait("document.readyState === 'complete' && location.href !== 'about:blank'")

    def wait(self, expression, seconds=10):
        """Waits until `expression` is truthy in the page; returns its value (`True` for an
        element, which does not cross the protocol by value)."""
        deadline = time.monotonic() + seconds
        probe = f"(() => {{ const v = ({expression}); return v instanceof Node ? true : v; }})()"
        while time.monotonic() < deadline:
            try:
                value = self.eval(probe)
            except AssertionError:
                value = None  # the page is between documents
            if value:
                return value
            time.sleep(0.02)
        raise AssertionError(f"{expression} within {seconds} s; page: {self.eval('document.body && document.body.innerText.slice(0, 2000)')}")

    def close(self):
        self.ws.close()
        self.browser.endpoint.call("Target.disposeBrowserContext", browserContextId=self.context)
