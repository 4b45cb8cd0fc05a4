"""The daemon with today's clients: approvals in both protocol eras over HTTP and through the
stdio forwarder, a config that changes under a running daemon, sessions that are never closed,
and what `schedule` says about the daemon that runs it."""

import json
import subprocess

import anyio
import httpx2
import mcp.client.session as session_module
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters
from mcp.client.streamable_http import streamable_http_client

from conftest import GATEWAY, Daemon, gateway_env, wait_until

pytestmark = pytest.mark.anyio
TIMEOUT = 60
ADD = {"app": "org.aai.test", "tool": "add", "args": {"a": 40, "b": 2}}
ECHO = {"app": "org.aai.test", "tool": "echo", "args": {"text": "x"}}


def text(result):
    return "".join(getattr(c, "text", "") for c in result.content)


def approval_daemon(home, bus):
    """A daemon whose clients are asked before `add` and `echo` run."""
    (home / "config.json").write_text(json.dumps({"policy": {"default_profile": "p", "profiles": {"p": {
        "tool_overrides": {"org.aai.test:add": "require_approval", "org.aai.test:echo": "require_approval"}}}}}))
    return Daemon(home, gateway_env(home, bus))


def era_client(d, era, transport, name, on_elicit, monkeypatch):
    info = types.Implementation(name=name, version="1")
    if era == "2026-07-28":
        mode = era
    else:
        monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", era)
        mode = "legacy"
    if transport == "http":
        http = httpx2.AsyncClient(headers={"Authorization": f"Bearer {d.token}"}, timeout=30)
        target = streamable_http_client(d.url, http_client=http)
    else:
        # `aai-gateway` as a client starts it, with the daemon running: it forwards.
        target = StdioServerParameters(command=str(GATEWAY), args=[], env=d.env)
    return Client(target, mode=mode, elicitation_callback=on_elicit, client_info=info, cache=None)


@pytest.mark.parametrize("transport", ["http", "stdio"])
@pytest.mark.parametrize("era", ["2026-07-28", "2025-11-25"])
async def test_each_approval_choice_works_through_the_daemon(home, bus, monkeypatch, era, transport):
    d = approval_daemon(home, bus)
    try:
        for choice in ("deny", "allow_once", "allow_session", "always_tool", "always_app"):
            asked = []

            async def on_elicit(context, params):
                asked.append(params.message)
                return types.ElicitResult(action="accept", content={"decision": choice})

            name = f"{transport}-{era}-{choice}"
            with anyio.fail_after(TIMEOUT):
                async with era_client(d, era, transport, name, on_elicit, monkeypatch) as c:
                    first = await c.call_tool("aai_exec", ADD)
                    assert len(asked) == 1 and f"Allow {name} to run" in asked[0], asked
                    if choice == "deny":
                        assert first.is_error and "the user chose Deny" in text(first), text(first)
                        continue
                    # Not "altered or has expired": the round opened where the retry landed.
                    assert not first.is_error and text(first) == "42", (choice, text(first))
                    second = await c.call_tool("aai_exec", ADD)
                    assert not second.is_error and text(second) == "42", text(second)
                    remembered = choice != "allow_once"
                    if choice == "allow_session" and era == "2026-07-28":
                        # The stateless era has no session at the daemon: each call is its own.
                        remembered = False
                    assert len(asked) == (1 if remembered else 2), (choice, asked)
                    echoed = await c.call_tool("aai_exec", ECHO)
                    assert not echoed.is_error, text(echoed)
                    # Only "always this app" covers the app's other tools.
                    assert len(asked) == (1 if remembered else 2) + (0 if choice == "always_app" else 1), (choice, asked)
        rows = [json.loads(line) for line in d.cli("audit", "export").stdout.splitlines() if line.strip()]
        denied = [r for r in rows if r["caller"].endswith("-deny") and r["tool"] == "add"]
        assert [r["result"] for r in denied] == ["denied"], denied
    finally:
        d.close()
