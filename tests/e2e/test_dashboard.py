"""The daemon's dashboard in Debian's Chromium (headless, over the DevTools protocol): the
one-time login, calls appearing live, the approval queue answered, a grant revoked, the
emergency stop pressed and lifted, audit history searched and verified, toolsets and client
profiles changed — and every way a page on another origin could use it, refused."""

import http.server as web_server
import json
import re
import sqlite3
import threading
import time

import anyio
import httpx2
import mcp.client.session as session_module
import pytest

from conftest import ROOT, install, queue_daemon, text, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 60
TRUSTED = {"client": "trusted", "profile": "full_auto"}



@pytest.fixture
def dashboard(home, bus, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 20, rules=[TRUSTED])
    yield d
    d.close()


def login_link(d):
    out = d.cli("dashboard", "--no-open")
    assert out.returncode == 0, out.stderr
    return re.search(r"http://\S+/login\?code=[0-9a-f]+", out.stdout).group(0)


def open_dashboard(d, browser, link=None):
    page = browser.new_page()
    page.goto(link or login_link(d))
    page.wait("document.body.dataset.live === 'yes'")
    return page



def echo(c, value):
    return c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": value}})


def click(page, selector):
    assert page.eval(f"(() => {{ const b = document.querySelector({json.dumps(selector)}); if (b) b.click(); return !!b; }})()"), selector


async def wait_in_page(page, expression, seconds=10):
    return await anyio.to_thread.run_sync(lambda: page.wait(expression, seconds))


async def echo_while(c, value, then):
    """Calls echo with `value`, runs `then()` while the call waits for approval, and returns
    the call's result."""
    outcome = {}

    async def call():
        outcome["result"] = await echo(c, value)

    async with anyio.create_task_group() as tg:
        tg.start_soon(call)
        await then()
    return outcome["result"]


async def test_log_in_once_and_watch_a_call_appear_live(dashboard, chromium):
    link = login_link(dashboard)
    page = open_dashboard(dashboard, chromium, link)
    try:
        assert page.eval("location.pathname") == "/"
        assert page.eval("document.getElementById('status').textContent") == "running"
        async with httpx2.AsyncClient(timeout=10) as http:
            used = await http.get(link)
            assert used.status_code == 401 and "aai-gateway dashboard" in used.text
            assert (await http.get(dashboard.base + "/api/state")).status_code == 401
        page.eval("""window.seen = {};
            new MutationObserver(() => {
              for (const row of document.querySelectorAll('#live tr')) {
                if (!(row.textContent in window.seen)) window.seen[row.textContent] = Date.now();
              }
            }).observe(document.getElementById('live'), {childList: true}); true""")
        hostile = "<img src=x onerror=\"document.title='owned'\"><script>document.title='owned'</script> marker-7"
        with anyio.fail_after(TIMEOUT):
            async with dashboard.client(name="trusted") as c:
                started = time.time() * 1000
                r = await echo(c, hostile)
                returned = time.time() * 1000
                assert not r.is_error, text(r)
        shown = await wait_in_page(page, """Object.entries(window.seen)
            .filter(([t]) => t.includes('marker-7') && t.includes('success')).map(([, at]) => at)[0]""")
        print(f"\ndashboard live row: {shown - started:.0f} ms after the call began, {shown - returned:.0f} ms after its result")
        live = page.eval("document.getElementById('live').textContent")
        assert "trusted" in live and "org.aai.test:echo" in live and "<img src=x" in live
        assert page.eval("document.querySelectorAll('img, #live script').length") == 0
        assert page.eval("document.title") == "aai-gateway"
    finally:
        page.close()


async def test_answer_the_queue_and_revoke_a_grant_in_the_dashboard(dashboard, chromium):
    page = open_dashboard(dashboard, chromium)
    try:
        with anyio.fail_after(TIMEOUT):
            async with dashboard.client(name="asking-client") as c:
                async def answered(value, answer):
                    async def answer_in_page():
                        button = f"#approvals li button[data-answer={answer}]"
                        await wait_in_page(page, f"document.querySelector('{button}')")
                        assert "asking-client" in page.eval("document.getElementById('approvals').textContent")
                        click(page, button)

                    result = await echo_while(c, value, answer_in_page)
                    await wait_in_page(page, "document.querySelectorAll('#approvals li').length === 0")
                    return result

                once = await answered("allowed once", "allow_once")
                assert not once.is_error and "allowed once" in text(once)
                denied = await answered("denied", "deny")
                assert denied.is_error and "declined" in text(denied)
                always = await answered("always", "always_tool")
                assert not always.is_error, text(always)
                revoke = "#grants button.revoke[data-client='asking-client'][data-tool='echo']"
                await wait_in_page(page, f"document.querySelector(\"{revoke}\")")
                granted = await echo(c, "no question asked")
                assert not granted.is_error, text(granted)
                click(page, revoke)
                await wait_in_page(page, "document.querySelectorAll('#grants tr').length === 0")
                assert dashboard.cli("consent", "list").stdout.startswith("no grants")
                asked_again = await answered("asked again", "allow_once")
                assert not asked_again.is_error
        rows = [json.loads(line) for line in dashboard.cli("audit", "export").stdout.splitlines() if line.strip()]
        ran = [r for r in rows if r["tool"] == "echo" and r["result"] == "success"]
        assert len(ran) == 4, ran  # once, always, granted, asked again: each ran exactly once
    finally:
        page.close()


async def test_the_stop_button_stops_everything_until_resumed(dashboard, chromium):
    page = open_dashboard(dashboard, chromium)
    try:
        click(page, "#stop")
        await anyio.to_thread.run_sync(lambda: wait_until(lambda: "EMERGENCY STOP" in dashboard.cli("status").stdout, 5, "the stop"))
        await wait_in_page(page, "document.body.classList.contains('stopped')")
        await wait_in_page(page, "document.getElementById('live').textContent.includes('emergency_stop')")
        with anyio.fail_after(TIMEOUT):
            async with dashboard.client(name="trusted") as c:
                refused = await echo(c, "while stopped")
                assert refused.is_error and "emergency stop" in text(refused)
                click(page, "#resume")
                await wait_in_page(page, "!document.body.classList.contains('stopped')")
                assert "EMERGENCY STOP" not in dashboard.cli("status").stdout
                assert not (await echo(c, "after resume")).is_error
    finally:
        page.close()


async def test_search_the_audit_history_and_verify_it(dashboard, chromium, home):
    with anyio.fail_after(TIMEOUT):
        async with dashboard.client(name="trusted") as c:
            for value in ("alpha", "beta", "needle-42"):
                assert not (await echo(c, value)).is_error
    page = open_dashboard(dashboard, chromium)
    try:
        page.eval("document.getElementById('query').value = 'needle-42'; true")
        click(page, "#search")
        await wait_in_page(page, "document.querySelectorAll('#history tr').length === 2")  # started + success
        history = page.eval("document.getElementById('history').textContent")
        assert "needle-42" in history and "alpha" not in history
        click(page, "#verify")
        verified = await wait_in_page(page, "document.getElementById('verified').textContent.startsWith('intact') && document.getElementById('verified').textContent")
        assert re.fullmatch(r"intact: \d+ rows", verified), verified
        db = sqlite3.connect(home / "data.db")
        db.execute("UPDATE audit_log SET args = '{\"text\":\"rewritten\"}' WHERE id = 2")
        db.commit()
        db.close()
        click(page, "#verify")
        broken = await wait_in_page(page, "document.getElementById('verified').textContent.startsWith('BROKEN') && document.getElementById('verified').textContent")
        assert "row 2" in broken, broken
    finally:
        page.close()


async def test_toolsets_and_client_profiles_change_from_the_dashboard(dashboard, chromium, home):
    with anyio.fail_after(TIMEOUT):
        async with dashboard.client(name="asking-client") as c:
            page = open_dashboard(dashboard, chromium)
            try:
                assert "app_local_terminal" in {t.name for t in (await c.list_tools()).tools}
                click(page, "#toolsets input[data-app='local.terminal']")
                await anyio.to_thread.run_sync(lambda: wait_until(
                    lambda: json.loads((home / "config.json").read_text()).get("local", {}).get("terminal") is False, 5, "config.json"))
                while "app_local_terminal" in {t.name for t in (await c.list_tools()).tools}:
                    await anyio.sleep(0.05)
                assert json.loads((home / "config.json").read_text())["approval_wait_seconds"] == 20, "other settings kept"
            finally:
                page.close()
    # A client the dashboard knows from the audit log gets a profile.
    with anyio.fail_after(TIMEOUT):
        async with dashboard.client(name="trusted") as c:
            assert not (await echo(c, "known")).is_error
    page = open_dashboard(dashboard, chromium)
    try:
        select = "#clients select[data-client='trusted']"
        assert page.wait(f"document.querySelector(\"{select}\").value") == "full_auto"
        page.eval(f"""(() => {{ const s = document.querySelector("{select}"); s.value = 'observe';
            s.dispatchEvent(new Event('change')); return true; }})()""")
        await anyio.to_thread.run_sync(lambda: wait_until(
            lambda: json.loads((home / "config.json").read_text())["policy"]["rules"][0] == {"client": "trusted", "profile": "observe"},
            5, "the profile in config.json"))
        with anyio.fail_after(TIMEOUT):
            async with dashboard.client(name="trusted") as c:
                async def deny():
                    await wait_in_page(page, "document.querySelector('#approvals li button[data-answer=deny]')")
                    click(page, "#approvals li button[data-answer=deny]")

                assert (await echo_while(c, "now asks", deny)).is_error
    finally:
        page.close()


class _EvilPage(web_server.BaseHTTPRequestHandler):
    dashboard = ""

    def do_GET(self):
        body = f"""<!doctype html><title>evil</title><body><script>
        const target = {json.dumps(self.dashboard)};
        window.results = {{}};
        fetch(target + '/api/state', {{credentials: 'include'}})
          .then(r => r.text()).then(t => {{ window.results.read = t; }}, e => {{ window.results.read = 'refused'; }});
        fetch(target + '/api/stop', {{method: 'POST', mode: 'no-cors', credentials: 'include',
          headers: {{'Content-Type': 'text/plain'}}, body: '{{}}'}})
          .then(() => {{ window.results.stop = 'sent'; }}, () => {{ window.results.stop = 'failed'; }});
        const form = document.createElement('form');
        form.method = 'POST'; form.action = target + '/api/resume'; form.target = 'sink';
        const sink = document.createElement('iframe'); sink.name = 'sink';
        document.body.append(sink, form); form.submit();
        const framed = document.createElement('iframe'); framed.id = 'framed'; framed.src = target + '/';
        document.body.append(framed);
        </script></body>""".encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args):
        pass


async def test_a_page_on_another_origin_cannot_use_the_dashboard(dashboard, chromium):
    page = open_dashboard(dashboard, chromium)
    _EvilPage.dashboard = dashboard.base
    evil = web_server.ThreadingHTTPServer(("127.0.0.1", 0), _EvilPage)
    threading.Thread(target=evil.serve_forever, daemon=True).start()
    try:
        # The same browser (same cookie jar, logged in) visits another site on this machine.
        for host in ("127.0.0.1", "localhost"):
            page.goto(f"http://{host}:{evil.server_address[1]}/")
            results = page.wait("window.results.read && window.results.stop && window.results")
            assert results["read"] == "refused", results
            assert "EMERGENCY STOP" not in dashboard.cli("status").stdout
            framed = page.eval("(() => { try { return document.getElementById('framed').contentDocument?.body?.innerText ?? 'opaque'; } catch (e) { return 'opaque'; } })()")
            assert "aai-gateway" not in framed
        # The same requests with the session cookie but without the page's Origin and token.
        page.goto(dashboard.base + "/")
        cookie = next(c for c in page.call("Network.getCookies", urls=[dashboard.base + "/"])["cookies"] if c["name"] == "aai_dashboard")
        assert cookie["httpOnly"] and cookie["sameSite"] == "Strict"
        jar = {"Cookie": f"aai_dashboard={cookie['value']}"}
        # The page holds the session's key in its own origin's sessionStorage; the cookie alone
        # (which every port of 127.0.0.1 receives) reads nothing.
        csrf = page.eval("sessionStorage.getItem('aai-dashboard-key')")
        assert csrf and len(csrf) == 64, csrf
        assert "#" not in page.eval("location.href"), "the key left the address bar"
        async with httpx2.AsyncClient(timeout=10) as http:
            state = await http.get(dashboard.base + "/api/state", headers=jar)
            assert state.status_code == 403, state.text
            state = await http.get(dashboard.base + "/api/state", headers={**jar, "X-AAI-CSRF": csrf})
            assert state.status_code == 200 and "csrf" not in state.json()
            for headers, status in [
                ({**jar}, 403),
                ({**jar, "Origin": dashboard.base}, 403),
                ({**jar, "Origin": "http://localhost:1", "X-AAI-CSRF": csrf}, 403),
                ({**jar, "Origin": dashboard.base, "X-AAI-CSRF": "0" * 64}, 403),
                ({"Origin": dashboard.base, "X-AAI-CSRF": csrf}, 401),
            ]:
                r = await http.post(dashboard.base + "/api/stop", headers=headers, json={})
                assert r.status_code == status, (headers, r.status_code, r.text)
            assert "EMERGENCY STOP" not in dashboard.cli("status").stdout
            r = await http.get(dashboard.base + "/api/state", headers={**jar, "X-AAI-CSRF": csrf, "Origin": "http://evil.example"})
            assert r.status_code == 403
            r = await http.get(dashboard.base + "/api/state", headers={**jar, "Host": "evil.example"})
            assert r.status_code == 403
            index = await http.get(dashboard.base + "/", headers=jar)
            csp = index.headers["content-security-policy"]
            assert "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
            assert "unsafe" not in csp
            assert index.headers["x-frame-options"] == "DENY"
            assert "<script>" not in index.text and "http" not in index.text.replace("http-equiv", "")
            ok = await http.post(dashboard.base + "/api/stop", headers={**jar, "Origin": dashboard.base, "X-AAI-CSRF": csrf}, json={})
            assert ok.status_code == 200 and ok.json()["stopped"] is True
    finally:
        evil.shutdown()
        page.close()


async def test_a_queued_approval_notifies_without_a_login_link(home, bus, desktop, chromium, monkeypatch):
    """The notification is readable by the agent's own notification and screen tools: it says
    where to answer, and carries no link or code that would let the agent answer itself."""
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 20)
    try:
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="notified-client") as c:
                async def answer_in_the_dashboard():
                    record = desktop["record"]
                    await anyio.to_thread.run_sync(lambda: wait_until(
                        lambda: record.exists() and "notified-client" in record.read_text(), 10, "the notification"))
                    note = record.read_text()
                    assert "aai-gateway dashboard" in note, note
                    assert "http" not in note and "code=" not in note and "/login" not in note, note
                    page = open_dashboard(d, chromium)
                    try:
                        await wait_in_page(page, "document.querySelector('#approvals li button[data-answer=allow_once]')")
                        click(page, "#approvals li button[data-answer=allow_once]")
                    finally:
                        page.close()

                result = await echo_while(c, "from the notification", answer_in_the_dashboard)
                assert not result.is_error, text(result)
    finally:
        d.close()


async def test_scheduled_tasks_are_shown_run_and_turned_off_in_the_dashboard(dashboard, chromium, home):
    (home / "workflows").mkdir()
    (home / "workflows" / "greet.json").write_text(json.dumps({"description": "greet", "steps": [
        {"app": "org.aai.test", "tool": "echo", "args": {"text": {"$run": "/task"}}}]}))
    page = open_dashboard(dashboard, chromium)
    try:
        assert page.eval("document.getElementById('no-schedules').hidden") is False
        out = dashboard.cli("schedule", "add", "morning", "--cron", "0 7 * * *", "--time-zone", "Asia/Tokyo",
                            "--workflow", "greet", "--grant", "org.aai.test:echo")
        assert out.returncode == 0, out.stderr
        # The daemon sees the CLI's change in data.db and tells the page.
        await wait_in_page(page, "!!document.querySelector('#schedules tr[data-task=\"morning\"]')")
        row = page.eval("document.querySelector('#schedules tr[data-task=\"morning\"]').textContent")
        assert "0 7 * * * (Asia/Tokyo)" in row and "org.aai.test:echo" in row and "+09:00" in row, row
        click(page, "#schedules tr[data-task='morning'] button.run-now")
        await wait_in_page(page, "[...document.querySelectorAll('#runs tr.run-succeeded')].some(r => r.textContent.includes('morning'))", 20)
        click(page, "#schedules tr[data-task='morning'] input[type=checkbox]")
        wait_until(lambda: json.loads(dashboard.cli("schedule", "list", "--json").stdout)["tasks"][0]["enabled"] is False, 10,
                   "the task is off")
        rows = [json.loads(line) for line in dashboard.cli("audit", "export").stdout.splitlines()]
        assert any(r["caller"] == "schedule:morning" and r["tool"] == "echo" and r["result"] == "success" for r in rows)
        assert any(r["caller"] == "dashboard" and r["tool"] == "schedule_disable" for r in rows)
    finally:
        page.close()


async def test_the_dashboard_says_only_what_it_knows_one_row_per_call_at_two_widths(dashboard, chromium, tmp_path):
    """Before its data arrives the page says it is loading (no "Nothing is waiting" or an empty
    default profile); a call is one live row, updated in place; at 1400 and 800 px wide nothing
    overflows sideways and times stay on one line (screenshots kept in the test's folder)."""
    from html.parser import HTMLParser

    link = login_link(dashboard)
    async with httpx2.AsyncClient(timeout=10, follow_redirects=True) as http:
        served = (await http.get(link)).text

    class Shown(HTMLParser):
        """The texts of the page as served, each with whether it is hidden."""

        def __init__(self):
            super().__init__()
            self.stack, self.texts = [], []

        def handle_starttag(self, tag, attrs):
            if tag not in ("meta", "link", "input", "br"):
                self.stack.append("hidden" in dict(attrs))

        def handle_endtag(self, tag):
            if tag not in ("meta", "link", "input", "br") and self.stack:
                self.stack.pop()

        def handle_data(self, data):
            if data.strip():
                self.texts.append((data.strip(), any(self.stack)))

    shown = Shown()
    shown.feed(served)
    before = [t for t, hidden in shown.texts if not hidden]
    assert "Loading…" in before, before
    for claim in ("Nothing is waiting.", "No client holds a grant.", "clients without one get"):
        assert not any(claim in t for t in before), (claim, before)

    page = open_dashboard(dashboard, chromium, link=None)
    try:
        assert page.eval("document.body.classList.contains('loading')") is False
        assert page.eval("[...document.querySelectorAll('.loading-note')].every(n => !n.offsetParent)")
        with anyio.fail_after(TIMEOUT):
            async with dashboard.client(name="trusted") as c:
                r = await echo(c, "one-row-per-call")
                assert not r.is_error, text(r)
        await wait_in_page(page, "[...document.querySelectorAll('#live tr')].some(r => r.textContent.includes('one-row-per-call') && r.textContent.includes('success'))")
        rows = page.eval("[...document.querySelectorAll('#live tr')].filter(r => r.textContent.includes('one-row-per-call')).length")
        assert rows == 1, page.eval("document.getElementById('live').innerText")
        for width in (1400, 800):
            page.call("Emulation.setDeviceMetricsOverride", width=width, height=1000, deviceScaleFactor=1, mobile=False)
            page.wait(f"window.innerWidth === {width}")
            shot = page.call("Page.captureScreenshot", format="png")["data"]
            import base64
            (tmp_path / f"dashboard-{width}.png").write_bytes(base64.b64decode(shot))
            overflow = page.eval("document.documentElement.scrollWidth - window.innerWidth")
            assert overflow <= 0, f"{overflow} px wider than the window at {width} px"
            wrapped = page.eval("""[...document.querySelectorAll('td.time')].filter(td => {
                const r = document.createRange(); r.selectNodeContents(td); return r.getClientRects().length > 1;
            }).map(td => td.textContent)""")
            assert wrapped == [], f"times wrap at {width} px: {wrapped}"
    finally:
        page.close()


def test_the_dashboard_command_prints_the_link_when_no_browser_opens(dashboard, tmp_path):
    """Without a desktop session, or when the opener fails, `aai-gateway dashboard` prints the
    one-time link instead of saying it opened a browser."""
    import os
    import subprocess

    from conftest import GATEWAY

    env = {k: v for k, v in dashboard.env.items() if k not in ("DISPLAY", "WAYLAND_DISPLAY")}
    out = subprocess.run([str(GATEWAY), "dashboard"], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "opened" not in out.stdout and "/login?code=" in out.stdout, out.stdout
    failing = tmp_path / "bin"
    failing.mkdir()
    (failing / "xdg-open").write_text("#!/bin/sh\nexit 3\n")
    (failing / "xdg-open").chmod(0o755)
    env = {**env, "DISPLAY": ":0", "PATH": f"{failing}:{os.environ['PATH']}"}
    out = subprocess.run([str(GATEWAY), "dashboard"], env=env, capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    assert "opened" not in out.stdout and "/login?code=" in out.stdout, out.stdout


async def test_mcp_servers_in_use_are_shown_with_their_state(dashboard, chromium, home):
    memory = ROOT / "target" / "mcp-servers" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
    if not memory.is_file():
        pytest.skip("scripts/test.sh installs the MCP servers")
    install(home, "io.github.memory", {
        "schema_version": "1.0", "appId": "io.github.memory", "name": "Memory", "description": "A knowledge graph.",
        "platforms": {"mcp": {"automation": "stdio", "command": "node", "args": [str(memory)],
                              "env": {"MEMORY_FILE_PATH": str(home.parent / "memory.jsonl")}}}})
    with anyio.fail_after(TIMEOUT):
        async with dashboard.client(name="trusted") as c:
            page = open_dashboard(dashboard, chromium)
            try:
                assert page.eval("document.getElementById('servers-table').hidden")
                while True:
                    graph = await c.call_tool("aai_exec", {"app": "io.github.memory", "tool": "read_graph", "args": {}})
                    if not graph.is_error or "APP_NOT_FOUND" not in text(graph):
                        break
                    await anyio.sleep(0.1)  # discovery has not seen the new file yet
                assert not graph.is_error, text(graph)
                row = "document.querySelector(\"#servers tr[data-app='io.github.memory']\")"
                await wait_in_page(page, f"{row} && {row}.textContent.includes('running')")
                shown = page.eval(f"{row}.textContent")
                assert "server-memory" in shown and "as pinned" in shown, shown
            finally:
                page.close()
