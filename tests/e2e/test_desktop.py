"""Desktop control through the official MCP SDK, as an agent does it: on one Xvfb with a real
window manager (openbox), the AT-SPI accessibility bus and a small GTK app (a label, a text field,
an OK button), the agent looks (screenshot), finds the button (element_locate through AT-SPI),
clicks it, and reads the changed label (OCR through Tesseract); types Unicode into the field and
the test reads it back through AT-SPI."""

import base64
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import anyio
import mcp.client.session as session_module
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import GATEWAY, Bus, gateway_env, start_openbox, start_xvfb, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 60
HERE = Path(__file__).resolve().parent.parent / "desktop"
SYSTEM_PYTHON = "/usr/bin/python3"


@pytest.fixture(scope="module")
def screen():
    """One desktop for the module: Xvfb, openbox, a session bus with the AT-SPI bus, the GTK app."""
    for tool in ("Xvfb", "openbox", "tesseract", SYSTEM_PYTHON, "/usr/libexec/at-spi-bus-launcher"):
        assert shutil.which(tool) or Path(tool).exists(), f"{tool} is missing: run scripts/test.sh"
    procs = []
    directory = Path(tempfile.mkdtemp(prefix="aai-desk-"))
    bus = Bus(directory)
    try:
        display, xvfb = start_xvfb("1280x800x24", "-noreset")
        procs.append(xvfb)
        env = {**os.environ, "DISPLAY": display, "DBUS_SESSION_BUS_ADDRESS": bus.address}
        env.pop("NO_AT_BRIDGE", None)
        procs.append(start_openbox(env))
        procs.append(subprocess.Popen(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"], env=env,
                                      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

        def a11y_bus_up():
            out = subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus", "/org/freedesktop/DBus",
                                  "org.freedesktop.DBus.NameHasOwner", "string:org.a11y.Bus"],
                                 env=env, capture_output=True, text=True, timeout=5)
            return "boolean true" in out.stdout

        wait_until(a11y_bus_up, 10, "the AT-SPI bus did not start")
        app = subprocess.Popen([SYSTEM_PYTHON, str(HERE / "gtk_app.py"), "AAI Test App"], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
        procs.append(app)
        assert app.stdout.readline().strip() == "ready", "the GTK test app did not start"
        yield {"display": display, "bus": bus, "env": env}
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        bus.close()
        shutil.rmtree(directory, ignore_errors=True)


def desktop_client(home, screen, monkeypatch):
    (home / "config.json").write_text(json.dumps({
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "full_auto"}}},
    }))
    env = gateway_env(home, screen["bus"])
    env["DISPLAY"] = screen["display"]
    # Terminals it launches start a shell without the machine's start-up files (which may be
    # slow, or leave locks behind when a test closes the terminal early).
    env["SHELL"] = "/bin/sh"
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    return Client(StdioServerParameters(command=str(GATEWAY), args=[], env=env), mode="legacy", cache=None)


def text_of(result):
    return "".join(b.text for b in result.content if getattr(b, "type", "") == "text")


async def call(client, app, tool, args):
    result = await client.call_tool("aai_exec", {"app": app, "tool": tool, "args": args})
    assert not result.is_error, text_of(result)
    return result


async def ocr_text(client):
    result = await call(client, "local.screen", "screen_ocr", {"region": {"x": 0, "y": 0, "width": 700, "height": 450}})
    return result.structured_content["text"]


async def test_the_agent_loop_sees_finds_clicks_and_reads(home, screen, monkeypatch):
    with anyio.fail_after(TIMEOUT):
        async with desktop_client(home, screen, monkeypatch) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert {"app_local_screen", "app_local_input", "app_local_apps"} <= set(names)

            # Look: an image plus where it sits in the one coordinate space.
            shot = await call(client, "local.screen", "screenshot", {"format": "png"})
            images = [b for b in shot.content if getattr(b, "type", "") == "image"]
            assert len(images) == 1 and images[0].mime_type == "image/png"
            png = base64.b64decode(images[0].data)
            assert png.startswith(b"\x89PNG")
            meta = shot.structured_content
            assert (meta["width"], meta["height"], meta["scale"]) == (1280, 800, 1.0)
            assert meta["origin"] == {"x": 0, "y": 0} and meta["timestamp"] > 0

            assert "Status: waiting" in await ocr_text(client)

            # Find the button through the accessibility tree, click its center.
            found = (await call(client, "local.screen", "element_locate", {"description": "OK button"})).structured_content
            assert found["found"], found
            button = found["elements"][0]
            assert button["source"] == "a11y" and button["role"] == "push button" and button["description"] == "OK"
            clicked = (await call(client, "local.input", "left_click", button["center"])).structured_content
            assert clicked["position"] == button["center"]

            # A settled screenshot, then OCR reads what the click changed.
            settled = (await call(client, "local.screen", "screenshot", {"settle_ms": 2000})).structured_content
            assert settled["settled"] is True, settled
            assert "Status: clicked" in await ocr_text(client)

            # OCR is the fallback when the tree has no match: text on screen is found too.
            by_text = (await call(client, "local.screen", "element_locate", {"description": "Status: clicked"})).structured_content
            assert by_text["found"] and by_text["elements"][0]["source"] in ("a11y", "ocr"), by_text
            # Asked for by role, text on screen is never the answer: OCR cannot tell a label
            # from a button, so a button named like the label is not found.
            as_button = (await call(client, "local.screen", "element_locate",
                                    {"description": "Status: clicked", "role": "button"})).structured_content
            assert not as_button["found"] and as_button["elements"] == [], as_button
            assert any("OCR cannot tell roles" in n for n in as_button.get("notes", [])), as_button
            found_button = (await call(client, "local.screen", "element_locate",
                                       {"description": "OK", "role": "button"})).structured_content
            assert all(e["source"] == "a11y" and e["role"] == "push button" for e in found_button["elements"]), found_button


async def test_unicode_text_arrives_exactly_and_is_read_back_through_atspi(home, screen, monkeypatch):
    typed = "Grüße, café — 世界 😀 ok"
    with anyio.fail_after(TIMEOUT):
        async with desktop_client(home, screen, monkeypatch) as client:
            found = (await call(client, "local.screen", "element_locate", {"description": "Input field", "role": "text"})).structured_content
            assert found["found"], found
            await call(client, "local.input", "left_click", found["elements"][0]["center"])
            await call(client, "local.input", "key_press", {"keys": ["ctrl", "a"]})
            await call(client, "local.input", "key_press", {"keys": ["backspace"]})
            result = (await call(client, "local.input", "type_text", {"text": typed})).structured_content
            assert result["typed"] == len(typed)
    out = subprocess.run([SYSTEM_PYTHON, str(HERE / "atspi_text.py"), "AAI Test App", "Input field"],
                         env=screen["env"], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip("\n") == typed


async def test_hotkeys_need_a_reason_that_the_audit_log_keeps_and_screenshots_are_not_stored(home, screen, monkeypatch):
    with anyio.fail_after(TIMEOUT):
        async with desktop_client(home, screen, monkeypatch) as client:
            missing = await client.call_tool("aai_exec", {"app": "local.input", "tool": "hotkey", "args": {"keys": ["alt", "tab"]}})
            assert missing.is_error and "reason" in text_of(missing)
            await call(client, "local.input", "hotkey", {"keys": ["alt", "tab"], "reason": "bring the editor forward"})
            await call(client, "local.input", "key_press", {"keys": ["alt", "tab"]})
            shot = await call(client, "local.screen", "screenshot", {})
            image = next(b for b in shot.content if getattr(b, "type", "") == "image")
            size = len(base64.b64decode(image.data))
    env = gateway_env(home, None)
    rows = subprocess.run([str(GATEWAY), "audit", "export"], env=env, capture_output=True, text=True, timeout=20)
    assert rows.returncode == 0, rows.stderr
    entries = [json.loads(line) for line in rows.stdout.splitlines()]
    hotkey = [e for e in entries if e["tool"] == "hotkey" and e["result"] == "success"]
    assert hotkey and "bring the editor forward" in hotkey[0]["args"] and hotkey[0]["risk"] == "high"
    shots = [e for e in entries if e["tool"] == "screenshot" and e["result"] == "success"]
    assert shots and shots[-1]["output"].startswith(f"image/jpeg {size} bytes sha256:")
    # No pixels anywhere in the log: every row is small.
    assert max(len(line) for line in rows.stdout.splitlines()) < 2000
    assert image.data[:200] not in rows.stdout


async def test_a_high_risk_hotkey_asks_and_shows_the_reason(home, screen, monkeypatch):
    from mcp import types
    (home / "config.json").write_text(json.dumps({
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development"}}},
    }))
    env = gateway_env(home, screen["bus"])
    env["DISPLAY"] = screen["display"]
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    asked = []

    async def user(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    with anyio.fail_after(TIMEOUT):
        async with Client(StdioServerParameters(command=str(GATEWAY), args=[], env=env), mode="legacy",
                          elicitation_callback=user, cache=None) as client:
            denied = await client.call_tool("aai_exec", {"app": "local.input", "tool": "hotkey",
                                                          "args": {"keys": ["super"], "reason": "open the launcher"}})
    assert denied.is_error and denied.structured_content["type"] == "PERMISSION_DENIED"
    assert len(asked) == 1 and "open the launcher" in asked[0] and "hotkey" in asked[0], asked


def test_doctor_names_the_backend_of_each_tool_or_why_none(home, screen):
    env = gateway_env(home, screen["bus"])
    env["DISPLAY"] = screen["display"]
    out = subprocess.run([str(GATEWAY), "doctor", "--json"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    tools = {t["tool"]: t for app in json.loads(out.stdout) for t in app["tools"]}
    assert tools["screenshot"]["backend"].startswith(f"X11 {screen['display']}")
    assert "AT-SPI" in tools["element_locate"]["backend"] and "Tesseract" in tools["element_locate"]["backend"]
    assert "eng" in tools["screen_ocr"]["backend"]
    assert "EWMH" in tools["window_manage"]["backend"] and "XTEST" in tools["left_click"]["backend"]
    assert tools["bash_execute"]["backend"] == "built in"

    # Without a display every desktop tool says what is missing; a Wayland session names the portals.
    bare = gateway_env(home, None)
    out = subprocess.run([str(GATEWAY), "doctor"], env=bare, capture_output=True, text=True, timeout=60)
    assert "screenshot" in out.stdout and "no graphical session" in out.stdout
    wayland = {**bare, "WAYLAND_DISPLAY": "wayland-0"}
    wayland["DBUS_SESSION_BUS_ADDRESS"] = screen["bus"].address  # a session bus with no portal on it
    out = subprocess.run([str(GATEWAY), "call", "local.screen", "screenshot"], env=wayland, capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "AUTOMATION_NOT_SUPPORTED" in out.stderr and "xdg-desktop-portal" in out.stderr, out.stderr
    (home / "config.json").write_text(json.dumps({"policy": {"default_profile": "p", "profiles": {"p": {"preset": "full_auto"}}}}))
    out = subprocess.run([str(GATEWAY), "call", "local.input", "left_click", "--args", '{"x": 1, "y": 1}'], env=wayland,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 1
    assert "AUTOMATION_NOT_SUPPORTED" in out.stderr and "RemoteDesktop" in out.stderr, out.stderr


async def test_the_same_app_through_its_own_interface(home, screen, monkeypatch):
    """The task the computer-use loop does above, through the app's aai.json D-Bus tools."""
    folder = home / "org.aai.testapp"
    folder.mkdir()
    (folder / "aai.json").write_text((HERE / "org.aai.testapp.aai.json").read_text())
    with anyio.fail_after(TIMEOUT):
        async with desktop_client(home, screen, monkeypatch) as client:
            await call(client, "org.aai.testapp", "press", {})
            status = await call(client, "org.aai.testapp", "status", {})
            assert text_of(status) == "Status: clicked"


async def test_apps_start_from_their_desktop_entry_as_argv(home, screen, monkeypatch, tmp_path):
    data = tmp_path / "xdg"
    (data / "applications").mkdir(parents=True)
    marker = tmp_path / "never"
    # Exec with a field code and shell text: the gateway splits it per the desktop entry spec
    # and runs argv; nothing reaches a shell, so the marker is never created.
    (data / "applications" / "entry-term.desktop").write_text(
        "[Desktop Entry]\nType=Application\nName=Entry Term\n"
        f"Exec=xterm -title \"Entry Term; touch {marker}\" %U\n")
    monkeypatch.setenv("XDG_DATA_HOME", str(data))
    with anyio.fail_after(TIMEOUT):
        async with desktop_client(home, screen, monkeypatch) as client:
            launched = (await call(client, "local.apps", "app_launch", {"name": "Entry Term"})).structured_content
            assert launched["argv"] == ["xterm", "-title", f"Entry Term; touch {marker}"], launched
            assert launched["window"]["title"] == f"Entry Term; touch {marker}"
            listed = (await call(client, "local.apps", "app_list", {"include_windows": True})).structured_content
            assert any(w["title"].startswith("Entry Term") for a in listed["apps"] for w in a.get("windows", []))
            closed = (await call(client, "local.apps", "app_close", {"name": "Entry Term"})).structured_content
            assert closed["closed"] is True, closed
    assert not marker.exists()


async def test_a_protected_app_is_never_read_seen_or_driven(home, screen, monkeypatch):
    with anyio.fail_after(TIMEOUT):
        async with desktop_client(home, screen, monkeypatch) as client:
            assert "Status" in await ocr_text(client), "readable while not protected"
    config = json.loads((home / "config.json").read_text())
    config["desktop"] = {"protected_apps": ["AAI Test App"]}
    (home / "config.json").write_text(json.dumps(config))
    env = gateway_env(home, screen["bus"])
    env["DISPLAY"] = screen["display"]
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    with anyio.fail_after(TIMEOUT):
        async with Client(StdioServerParameters(command=str(GATEWAY), args=[], env=env), mode="legacy", cache=None) as client:
            assert "Status" not in await ocr_text(client), "OCR reads nothing of a protected window"
            found = (await client.call_tool("aai_exec", {"app": "local.screen", "tool": "element_locate",
                                                          "args": {"description": "OK button"}})).structured_content
            assert not any(e["source"] == "a11y" for e in found["elements"]), found
            refused = await client.call_tool("aai_exec", {"app": "local.input", "tool": "left_click", "args": {"x": 100, "y": 100}})
            assert refused.is_error and refused.structured_content["detail"]["reason"] == "protected_app", text_of(refused)


async def test_batch_desktop_steps_take_turns_while_other_steps_run(home, screen, monkeypatch):
    """In a parallel batch, two smooth mouse moves take the desktop lock in turn, while a
    terminal step runs beside them: the audit log's order shows both."""
    def move(x):
        return {"app": "local.input", "tool": "mouse_move", "args": {"x": x, "y": 120, "smooth": True, "duration_ms": 400}}

    with anyio.fail_after(TIMEOUT):
        async with desktop_client(home, screen, monkeypatch) as client:
            result = await client.call_tool("aai_batch", {"parallel": True, "steps": [
                move(100), move(400), {"app": "local.terminal", "tool": "bash_execute", "args": {"command": "echo beside"}}]})
            assert [s["status"] for s in result.structured_content["steps"]] == ["ok", "ok", "ok"], result.structured_content
    exported = subprocess.run([str(GATEWAY), "audit", "export"], env=gateway_env(home, None), capture_output=True, text=True, timeout=30)
    rows = sorted((json.loads(line) for line in exported.stdout.splitlines()), key=lambda r: r["id"])
    moves = [r["result"] for r in rows if r["tool"] == "mouse_move"]
    assert moves == ["started", "success", "started", "success"], moves
    first_move_done = next(r["id"] for r in rows if r["tool"] == "mouse_move" and r["result"] == "success")
    terminal_started = next(r["id"] for r in rows if r["tool"] == "bash_execute" and r["result"] == "started")
    assert terminal_started < first_move_done, "the terminal step ran while the mouse moved"


def default_client(home, screen, monkeypatch):
    """A client under the default policy profile (development: high asks, critical is blocked)."""
    env = gateway_env(home, screen["bus"])
    env["DISPLAY"] = screen["display"]
    # Terminals it launches start a shell without the machine's start-up files (which may be
    # slow, or leave locks behind when a test closes the terminal early).
    env["SHELL"] = "/bin/sh"
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    return Client(StdioServerParameters(command=str(GATEWAY), args=[], env=env), mode="legacy", cache=None)


@pytest.mark.parametrize("terminal", ["xterm", "st"])
async def test_typing_into_a_terminal_is_judged_as_the_shell_command(home, screen, monkeypatch, tmp_path, terminal):
    """The walk-around of issue 26, by effect: `app_launch` of a terminal, then `type_text` of a
    critical command, is blocked (the canary survives): what is typed there runs in the launched
    terminal's desktop box, outside the terminal's, so it is judged as bash_execute outside the
    box — critical blocked, any other command asked (this client cannot answer: not run) — while
    `bash_execute` of the same runs in the terminal's box unasked and cannot reach the canary;
    the terminal grant that lets bash_execute run lets the typed command run."""
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep").write_text("x")
    # The launched terminal runs contained: it writes beside AAI_HOME in a folder made first.
    (tmp_path / "out").mkdir()
    marker = tmp_path / "out" / "typed-marker"
    # Its /tmp is its own: `out` is an allowed folder, bound back into its view.
    config = home / "config.json"
    settings = json.loads(config.read_text()) if config.exists() else {}
    settings.setdefault("local", {}).setdefault("sandbox", {})["allowed_directories"] = [str(tmp_path / "out")]
    config.write_text(json.dumps(settings))
    # A desktop of its own: a window another test left to map late would take the focus
    # mid-text, and the input tool (rightly) stops typing then.
    display, xvfb = start_xvfb("1280x800x24")
    wm = start_openbox({**os.environ, "DISPLAY": display})
    try:
        await _type_into_a_terminal(home, {**screen, "display": display}, monkeypatch, terminal, canary, marker)
    finally:
        wm.terminate()
        xvfb.terminate()
        wm.wait(timeout=10)
        xvfb.wait(timeout=10)
    assert (canary / "keep").exists(), "the canary was deleted through the terminal"


async def _type_into_a_terminal(home, screen, monkeypatch, terminal, canary, marker):
    with anyio.fail_after(TIMEOUT):
        async with default_client(home, screen, monkeypatch) as client:
            launched = (await call(client, "local.apps", "app_launch", {"name": terminal})).structured_content
            await call(client, "local.apps", "window_manage", {"window_title": launched["window"]["title"], "action": "focus"})
            for text in (f"rm -rf {canary}\n", f"rm -rf {canary}"):
                typed = await client.call_tool("aai_exec", {"app": "local.input", "tool": "type_text", "args": {"text": text}})
                assert typed.is_error, text_of(typed)
                assert typed.structured_content["detail"]["reason"] == "blocked", text_of(typed)
                assert "local.terminal:bash_execute" in text_of(typed)
            # In the terminal's box the canary is out of reach: the command runs unasked and
            # deletes nothing.
            shell = await client.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {"command": f"rm -rf {canary}"}})
            assert not shell.is_error, text_of(shell)
            assert (canary / "keep").exists()
            # High risk, as bash_execute outside the box: asked, and this client cannot answer.
            typed = await client.call_tool("aai_exec", {"app": "local.input", "tool": "type_text", "args": {"text": f"touch {marker}\n"}})
            assert typed.is_error and "approval" in text_of(typed), text_of(typed)
            assert not marker.exists()
            # The same through bash_execute stays in the box: it runs unasked.
            shell = await client.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {"command": f"touch {marker}"}})
            assert not shell.is_error and marker.exists(), text_of(shell)
            marker.unlink()
            # The terminal's grant covers the typed command as it covers bash_execute.
            subprocess.run([str(GATEWAY), "consent", "grant", "local.terminal", "bash_execute", "--client", "mcp"],
                           env=gateway_env(home, None), check=True, timeout=30, capture_output=True)
            await call(client, "local.input", "type_text", {"text": f"touch {marker}\n"})
            wait_until(marker.exists, 10, "the granted command typed into the terminal did not run")
            # Critical stays blocked under the grant.
            typed = await client.call_tool("aai_exec", {"app": "local.input", "tool": "type_text", "args": {"text": f"rm -rf {canary}\n"}})
            assert typed.is_error and typed.structured_content["detail"]["reason"] == "blocked", text_of(typed)
            await call(client, "local.apps", "app_close", {"name": terminal})
    assert (canary / "keep").exists(), "the canary was deleted through the terminal"


async def test_app_launch_of_a_command_is_judged_as_the_shell_command(home, screen, monkeypatch, tmp_path):
    """`app_launch` of a shell, a command-line tool or a wrapper is judged as bash_execute of
    that command line and runs in the terminal's box, where the canary is out of reach; a
    terminal told to run something runs it with the display, outside that box, so a critical
    command is blocked. The canary survives."""
    canary = tmp_path / "canary"
    canary.mkdir()
    (canary / "keep").write_text("x")
    with anyio.fail_after(TIMEOUT):
        async with default_client(home, screen, monkeypatch) as client:
            for name, args in (("sh", ["-c", f"rm -rf {canary}"]), ("rm", ["-rf", str(canary)]),
                               ("/usr/bin/rm", ["-rf", str(canary)]), ("env", ["rm", "-rf", str(canary)]),
                               ("xterm", ["-e", f"rm -rf {canary}"])):
                launched = await client.call_tool("aai_exec", {"app": "local.apps", "tool": "app_launch", "args": {"name": name, "args": args}})
                if name == "xterm":
                    assert launched.is_error, f"{name}: {text_of(launched)}"
                    assert launched.structured_content["detail"]["reason"] == "blocked", f"{name}: {text_of(launched)}"
                else:
                    assert not launched.is_error and launched.structured_content["sandboxed"], f"{name}: {text_of(launched)}"
    assert (canary / "keep").exists(), "a launched command deleted the canary"


SYMBOLS = ("+", "=", "\u2212", "\u00d7", "\u2190", "7")


async def locate_first(client, description):
    found = (await call(client, "local.screen", "element_locate", {"description": description})).structured_content
    assert found["found"], f"{description!r}: {found}"
    return found["elements"][0]


async def test_symbol_and_short_word_names_are_found_exactly_in_the_test_app(home, screen, monkeypatch):
    """Buttons named `+`, `=`, `−`, `×`, `←`, `7` and `OK` are found by those names, the exact
    name first (not the first button of the tree), and clicking them presses them."""
    with anyio.fail_after(TIMEOUT):
        async with desktop_client(home, screen, monkeypatch) as client:
            ok = await locate_first(client, "OK")
            assert (ok["description"], ok["role"], ok["confidence"]) == ("OK", "push button", 1.0), ok
            for symbol in SYMBOLS:
                hit = await locate_first(client, symbol)
                assert (hit["description"], hit["role"], hit["source"]) == (symbol, "push button", "a11y"), hit
                assert hit["confidence"] == 1.0, hit
            for symbol in ("7", "\u00d7", "\u2190", "="):
                hit = await locate_first(client, f"{symbol} button")
                await call(client, "local.input", "left_click", hit["center"])
    out = subprocess.run([SYSTEM_PYTHON, str(HERE / "atspi_text.py"), "AAI Test App Keypad", "Keys"],
                         env=screen["env"], capture_output=True, text=True, timeout=20)
    assert out.returncode == 0, out.stderr
    assert out.stdout.rstrip("\n") == "7\u00d7\u2190="


class AppDesktop:
    """An app on a desktop of its own (Xvfb, openbox, a session bus with the AT-SPI bus), with
    a fresh home and configuration; `app` is its process (its stdout piped when asked)."""

    def __init__(self, tmp_path, argv, stdout=subprocess.DEVNULL):
        assert shutil.which(argv[0]), f"{argv[0]} is missing: run scripts/test.sh"
        self.procs = []
        self.bus = Bus(tmp_path)
        try:
            self.display, xvfb = start_xvfb("1280x800x24")
            self.procs.append(xvfb)
            config = tmp_path / "config"
            config.mkdir(exist_ok=True)
            self.env = {**os.environ, "DISPLAY": self.display, "DBUS_SESSION_BUS_ADDRESS": self.bus.address,
                        "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(config)}
            self.env.pop("NO_AT_BRIDGE", None)
            # The test bus starts no dconf: settings held in memory, as a session's dconf would
            # hold them (mousepad binds its search options to settings, and a write that fails
            # turns a check box back).
            self.env["GSETTINGS_BACKEND"] = "memory"
            self.procs.append(start_openbox(self.env))
            self.procs.append(subprocess.Popen(["/usr/libexec/at-spi-bus-launcher", "--launch-immediately"],
                                               env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))

            def a11y_bus_up():
                out = subprocess.run(["dbus-send", "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                                      "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner",
                                      "string:org.a11y.Bus"],
                                     env=self.env, capture_output=True, text=True, timeout=5)
                return "boolean true" in out.stdout

            wait_until(a11y_bus_up, 10, "the AT-SPI bus did not start")
            # Started in a folder of its own (as from a launcher, in the home folder), not in
            # the checkout: see the editor test.
            self.app = subprocess.Popen(argv, env=self.env, stdout=stdout, stderr=subprocess.DEVNULL,
                                        text=True, cwd=tmp_path)
            self.procs.append(self.app)
        except BaseException:
            self.close()
            raise

    def screen(self):
        return {"display": self.display, "bus": self.bus, "env": self.env}

    def close(self):
        for proc in reversed(self.procs):
            proc.terminate()
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        self.bus.close()


@pytest.fixture
def calculator(tmp_path):
    """Debian's galculator on a desktop of its own, with a fresh configuration (basic mode)."""
    desktop = AppDesktop(tmp_path, ["galculator"])
    try:
        yield desktop.screen()
    finally:
        desktop.close()


async def test_a_real_calculator_adds_through_element_locate(home, calculator, monkeypatch):
    """galculator's `+` and `=` once resolved to its `<-` key (the first button of its tree), so
    "7 + 8 =" could not be clicked. Now each key is found by its name, the look-alike symbols
    an agent writes (−, ×, ←) find the keys galculator names `-`, `*`, `<-`, and the sum shows."""
    with anyio.fail_after(TIMEOUT * 2):
        async with desktop_client(home, calculator, monkeypatch) as client:
            # The calculator's window and tree come up on their own time: wait for its `=` key.
            while True:
                found = (await call(client, "local.screen", "element_locate", {"description": "="})).structured_content
                if found["found"]:
                    break
                await anyio.sleep(0.2)
            for asked, named in (("\u2212", "-"), ("\u00d7", "*"), ("\u2190", "<-"), ("+", "+"), ("=", "=")):
                hit = await locate_first(client, asked)
                assert (hit["description"], hit["role"]) == (named, "toggle button"), (asked, hit)
            for key in ("7", "+", "8", "="):
                hit = await locate_first(client, f"{key} button")
                assert hit["description"] == key, hit
                await call(client, "local.input", "left_click", hit["center"])
    display = ""
    for _ in range(50):
        out = subprocess.run([SYSTEM_PYTHON, str(HERE / "atspi_text.py"), "galculator", ""],
                             env=calculator["env"], capture_output=True, text=True, timeout=20)
        display = out.stdout.strip()
        if display == "15":
            break
        await anyio.sleep(0.1)
    assert display == "15", display


def draft_of(app, env, ready=lambda draft: True):
    """`describe a11y APP`, once the app's window is in its tree and `ready` holds of the draft
    (the app comes up on its own time, and its fields show one by one)."""
    out = None
    for _ in range(150):
        out = subprocess.run([str(GATEWAY), "describe", "a11y", app], env=env, capture_output=True, text=True, timeout=60)
        if out.returncode == 0 and ready(json.loads(out.stdout)):
            return json.loads(out.stdout), out.stderr
        time.sleep(0.2)
    raise AssertionError(f"no draft of {app}: {out.stdout} {out.stderr}")


async def read_until(client, app, tool, wanted):
    """A read tool's text until it is `wanted` (a pressed key's effect lands on the app's own
    main loop), or the last one read."""
    text = ""
    for _ in range(50):
        text = text_of(await call(client, app, tool, {})).strip().strip('"')
        if text == wanted:
            break
        await anyio.sleep(0.1)
    return text


async def test_a_calculator_drafted_from_its_tree_adds_through_the_drafted_tools_alone(home, calculator, monkeypatch):
    """`describe a11y galculator` drafts tools from the running calculator's accessibility tree:
    the draft validates as it is, and 7 + 8 = is pressed and read back as 15 through the drafted
    tools alone — no screenshot, no coordinates — each call through the gate with its audit rows.
    A protected app is neither operated nor drafted."""
    env = {**gateway_env(home, calculator["bus"]), "DISPLAY": calculator["display"]}
    draft, notes = draft_of("galculator", env)
    assert draft["appId"] == "a11y.galculator" and "tools from galculator" in notes, notes
    tools = {t["name"]: t for t in draft["platforms"]["linux"]["tools"]}
    assert tools["file_quit"]["risk"] == "high"
    assert all(set(step) <= {"action", "path", "text", "use"} for t in tools.values() for step in t["steps"])
    path = home / "a11y.galculator" / "aai.json"
    path.parent.mkdir()
    # One tool that names a key the way the calculator does not (Sqrt for sqrt), to see what a
    # failed step says: the path, and the nearest elements there are.
    draft["platforms"]["linux"]["tools"].append({"name": "press_root", "description": "d", "risk": "low",
                                                 "steps": [{"action": "invoke", "path": "frame/toggle button[Sqrt]"}]})
    path.write_text(json.dumps(draft))
    checked = subprocess.run([str(GATEWAY), "validate", str(path)], env=env, capture_output=True, text=True, timeout=30)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    with anyio.fail_after(TIMEOUT * 2):
        async with desktop_client(home, calculator, monkeypatch) as client:
            # The agent drafts the same from the running app through aai_describe (installing
            # stays the person's decision).
            drafted = await call(client, "local.descriptors", "aai_describe", {"kind": "a11y", "target": "galculator"})
            by_agent = drafted.structured_content["draft"]
            assert by_agent["appId"] == "a11y.galculator", by_agent
            assert {t["name"] for t in by_agent["platforms"]["linux"]["tools"]} == set(tools) - {"press_root"}
            for tool in ("press_ac", "press_7", "press_plus", "press_8", "press_equals"):
                result = await call(client, "a11y.galculator", tool, {})
                assert result.structured_content in ({"ok": True}, None), result
            assert await read_until(client, "a11y.galculator", "read_text", "15") == "15"
            # A step that finds nothing names its path and what is there instead.
            missing = await client.call_tool("aai_exec", {"app": "a11y.galculator", "tool": "press_root", "args": {}})
            assert missing.is_error and missing.structured_content["type"] == "AUTOMATION_FAILED", text_of(missing)
            assert "no toggle button[Sqrt] under frame; there: toggle button[sqrt]," in text_of(missing), text_of(missing)
    rows = [json.loads(line) for line in subprocess.run([str(GATEWAY), "audit", "export"], env=env, capture_output=True,
                                                        text=True, timeout=30).stdout.splitlines()]
    ran = [r["tool"] for r in rows if r["app"] == "a11y.galculator" and r["result"] == "success"]
    assert ran[:6] == ["press_ac", "press_7", "press_plus", "press_8", "press_equals", "read_text"], ran

    # The same calculator, protected: not operated, not drafted.
    client = desktop_client(home, calculator, monkeypatch)
    (home / "config.json").write_text(json.dumps({
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "full_auto"}}},
        "desktop": {"protected_apps": ["galcul"]},
    }))
    with anyio.fail_after(TIMEOUT):
        async with client:
            refused = await client.call_tool("aai_exec", {"app": "a11y.galculator", "tool": "press_7"})
            assert refused.is_error and refused.structured_content["type"] == "PERMISSION_DENIED", text_of(refused)
            assert "protected" in text_of(refused)
    out = subprocess.run([str(GATEWAY), "describe", "a11y", "galculator"], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode != 0 and "protected" in out.stderr, out.stderr


def install(home, draft):
    """Writes `draft` as the user's descriptor of its app (the person's decision, made here)."""
    folder = home / draft["appId"]
    folder.mkdir(exist_ok=True)
    (folder / "aai.json").write_text(json.dumps(draft))


def run_tool(env, app, tool, args=None):
    """One call through the CLI (the same gate as the MCP tools), for setting the scene."""
    out = subprocess.run([str(GATEWAY), "call", app, tool, "--args", json.dumps(args or {})], env=env,
                         capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, f"{tool}: {out.stdout} {out.stderr}"
    return out.stdout


def dialog_tools_of(app, env, prefix):
    """The tools a draft made while a dialog is open gives that dialog (it opens on its own time)."""
    tools = []
    for _ in range(50):
        draft, _ = draft_of(app, env)
        tools = [t for t in draft["platforms"]["linux"]["tools"] if t["name"].startswith(prefix)]
        if tools:
            return tools
        time.sleep(0.2)
    raise AssertionError(f"no tools named {prefix}…: the dialog did not open")


async def test_an_editor_drafted_from_its_tree_types_replaces_saves_and_opens_through_its_dialogs(home, tmp_path,
                                                                                                 monkeypatch):
    """Debian's mousepad, drafted from its tree: a dialog becomes tools by drafting while it is
    open (as `describe` says) — Find and Replace; Save As, whose name field is found by the
    toolkit's label; Open, whose list of files is its input. Then, through the drafted tools alone: type a text and replace a word
    through Find and Replace (two fields and a check box filled from arguments, pressed once
    per match), save it as a file through Save As (checked on disk), and open it again through
    Open by picking it from the dialog's list. The commands that open a dialog are clicked
    where they show: called as actions, the dialog would run inside the accessibility call and
    the editor would answer nothing until it closed."""
    desktop = AppDesktop(tmp_path, ["mousepad"])
    try:
        env = {**gateway_env(home, desktop.bus), "DISPLAY": desktop.display}
        draft, _ = draft_of("mousepad", env)
        tools = draft["platforms"]["linux"]["tools"]
        by_name = {t["name"]: t for t in tools}
        assert {"file_save_as", "search_find_and_replace", "set_text", "read_text"} <= set(by_name), sorted(by_name)
        assert by_name["file_save_as"]["steps"][0].get("use") == "pointer", by_name["file_save_as"]
        assert by_name["file_quit"]["risk"] == "high"
        install(home, draft)
        for opener, prefix in (("search_find_and_replace", "find_and_replace_dialog"),
                               ("file_save_as", "save_as_dialog"), ("file_open", "open_file_dialog")):
            run_tool(env, "a11y.mousepad", opener)
            added = dialog_tools_of("mousepad", env, prefix)
            tools.extend(added)
            install(home, draft)
            run_tool(env, "a11y.mousepad", f"{prefix}_close")
        by_name = {t["name"]: t for t in tools}
        replace = by_name["find_and_replace_dialog_replace"]
        params = replace["parameters"]["properties"]
        assert {"search_for", "replace_with"} <= set(replace["parameters"]["required"]), replace
        assert params["replace_all_in"]["type"] == "boolean", params
        assert by_name["save_as_dialog"]["parameters"]["required"] == ["name"], by_name["save_as_dialog"]
        # Open's one input is its list of files: the row to pick is the parameter.
        assert by_name["open_file_dialog"]["parameters"]["required"] == ["files"], by_name["open_file_dialog"]
        checked = subprocess.run([str(GATEWAY), "validate", str(home / "a11y.mousepad" / "aai.json")], env=env,
                                 capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stdout + checked.stderr

        with anyio.fail_after(TIMEOUT * 3):
            async with desktop_client(home, desktop.screen(), monkeypatch) as client:
                await call(client, "a11y.mousepad", "set_text", {"text": "the old house\nthe old tree"})
                assert await read_until(client, "a11y.mousepad", "read_text", "the old house\nthe old tree") \
                    == "the old house\nthe old tree"
                await call(client, "a11y.mousepad", "search_find_and_replace", {})
                # Replace takes one match a press (with "Replace all in" on, the button becomes
                # "Replace All", another tool): twice, with a check box set on the way.
                for _ in range(2):
                    await call(client, "a11y.mousepad", "find_and_replace_dialog_replace",
                               {"search_for": "old", "replace_with": "new", "match_case": True})
                assert await read_until(client, "a11y.mousepad", "read_text", "the new house\nthe new tree") \
                    == "the new house\nthe new tree"
                # Nothing to search for: the editor greys Replace out, and the call says so
                # rather than pressing a button that takes no press.
                grey = await client.call_tool("aai_exec", {"app": "a11y.mousepad", "tool": "find_and_replace_dialog_replace",
                                                           "args": {"search_for": "", "replace_with": "x"}})
                assert grey.is_error and "AUTOMATION_FAILED" in text_of(grey), text_of(grey)
                assert "push button[Replace]" in text_of(grey) and "stayed disabled" in text_of(grey), text_of(grey)
                await call(client, "a11y.mousepad", "find_and_replace_dialog_close", {})
                # Save As through its dialog: the name set into its field, Save pressed once the
                # dialog has lit it up (pressed while still greyed out, the press is lost).
                async def save_as(path, text):
                    await call(client, "a11y.mousepad", "file_save_as", {})
                    await call(client, "a11y.mousepad", "save_as_dialog", {"name": str(path)})
                    for _ in range(100):
                        if path.exists() and path.read_text().rstrip("\n") == text:
                            break
                        await anyio.sleep(0.05)
                    # On disk as the editor shows it (an editor may end the file with a newline).
                    assert path.read_text().rstrip("\n") == text

                await save_as(tmp_path / "notes.txt", "the new house\nthe new tree")
                # The document becomes another file; notes.txt, no longer open, is opened again
                # through the Open dialog by picking it from the dialog's list of files.
                await call(client, "a11y.mousepad", "set_text", {"text": "a second page"})
                assert await read_until(client, "a11y.mousepad", "read_text", "a second page") == "a second page"
                await save_as(tmp_path / "other.txt", "a second page")
                await call(client, "a11y.mousepad", "file_open", {})
                await call(client, "a11y.mousepad", "open_file_dialog", {"files": "notes.txt"})
                assert await read_until(client, "a11y.mousepad", "read_text", "the new house\nthe new tree") \
                    == "the new house\nthe new tree"
        rows = [json.loads(line) for line in subprocess.run([str(GATEWAY), "audit", "export"], env=env,
                                                            capture_output=True, text=True, timeout=30).stdout.splitlines()]
        ran = [r["tool"] for r in rows if r["app"] == "a11y.mousepad" and r["result"] == "success"]
        assert ran.count("find_and_replace_dialog_replace") == 2 and ran.count("save_as_dialog") == 2, ran
        assert ran[-2] == "open_file_dialog", ran
    finally:
        desktop.close()


async def test_a_click_by_pointer_that_would_land_on_a_protected_window_is_refused(home, tmp_path, monkeypatch):
    """A drafted menu command clicked by pointer lands on whatever window is on top there: with
    a protected app's window over the editor, the click is refused (PERMISSION_DENIED naming
    that window); with any other app's window there, the call fails saying so; nothing is
    clicked either way, and once the editor is uncovered the same call opens the dialog."""
    desktop = AppDesktop(tmp_path, ["mousepad"])
    vault = None
    try:
        env = {**gateway_env(home, desktop.bus), "DISPLAY": desktop.display}
        draft, _ = draft_of("mousepad", env)
        assert draft["platforms"]["linux"]["tools"], draft
        install(home, draft)
        client = desktop_client(home, desktop.screen(), monkeypatch)
        (home / "config.json").write_text(json.dumps({
            "policy": {"default_profile": "p", "profiles": {"p": {"preset": "full_auto"}}},
            "desktop": {"protected_apps": ["vault keeper"]},
        }))
        # The whole screen under a protected app's window (the editor is not protected).
        vault = subprocess.Popen(["xmessage", "-geometry", "1280x800+0+0", "-title", "Vault Keeper", "secrets"],
                                 env=desktop.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_until(lambda: subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "Vault Keeper"],
                                          env=desktop.env, capture_output=True, timeout=5).returncode == 0,
                   10, "the protected window did not show")
        with anyio.fail_after(TIMEOUT * 2):
            async with client:
                refused = await client.call_tool("aai_exec", {"app": "a11y.mousepad", "tool": "file_save_as", "args": {}})
                assert refused.is_error and refused.structured_content["type"] == "PERMISSION_DENIED", text_of(refused)
                assert "would land on \"Vault Keeper\"" in text_of(refused), text_of(refused)
                vault.terminate()
                vault.wait(timeout=10)
                wait_until(lambda: subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "Vault Keeper"],
                                                  env=desktop.env, capture_output=True, timeout=5).returncode != 0,
                           10, "the protected window did not go")
                # Any other app's window over the editor: the click would reach an app nobody
                # chose, so the call fails saying so.
                other = subprocess.Popen(["xmessage", "-geometry", "1280x800+0+0", "-title", "Other App", "hello"],
                                         env=desktop.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
                try:
                    wait_until(lambda: subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "Other App"],
                                                      env=desktop.env, capture_output=True, timeout=5).returncode == 0,
                               10, "the other window did not show")
                    covered = await client.call_tool("aai_exec", {"app": "a11y.mousepad", "tool": "file_save_as",
                                                                  "args": {}})
                    assert covered.is_error and covered.structured_content["type"] == "AUTOMATION_FAILED", \
                        text_of(covered)
                    assert "another app's window" in text_of(covered), text_of(covered)
                finally:
                    other.terminate()
                    other.wait(timeout=10)
                wait_until(lambda: subprocess.run(["xdotool", "search", "--onlyvisible", "--name", "Other App"],
                                                  env=desktop.env, capture_output=True, timeout=5).returncode != 0,
                           10, "the other window did not go")
                await call(client, "a11y.mousepad", "file_save_as", {})
        # Refused, nothing was clicked: the dialog opened only with the second call.
        assert dialog_tools_of("mousepad", env, "save_as_dialog")
    finally:
        if vault is not None and vault.poll() is None:
            vault.kill()
        desktop.close()


async def test_the_gateways_own_window_is_never_drafted_nor_operated(home, tmp_path, monkeypatch):
    """A window whose title names the gateway (its consent dialog says "AAI Gateway") answers
    to the person only: `describe a11y` refuses to read it, and a tool written for it is
    refused before any step runs — no path from a tool to the Allow button."""
    desktop = AppDesktop(tmp_path, ["yad", "--form", "--title=AAI Gateway: allow this call?", "--field=Note",
                                    "--button=Allow:0", "--button=Deny:1"], stdout=subprocess.PIPE)
    try:
        env = {**gateway_env(home, desktop.bus), "DISPLAY": desktop.display}
        out = None
        for _ in range(100):
            out = subprocess.run([str(GATEWAY), "describe", "a11y", "yad"], env=env, capture_output=True, text=True,
                                 timeout=60)
            if "gateway's own window" in out.stderr:
                break
            time.sleep(0.1)
        assert out.returncode != 0 and "gateway's own window" in out.stderr, out.stdout + out.stderr
        install(home, {"schema_version": "1.0", "appId": "a11y.yad", "name": "yad", "description": "d",
                       "platforms": {"linux": {"automation": "atspi", "app": "yad", "tools": [
                           {"name": "allow", "description": "d", "risk": "low",
                            "steps": [{"action": "invoke", "path": "push button[Allow]"}]}]}}})
        with anyio.fail_after(TIMEOUT):
            async with desktop_client(home, desktop.screen(), monkeypatch) as client:
                refused = await client.call_tool("aai_exec", {"app": "a11y.yad", "tool": "allow", "args": {}})
                assert refused.is_error and refused.structured_content["type"] == "PERMISSION_DENIED", text_of(refused)
                assert "gateway's own window" in text_of(refused), text_of(refused)
        # Not pressed: the dialog is still waiting for the person.
        assert desktop.app.poll() is None
    finally:
        desktop.close()


async def test_a_form_of_several_fields_is_filled_and_confirmed_through_its_drafted_tool(home, tmp_path,
                                                                                         monkeypatch):
    """yad's form is an app whose one window (no menu bar) is three labelled fields, a check box
    and OK: its draft has one tool that takes the three as arguments (the box as an optional
    boolean) and presses OK (and one that cancels); the values arrive in the form exactly, one
    to each field — the form prints them. The check box is also a control of the window, read
    and set by tools of its own. (yad, not zenity: zenity on the path would become the
    gateway's own consent dialog in the other tests.)"""
    desktop = AppDesktop(tmp_path, ["yad", "--form", "--title=New contact", "--text=Who is it?",
                                    "--field=First name", "--field=Last name", "--field=Email",
                                    "--field=Subscribe:CHK", "--separator=|"], stdout=subprocess.PIPE)
    try:
        env = {**gateway_env(home, desktop.bus), "DISPLAY": desktop.display}

        def whole(draft):
            tools = {t["name"]: t for t in draft["platforms"]["linux"]["tools"]}
            return len(tools.get("new_contact_dialog", {}).get("parameters", {}).get("required", [])) == 3

        draft, _ = draft_of("yad", env, whole)
        by_name = {t["name"]: t for t in draft["platforms"]["linux"]["tools"]}
        # Its one window is a form: filled and confirmed by one tool, left by another.
        assert {"new_contact_dialog", "new_contact_dialog_close"} <= set(by_name), sorted(by_name)
        fill = by_name["new_contact_dialog"]
        # Each field named by the label beside it.
        assert sorted(fill["parameters"]["required"]) == ["email", "first_name", "last_name"], fill
        assert fill["parameters"]["properties"]["subscribe"]["type"] == "boolean", fill
        assert {"read_subscribe_state", "set_subscribe"} <= set(by_name), sorted(by_name)
        install(home, draft)
        checked = subprocess.run([str(GATEWAY), "validate", str(home / "a11y.yad" / "aai.json")], env=env,
                                 capture_output=True, text=True, timeout=30)
        assert checked.returncode == 0, checked.stdout + checked.stderr
        # Values an agent might pass, each kept as data: a quote, a shell's `$(…)`, a path.
        values = {"first_name": "Ada \"the first\"", "last_name": "$(rm -rf ~)", "email": "ada@example.org"}
        with anyio.fail_after(TIMEOUT * 2):
            async with desktop_client(home, desktop.screen(), monkeypatch) as client:
                async def subscribed():
                    state = (await call(client, "a11y.yad", "read_subscribe_state", {})).structured_content
                    assert state["role"] == "check box" and "enabled" in state["states"], state
                    return "checked" in state["states"]

                assert not await subscribed()
                await call(client, "a11y.yad", "set_subscribe", {"on": True})
                assert await subscribed()
                # Not given to the form's tool: the box is left as it is (on).
                await call(client, "a11y.yad", "new_contact_dialog", values)
        out, _ = desktop.app.communicate(timeout=30)
        assert desktop.app.returncode == 0, out
        assert out.strip().rstrip("|") == "|".join([*values.values(), "TRUE"]), out
    finally:
        desktop.close()


async def test_ocr_reads_small_text_at_the_screens_own_resolution(home, monkeypatch, tmp_path):
    """On a 3840×2160 screen the agent's picture is 1568 px wide (0.41 of the screen): GTK's
    default-size text there is a few pixels high. OCR reads the screen's own pixels, enlarged
    for Tesseract, and maps its boxes into the agent's space."""
    display, xvfb = start_xvfb("3840x2160x24")
    env = {**os.environ, "DISPLAY": display, "NO_AT_BRIDGE": "1"}
    wm = start_openbox(env)
    window = subprocess.Popen([SYSTEM_PYTHON, str(HERE / "text_window.py"), "Small Text", "42", "Total 1337"],
                              env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    bus = Bus(tmp_path)
    try:
        ready = window.stdout.readline().split()
        assert ready and ready[0] == "ready", "the text window did not start"
        x, y, width, height = map(int, ready[1:])
        with anyio.fail_after(TIMEOUT * 2):
            async with desktop_client(home, {"display": display, "bus": bus}, monkeypatch) as client:
                shot = (await call(client, "local.screen", "screenshot", {})).structured_content
                assert shot["width"] == 1568, shot
                scale = shot["scale"]
                # The window's frame in the agent's space, with a margin.
                region = {"x": int(x * scale) - 10, "y": int(y * scale) - 10,
                          "width": int(width * scale) + 20, "height": int(height * scale) + 20}
                read = (await call(client, "local.screen", "screen_ocr", {"region": region})).structured_content
    finally:
        for proc in (window, wm, xvfb):
            proc.terminate()
            proc.wait(timeout=10)
        bus.close()
    lines = [b["text"] for b in read["blocks"]]
    assert "42" in lines and "Total 1337" in lines, read
    for block in read["blocks"]:
        if block["text"] in ("42", "Total 1337"):
            box = block["bounds"]
            # Inside the window, in the agent's space (not the screen's pixels).
            assert x * scale - 1 <= box["x"] and box["x"] + box["width"] <= (x + width) * scale + 1, block
            assert y * scale - 1 <= box["y"] and box["y"] + box["height"] <= (y + height) * scale + 1, block
