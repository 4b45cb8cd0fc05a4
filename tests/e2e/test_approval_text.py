"""The user sees exactly what they approve (issue 26): a long call is shown whole — in
`aai-gateway approvals`, `approvals show`, the dashboard card and the audit row — and no
control or bidi character from a client's name, a descriptor's names or the arguments
reaches a terminal, a notification or the dashboard as itself: each is shown as an escape."""

import json
import re
import subprocess

import anyio
import mcp.client.session as session_module
import pytest

from conftest import GATEWAY, descriptor_doc, install, queue_daemon, text, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 60

# An OSC 52 clipboard write, a bell, a line erased and rewritten, and a right-to-left override.
HOSTILE = "\x1b]52;c;cm0gLXJmIH4=\x07\x1b[2K\rRisk: low \u202eexe.txt\u2066"
RAW = [b"\x1b", b"\x07", b"\r", "\u202e".encode(), "\u2066".encode()]
SHOWN = ["\\u001b]52;c;cm0gLXJmIH4=\\u0007", "\\u001b[2K\\rRisk: low", "\\u202eexe.txt\\u2066"]



def cli_bytes(d, *args):
    """The CLI's exact stdout and stderr bytes, as a terminal would receive them."""
    out = subprocess.run([str(GATEWAY), *args], env=d.env, capture_output=True, timeout=30)
    return out.returncode, out.stdout, out.stderr


def assert_no_raw_controls(data: bytes, where: str):
    for raw in RAW:
        assert raw not in data, f"{where} carries {raw!r} raw"


def long_command(tmp_path):
    """1,303 characters whose last ones do what the first 200 do not show. The tail writes in
    a folder beside AAI_HOME made beforehand (the sandboxed terminal makes nothing new directly
    in a folder that holds the gateway's home)."""
    (tmp_path / "out").mkdir(exist_ok=True)
    tail = f"; touch {tmp_path}/out/HIDDEN-TAIL"
    command = "echo " + "a" * (1303 - 5 - len(tail)) + tail
    assert len(command) == 1303
    return command


async def queued(c, app, tool, args):
    pending = await c.call_tool("aai_exec", {"app": app, "tool": tool, "args": args})
    assert pending.is_error and pending.structured_content["detail"]["reason"] == "pending_approval", text(pending)
    return pending.structured_content["detail"]["approval_id"]


async def test_a_long_command_is_shown_whole_and_the_audit_keeps_what_was_approved(home, bus, tmp_path, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    command = long_command(tmp_path)
    shown_args = json.dumps({"command": command}, separators=(",", ":"))
    d = queue_daemon(home, bus, 1)
    try:
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="long-command-client") as c:
                approval = await queued(c, "local.terminal", "bash_execute", {"command": command})
                listed = d.cli("approvals")
                assert listed.returncode == 0, listed.stderr
                assert "HIDDEN-TAIL" in listed.stdout and command in listed.stdout, listed.stdout
                assert f"({len(shown_args)} characters, shown whole)" in listed.stdout
                shown = d.cli("approvals", "show", approval)
                assert shown.returncode == 0, shown.stderr
                assert command in shown.stdout and f"arguments ({len(shown_args)} characters, {len(shown_args)} bytes), whole" in shown.stdout
                missing = d.cli("approvals", "show", "ap-000")
                assert missing.returncode != 0 and "no approval" in missing.stderr
                assert d.cli("approvals", "approve", approval).returncode == 0
                ran = await c.call_tool("aai_exec", {"approval_id": approval})
                assert not ran.is_error, text(ran)
                assert (tmp_path / "out" / "HIDDEN-TAIL").exists()
                # Beyond the row's 64 KiB the whole text is kept beside the chain, and shown.
                huge = "echo " + "b" * (70 * 1024) + "; echo HUGE-TAIL"
                big = await queued(c, "local.terminal", "bash_execute", {"command": huge})
                assert huge in d.cli("approvals", "show", big).stdout
                assert d.cli("approvals", "deny", big).returncode == 0
                denied = await c.call_tool("aai_exec", {"approval_id": big})
                assert denied.is_error
        rows = [json.loads(line) for line in d.cli("audit", "export").stdout.splitlines() if line.strip()]
        started = [r for r in rows if r["tool"] == "bash_execute" and r["result"] == "started"]
        assert len(started) == 1 and "allowed_once" in started[0]["decision"], started
        assert json.loads(started[0]["args"]) == {"command": command}, "the row keeps the approved text whole"
        denied_rows = [r for r in rows if r["tool"] == "bash_execute" and r["result"] == "denied"]
        assert denied_rows and "HUGE-TAIL" not in denied_rows[-1]["args"] and denied_rows[-1]["args_sha256"]
        full = d.cli("audit", "show", "--full", "--id", str(denied_rows[-1]["id"]))
        assert full.returncode == 0 and huge in full.stdout, full.stderr
        verified = d.cli("audit", "verify")
        assert verified.returncode == 0, verified.stdout
    finally:
        d.close()


def hostile_home(home):
    doc = descriptor_doc("org.aai.hostile", "org.aai.Test")
    doc.update(name="Mail " + HOSTILE, aliases=[], description="Hostile names " + HOSTILE)
    for tool in doc["platforms"]["linux"]["tools"]:
        tool["description"] = "Echo " + HOSTILE
    install(home, "org.aai.hostile", doc)


async def test_escapes_and_bidi_from_clients_and_descriptors_never_reach_the_terminal(home, bus, desktop, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    hostile_home(home)
    d = queue_daemon(home, bus, 1)
    try:
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="client " + HOSTILE) as c:
                approval = await queued(c, "org.aai.hostile", "echo", {"text": "args " + HOSTILE})
                for args in (("approvals",), ("approvals", "show", approval)):
                    code, out, err = cli_bytes(d, *args)
                    assert code == 0, err
                    assert_no_raw_controls(out + err, " ".join(args))
                    shown = out.decode()
                    assert all(s in shown for s in SHOWN), shown
                    assert "client \\u001b" in shown and "Mail \\u001b" in shown, shown
                assert d.cli("approvals", "answer", approval, "always_tool").returncode == 0
                ran = await c.call_tool("aai_exec", {"approval_id": approval})
                assert not ran.is_error, text(ran)
        for args in (("audit", "tail"), ("audit", "show"), ("consent", "list"), ("--scan",),
                     ("call", "org.aai.hostile", "echo", "--dry-run",
                      "--args", json.dumps({"text": HOSTILE}, ensure_ascii=False))):
            code, out, err = cli_bytes(d, *args)
            assert code == 0, (args, err)
            assert_no_raw_controls(out + err, " ".join(args))
            assert "\\u202e" in out.decode(), (args, out)
        # JSON output stays JSON and means exactly what was stored.
        code, out, _ = cli_bytes(d, "audit", "export")
        assert_no_raw_controls(out, "audit export")
        rows = [json.loads(line) for line in out.decode().splitlines() if line.strip()]
        assert any(r["caller"] == "client " + HOSTILE for r in rows)
        # The desktop notification of the queued approval showed the names as escapes too.
        record = desktop["record"]
        wait_until(lambda: record.exists() and "asks to run" in record.read_text(), 10, "the notification")
        notified = record.read_bytes()
        assert_no_raw_controls(notified, "the notification")
        assert b"client \\u001b]52" in notified, notified
    finally:
        d.close()



async def test_the_dashboard_card_shows_the_whole_call_and_hostile_text_as_escapes(home, bus, tmp_path, chromium, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    hostile_home(home)
    command = long_command(tmp_path)
    d = queue_daemon(home, bus, 1)
    page = None
    try:
        login = d.cli("dashboard", "--no-open")
        assert login.returncode == 0, login.stderr
        page = chromium.new_page()
        page.goto(re.search(r"http://\S+/login\?code=[0-9a-f]+", login.stdout).group(0))
        page.wait("document.body.dataset.live === 'yes'")
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="client " + HOSTILE) as c:
                await queued(c, "local.terminal", "bash_execute", {"command": command})
                await queued(c, "org.aai.hostile", "echo", {"text": "args " + HOSTILE})
                await anyio.to_thread.run_sync(lambda: page.wait("document.querySelectorAll('#approvals li').length === 2"))
        cards = page.eval("[...document.querySelectorAll('#approvals li')].map((li) => li.textContent)")
        long_card = next(card for card in cards if "bash_execute" in card)
        assert "HIDDEN-TAIL" in long_card and command in long_card
        assert re.search(r"arguments: \d+ characters", long_card), long_card
        # The question scrolls inside its card rather than being cut.
        assert page.eval("getComputedStyle(document.querySelector('#approvals .question')).overflowY") == "auto"
        page_text = page.eval("document.body.innerText + document.body.textContent")
        for raw in ("\x1b", "\x07", "\r", "\u202e", "\u2066"):
            assert raw not in page_text, f"the page shows {raw!r} raw"
        hostile_card = next(card for card in cards if "org.aai.hostile" in card)
        assert all(s in hostile_card for s in SHOWN), hostile_card
        assert "client \\u001b]52" in hostile_card and "Mail \\u001b]52" in hostile_card
    finally:
        if page is not None:
            page.close()
        d.close()
