"""`aai-gateway describe`: drafts from what apps publish — a real D-Bus service on a test bus,
GitHub's OpenAPI document and a spread of the APIs.guru collection (from npm, installed by
scripts/test.sh into target/openapi), a scripting dictionary and a COM listing written from
their formats' documentation. Every draft passes `validate` as it is; the D-Bus one is then
called through the gateway."""

import json
import subprocess
import time

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
