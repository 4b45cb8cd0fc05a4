"""`aai-gateway describe`: drafts from what apps publish — a real D-Bus service on a test bus,
GitHub's OpenAPI document and a spread of the APIs.guru collection (from npm, installed by
scripts/test.sh into target/openapi), a scripting dictionary and a COM listing written from
their formats' documentation. Every draft passes `validate` as it is; the D-Bus one is then
called through the gateway."""

import json
import subprocess
import time
from pathlib import Path

import anyio
import pytest

from conftest import GATEWAY, ROOT, gateway_env, install
from test_mcp_servers import client, text

OPENAPI = ROOT / "target" / "openapi"
FIXTURES = ROOT / "tests" / "e2e" / "fixtures"

pytestmark = pytest.mark.anyio


def describe(*args, env=None, check=True):
    out = subprocess.run([str(GATEWAY), "describe", *map(str, args)], env=env, capture_output=True, text=True, timeout=120)
    if check:
        assert out.returncode == 0, out.stderr
    return out


def validate(path, env=None):
    out = subprocess.run([str(GATEWAY), "validate", str(path)], env=env, capture_output=True, text=True, timeout=60)
    assert out.returncode == 0 and ": ok" in out.stdout, out.stdout + out.stderr
    return out


async def test_a_dbus_service_is_described_validated_and_called(home, bus, tmp_path):
    env = gateway_env(home, bus)
    listed = describe("dbus", "--list", env=env).stdout
    assert "org.aai.Test:" in listed and "tools" in listed, listed
    started = time.monotonic()
    draft_file = tmp_path / "aai.json"
    out = describe("dbus", "org.aai.Test", "--out", draft_file, env=env)
    assert "wrote a draft" in out.stderr, out.stderr
    validate(draft_file, env)
    draft = json.loads(draft_file.read_text())
    section = draft["platforms"]["linux"]
    assert section["service"] == "org.aai.Test" and section["object"] == "/org/aai/Test", section
    tools = {t["name"]: t for t in section["tools"]}
    assert tools["echo"]["signature"] == "s" and tools["echo"]["args"] == ["${text}"], tools["echo"]
    assert tools["echo"]["parameters"]["required"] == ["text"]
    assert "todo" in tools["echo"] and draft["todo"], "guesses are marked for the reviewer"
    assert not any(t.get("interface") == "org.freedesktop.DBus.Peer" for t in tools.values()), "standard interfaces skipped"
    # Installed as it is, the draft's tool answers through the gateway.
    draft["appId"] = "org.aai.drafted"
    install(home, "org.aai.drafted", draft)
    with anyio.fail_after(60):
        async with client(home, env) as c:
            echoed = await c.call_tool("aai_exec", {"app": "org.aai.drafted", "tool": "echo", "args": {"text": "drafted"}})
            assert "drafted" in text(echoed) and not echoed.is_error, text(echoed)
    print(f"describe → validate → first call: {(time.monotonic() - started) * 1000:.0f} ms")
    # Only the interface asked for, a standard one too.
    peer = json.loads(describe("dbus", "org.aai.Test", "--interface", "org.freedesktop.DBus.Peer", env=env).stdout)
    assert [t["method"] for t in peer["platforms"]["linux"]["tools"]] == ["Ping", "GetMachineId"]
    # A name nobody owns is a clear error.
    missing = describe("dbus", "org.aai.Nobody", env=env, check=False)
    assert missing.returncode != 0 and "org.aai.Nobody" in missing.stderr, missing.stderr


@pytest.mark.skipif(not (OPENAPI / "octokit").is_dir(), reason="scripts/test.sh installs the OpenAPI documents")
def test_githubs_openapi_document_becomes_a_usable_draft(tmp_path):
    source = OPENAPI / "octokit" / "generated" / "api.github.com.json"
    draft_file = tmp_path / "github.json"
    out = describe("openapi", source, "--out", draft_file)
    validate(draft_file)
    draft = json.loads(draft_file.read_text())
    web = draft["platforms"]["web"]
    assert web["base_url"] == "https://api.github.com" and draft["appId"] == "com.github.api"
    assert len(web["tools"]) == 60
    assert "more operations were left out past 60 tools, by tag" in out.stderr, out.stderr
    issues = json.loads(describe("openapi", source, "--tag", "issues", "--max-tools", "500").stdout)
    names = {t["name"] for t in issues["platforms"]["web"]["tools"]}
    assert "issues_create" in names and "issues_list_for_repo" in names, sorted(names)[:20]
    create = next(t for t in issues["platforms"]["web"]["tools"] if t["name"] == "issues_create")
    assert create["method"] == "POST" and create["endpoint"] == "/repos/${owner}/${repo}/issues", create
    assert create["body"]["title"] == "${title}" and create["risk"] == "medium"


@pytest.mark.skipif(not (OPENAPI / "directory").is_dir(), reason="scripts/test.sh installs the OpenAPI documents")
def test_a_spread_of_the_apis_guru_collection_converts(tmp_path):
    documents = sorted((OPENAPI / "directory" / "api").rglob("*.json"))
    spread = documents[::25]
    converted, tools, reasons = 0, 0, {}
    started = time.monotonic()
    for doc in spread:
        out_file = tmp_path / "draft.json"
        out = describe("openapi", doc, "--out", out_file, check=False)
        if out.returncode != 0:
            reason = out.stderr.strip().splitlines()[-1][:80] if out.stderr.strip() else "no output"
            reasons[reason] = reasons.get(reason, 0) + 1
            continue
        validate(out_file)
        converted += 1
        tools += len(json.loads(out_file.read_text())["platforms"]["web"]["tools"])
    seconds = time.monotonic() - started
    print(f"{converted}/{len(spread)} documents converted, {tools} tools, {len(spread) / seconds:.1f} documents/s; failures: {reasons}")
    assert converted >= 0.95 * len(spread), reasons


def test_a_scripting_dictionary_becomes_applescript_tools(tmp_path):
    draft_file = tmp_path / "mail.json"
    describe("sdef", FIXTURES / "Music.sdef", "--out", draft_file)
    validate(draft_file)
    tools = {t["name"]: t for t in json.loads(draft_file.read_text())["platforms"]["macos"]["tools"]}
    assert tools["play"]["script"] == 'tell application "Music"\n  play POSIX file "${target}"\nend tell', tools["play"]
    assert tools["set_volume"]["parameters"]["properties"]["to"]["type"] == "integer"
    assert 'set volume to ${to}' in tools["set_volume"]["script"]


def test_a_com_listing_becomes_com_steps_and_the_reader_is_fixed(tmp_path):
    draft_file = tmp_path / "outlook.json"
    describe("com", "Outlook.Application", "--from", FIXTURES / "outlook-members.json", "--out", draft_file)
    validate(draft_file)
    tools = {t["name"]: t for t in json.loads(draft_file.read_text())["platforms"]["windows"]["tools"]}
    assert tools["create_item"]["script"][1] == {"action": "call", "var": "result", "object": "app",
                                                  "method": "CreateItem", "args": ["${item_type}"]}
    refused = describe("com", "Outlook.Application; calc", env=None, check=False)
    assert refused.returncode != 0 and "not a ProgID" in refused.stderr, refused.stderr


def agent_client(home, bus, answers, asked, heard=None):
    """A client whose user answers the gate's questions from `answers` (the last one repeats)."""
    import mcp_types as types
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    async def on_elicit(context, params):
        asked.append(params.message)
        decision = answers[min(len(asked), len(answers)) - 1]
        return types.ElicitResult(action="accept", content={"decision": decision})

    async def on_message(message):
        if heard is not None:
            heard.append(str(message))

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    return Client(params, mode="legacy", elicitation_callback=on_elicit, message_handler=on_message,
                  client_info=types.Implementation(name="describer", version="1"), cache=None)


async def test_the_agent_drafts_an_app_and_each_install_is_put_to_the_user(home, bus, tmp_path):
    work = tmp_path / "work"
    work.mkdir()
    (home / "config.json").write_text(json.dumps({"local": {"sandbox": {"allowed_directories": [str(work)]}}}))
    asked, heard = [], []
    call = lambda tool, args: {"app": "local.descriptors", "tool": tool, "args": args}
    with anyio.fail_after(120):
        async with agent_client(home, bus, ["allow_once"], asked, heard) as c:
            drafted = await c.call_tool("aai_exec", call("aai_describe", {"kind": "dbus", "target": "org.aai.Test"}))
            assert not drafted.is_error, text(drafted)
            draft = drafted.structured_content["draft"]
            assert asked == [], "drafting reads the bus; it installs nothing"
            draft["appId"] = "org.aai.agentmade"
            draft["name"] = "Agent-made"
            # The agent calls a dangerous-sounding tool harmless: it is installed at its name's risk.
            draft["platforms"]["linux"]["tools"].append(
                {"name": "delete_everything", "description": "Echo, named to alarm", "method": "Echo",
                 "signature": "s", "args": ["gone"], "risk": "low"})
            before = len(heard)
            installed = await c.call_tool("aai_exec", call("aai_install_descriptor", {"descriptor": draft}))
            assert not installed.is_error, text(installed)
            out = installed.structured_content
            assert out["installed"] == "org.aai.agentmade" and out["offered"] is True, out
            assert out["risks_raised"] == ["delete_everything: low → high"], out
            question = asked[-1]
            assert 'install the app "Agent-made" (org.aai.agentmade)' in question, question
            assert '"delete_everything" (high)' in question and '"echo" (' in question, question
            assert "the D-Bus service org.aai.Test on the session bus" in question, question
            assert "loads as an app from the network" in question, question
            # The summary comes first; the descriptor's JSON after it.
            assert question.index('install the app "Agent-made"') < question.index("Arguments"), question
            assert question.index("Arguments") < question.index('"schema_version"'), question
            assert (home / "agent" / "org.aai.agentmade" / "aai.json").exists(), "beside the user's own apps, not among them"
            # Clients are told the list changed.
            while not any("list_changed" in m or "ToolListChanged" in m for m in heard[before:]):
                await anyio.sleep(0.05)
            echoed = await c.call_tool("aai_exec", {"app": "org.aai.agentmade", "tool": "echo", "args": {"text": "made"}})
            assert "made" in text(echoed), text(echoed)
            # Only "allow once" or "deny" is offered, and a grant the user made does not
            # cover an install either: it is asked every time.
            assert "always_tool" not in json.dumps(asked)
            grant = subprocess.run([str(GATEWAY), "consent", "grant", "local.descriptors", "aai_install_descriptor",
                                    "--client", "describer"], env=gateway_env(home, bus), capture_output=True, text=True, timeout=30)
            assert grant.returncode == 0, grant.stderr
            # A grant the user made for the app's tools does not pass to the new descriptor.
            kept = subprocess.run([str(GATEWAY), "consent", "grant", "org.aai.agentmade", "echo", "--client", "describer"],
                                  env=gateway_env(home, bus), capture_output=True, text=True, timeout=30)
            assert kept.returncode == 0, kept.stderr
            count = len(asked)
            again = await c.call_tool("aai_exec", call("aai_install_descriptor", {"descriptor": draft}))
            assert not again.is_error and len(asked) == count + 1, (text(again), asked[count:])
            assert "replacing your Agent-made" in asked[-1], asked[-1]
            assert again.structured_content["grants_forgotten"] >= 1, again.structured_content
            assert out["grants_forgotten"] == 0
            # Refused before anyone is asked: checked exactly as a file on disk, and never in
            # the place of the gateway's own toolsets, another source's app, or a command.
            count = len(asked)
            for bad, expected in [
                ({**draft, "name": ""}, "not valid"),
                ({**draft, "appId": "local.files"}, "gateway's own toolsets"),
                ({**draft, "appId": "org.aai.test"}, "an agent's descriptor never takes its place"),
                ({**draft, "appId": "ORG.aai.agentmade"}, "only in case"),
                ({"schema_version": "1.0", "appId": "org.example.cmd", "name": "Cmd", "description": "Runs a command",
                  "platforms": {"mcp": {"automation": "stdio", "command": "sh", "args": ["-c", "id"]}}}, "added by the user"),
            ]:
                refused = await c.call_tool("aai_exec", call("aai_install_descriptor", {"descriptor": bad}))
                assert refused.is_error and expected in text(refused), text(refused)
            assert len(asked) == count, asked[count:]
            assert not (home / "org.example.cmd").exists()
            # In a batch the one question carries the install's summary too.
            count = len(asked)
            batch = await c.call_tool("aai_batch", {"steps": [
                {"app": "local.descriptors", "tool": "aai_install_descriptor", "args": {"descriptor": {**draft, "appId": "org.aai.batched"}}}]})
            assert not batch.is_error, text(batch)
            assert any("install the app" in q and "org.aai.batched" in q for q in asked[count:]), asked[count:]
            # Documents for a draft: public https only, files only inside the sandbox.
            for target, expected in [("https://127.0.0.1:9/openapi.json", "this computer or a private network"),
                                     ("http://example.com/openapi.json", "only https"),
                                     (str(home / "config.json"), "")]:
                refused = await c.call_tool("aai_exec", call("aai_describe", {"kind": "openapi", "target": target}))
                assert refused.is_error and expected in text(refused), text(refused)
            (work / "api.json").write_text(json.dumps({
                "openapi": "3.0.0", "info": {"title": "Notes", "version": "1"}, "servers": [{"url": "https://notes.example.com"}],
                "paths": {"/notes": {"get": {"operationId": "listNotes", "summary": "List notes"}}}}))
            local = await c.call_tool("aai_exec", call("aai_describe", {"kind": "openapi", "target": str(work / "api.json")}))
            assert local.structured_content["draft"]["platforms"]["web"]["tools"][0]["name"] == "list_notes", text(local)
    # A user who says no: nothing is written.
    asked = []
    declined_doc = {**draft, "appId": "org.aai.declined"}
    with anyio.fail_after(60):
        async with agent_client(home, bus, ["deny"], asked) as c:
            declined = await c.call_tool("aai_exec", call("aai_install_descriptor", {"descriptor": declined_doc}))
            assert declined.is_error and asked, text(declined)
    assert not (home / "agent" / "org.aai.declined").exists()


def draft_installed(home, env, name, app_id, *extra):
    """`describe dbus NAME` → a file that validates → installed as `app_id`; its tools."""
    out = describe("dbus", name, *extra, env=env)
    draft = json.loads(out.stdout)
    path = home.parent / f"{app_id}.json"
    path.write_text(out.stdout)
    validate(path, env)
    draft["appId"] = app_id
    install(home, app_id, draft)
    return {t["name"]: t for t in next(iter(draft["platforms"].values()))["tools"]}


def wait_for_name(env, name, system=False):
    import shutil as _shutil
    assert _shutil.which("dbus-send")

    def owned():
        out = subprocess.run(["dbus-send", "--system" if system else "--session", "--print-reply", "--dest=org.freedesktop.DBus",
                              "/org/freedesktop/DBus", "org.freedesktop.DBus.NameHasOwner", f"string:{name}"],
                             env=env, capture_output=True, text=True, timeout=5)
        return "boolean true" in out.stdout

    from conftest import wait_until
    wait_until(owned, 20, f"{name} to appear on the bus")


async def test_a_notification_daemon_and_an_mpris_player_are_described_and_called(home, bus, desktop, tmp_path):
    env = gateway_env(home, bus)
    dunst = draft_installed(home, env, "org.freedesktop.Notifications", "org.example.dunst")
    assert {"notify", "get_server_information", "close_notification"} <= set(dunst), sorted(dunst)
    assert dunst["notify"]["signature"] == "susssasa{sv}i", dunst["notify"]
    mpv = subprocess.Popen(["mpv", "--idle=yes", "--no-video", "--ao=null", "--no-terminal", "--no-config",
                            "--script=/usr/lib/mpv-mpris/mpris.so"],
                           env={**env, "HOME": str(tmp_path)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_name(env, "org.mpris.MediaPlayer2.mpv")
        player = draft_installed(home, env, "org.mpris.MediaPlayer2.mpv", "org.example.mpv")
        assert {"player_play_pause", "player_get_playback_status", "player_set_volume", "get_identity"} <= set(player), sorted(player)
        assert player["player_set_volume"]["args"][2] == {"$signature": "d", "value": "${value}"}
        with anyio.fail_after(60):
            async with client(home, env) as c:
                info = await c.call_tool("aai_exec", {"app": "org.example.dunst", "tool": "get_server_information", "args": {}})
                assert "dunst" in text(info).lower(), text(info)
                identity = await c.call_tool("aai_exec", {"app": "org.example.mpv", "tool": "get_identity", "args": {}})
                assert "mpv" in text(identity).lower(), text(identity)
                status = await c.call_tool("aai_exec", {"app": "org.example.mpv", "tool": "player_get_playback_status", "args": {}})
                # An idle mpv reports Stopped or, just after start, Playing: an MPRIS status either way.
                assert text(status).strip().strip('"') in ("Playing", "Paused", "Stopped"), text(status)
    finally:
        mpv.terminate()
        mpv.wait(timeout=10)


SYSTEMD = Path("/lib/systemd")


@pytest.mark.skipif(not (SYSTEMD / "systemd-hostnamed").exists(), reason="systemd's hostnamed is not on this machine")
async def test_systemds_hostname1_and_timedate1_on_a_private_system_bus(home, tmp_path):
    import socket

    from conftest import Bus

    folder = tmp_path / "system-bus"
    folder.mkdir()
    system = Bus(folder)
    env = {**gateway_env(home, None), "DBUS_SYSTEM_BUS_ADDRESS": system.address}
    services = []
    try:
        for program, name, app_id, reader in [("systemd-hostnamed", "org.freedesktop.hostname1", "org.example.hostname", "get_hostname"),
                                               ("systemd-timedated", "org.freedesktop.timedate1", "org.example.timedate", "get_timezone")]:
            if not (SYSTEMD / program).exists():
                continue
            services.append(subprocess.Popen([str(SYSTEMD / program)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
            wait_for_name(env, name, system=True)
            tools = draft_installed(home, env, name, app_id, "--system")
            assert reader in tools and tools[reader]["risk"] == "low", sorted(tools)
            with anyio.fail_after(60):
                async with client(home, env) as c:
                    # Only reading: the draft's set_* tools would change this machine.
                    read = await c.call_tool("aai_exec", {"app": app_id, "tool": reader, "args": {}})
                    assert not read.is_error and text(read).strip(), text(read)
                    if reader == "get_hostname":
                        assert socket.gethostname() in text(read), text(read)
    finally:
        for proc in services:
            proc.terminate()
            proc.wait(timeout=10)
        system.close()


def test_an_openapi_url_is_fetched_and_a_relative_server_is_read_against_it(tmp_path):
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    document = json.dumps({"openapi": "3.1.0", "info": {"title": "Local", "version": "1"}, "servers": [{"url": "/v2"}],
                           "components": {"securitySchemes": {"token": {"type": "http", "scheme": "bearer"}}},
                           "security": [{"token": []}],
                           "paths": {"/items/{id}": {"get": {"operationId": "getItem", "summary": "One item",
                                                             "parameters": [{"name": "id", "in": "path", "required": True,
                                                                             "schema": {"type": ["string", "null"]}}]}}}}).encode()

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def do_GET(self):
            self.send_response(200 if self.path == "/openapi.json" else 404)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(document)))
            self.end_headers()
            self.wfile.write(document)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base = f"http://127.0.0.1:{server.server_address[1]}"
        draft_file = tmp_path / "local.json"
        describe("openapi", f"{base}/openapi.json", "--out", draft_file)
        validate(draft_file)
        web = json.loads(draft_file.read_text())["platforms"]["web"]
        assert web["base_url"] == f"{base}/v2" and web["auth"] == {"type": "bearer", "env_var": "LOCAL_TOKEN"}, web
        assert web["tools"][0]["endpoint"] == "/items/${id}", web["tools"][0]
        missing = describe("openapi", f"{base}/nothing.json", check=False)
        assert missing.returncode != 0 and "404" in missing.stderr, missing.stderr
    finally:
        server.shutdown()
    # An app's dictionary is read with macOS's sdef: elsewhere the way round is named.
    elsewhere = describe("app", "Mail", check=False)
    assert elsewhere.returncode != 0 and "describe sdef FILE" in elsewhere.stderr, elsewhere.stderr
