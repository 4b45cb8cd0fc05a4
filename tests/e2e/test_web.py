"""Web apps through the official MCP SDK: the registry is refreshed in the background (start-up
never waits for it) and its apps arrive with list_changed; a REST tool then runs."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from conftest import OAuthSite
from test_mcp import TIMEOUT, client_for, text

pytestmark = pytest.mark.anyio

# A 1×1 PNG and the start of a PDF: bytes that are not UTF-8 text.
PNG = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000"
                    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082")
PDF = b"%PDF-1.4\n%\xe2\xe3\xcf\xd3\n1 0 obj << /Type /Catalog >> endobj\n"


class Site:
    """A registry, a descriptor and a REST API on one plain-HTTP loopback server. The
    registry's answer is held back until `release` is set."""

    def __init__(self):
        self.release = threading.Event()
        self.second_app = threading.Event()
        site = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def reply(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self):
                base = f"http://127.0.0.1:{site.port}"
                if self.path == "/api/v1/apps":
                    site.release.wait(20)
                    apps = [{"appId": "com.example.pinger", "name": "Pinger", "descriptor_url": f"{base}/pinger.json"}]
                    if site.second_app.is_set():
                        apps.append({"appId": "com.example.ponger", "name": "Ponger", "descriptor_url": f"{base}/ponger.json"})
                    self.reply(200, {"apps": apps})
                elif self.path == "/ponger.json":
                    self.reply(200, {
                        "schema_version": "1.0", "appId": "com.example.ponger", "name": "Ponger",
                        "description": "Arrives with a later registry refresh",
                        "platforms": {"web": {"automation": "restapi", "base_url": f"{base}/rest", "auth": {"type": "none"},
                                              "tools": [{"name": "pong", "description": "Pong", "endpoint": "/ping/pong"}]}},
                    })
                elif self.path == "/pinger.json":
                    self.reply(200, {
                        "schema_version": "1.0", "appId": "com.example.pinger", "name": "Pinger",
                        "description": "Answers pings over REST",
                        "platforms": {"web": {"automation": "restapi", "base_url": f"{base}/rest",
                                              "auth": {"type": "none"},
                                              "tools": [{"name": "picture", "description": "An image", "endpoint": "/picture"},
                                                        {"name": "document", "description": "A PDF", "endpoint": "/document"},
                                                        {"name": "ping", "description": "Ping", "readOnly": True,
                                                         "endpoint": "/ping/${who}",
                                                         "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}}]}},
                    })
                elif self.path.startswith("/rest/ping/"):
                    self.reply(200, {"pong": self.path[len("/rest/ping/"):]})
                elif self.path in ("/rest/picture", "/rest/document"):
                    data, kind = (PNG, "image/png") if self.path.endswith("picture") else (PDF, "application/pdf")
                    self.send_response(200)
                    self.send_header("content-type", kind)
                    self.send_header("content-length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                else:
                    self.reply(404, {"error": "not found"})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self):
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def site():
    s = Site()
    yield s
    s.close()


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_registry_apps_arrive_after_start_up(home, bus, site, version, monkeypatch):
    (home / "config.json").write_text(json.dumps({
        "web": {"registry_url": f"http://127.0.0.1:{site.port}", "allow_http_loopback": True},
    }))
    events = []

    async def on_message(message):
        events.append(type(getattr(message, "root", message)).__name__)

    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, version, monkeypatch, message_handler=on_message) as client:
            # The registry has not answered, yet the gateway serves.
            names = [t.name for t in (await client.list_tools()).tools]
            assert "web_discover" in names and "app_org_aai_test" in names
            assert "app_com_example_pinger" not in names
            await anyio.sleep(0.3)
            events.clear()
            site.release.set()
            while "ToolListChangedNotification" not in events:
                await anyio.sleep(0.05)
            names = [t.name for t in (await client.list_tools()).tools]
            assert "app_com_example_pinger" in names
            assert (home / "web" / "com.example.pinger" / "aai.json").exists()
            result = await client.call_tool("aai_exec", {"app": "com.example.pinger", "tool": "ping", "args": {"who": "a b/c"}})
            assert not result.is_error, text(result)
            assert result.structured_content == {"pong": "a%20b%2Fc"}


async def test_oauth_sign_in_through_url_elicitation(home, bus, monkeypatch, tmp_path):
    """One aai_exec: the user confirms the sign-in domain (form), is sent to the sign-in page
    by the client (URL mode), and the call then completes with the new token."""
    import urllib.request

    import mcp.client.session as session_module
    import mcp_types as types
    from mcp.client.client import Client
    from mcp.client.stdio import StdioServerParameters

    from conftest import GATEWAY, gateway_env

    site = OAuthSite()
    (home / "config.json").write_text(json.dumps({"web": {"allow_http_loopback": True, "open_browser": False}}))
    asked = []

    async def on_elicit(context, params):
        asked.append(params.mode)
        if params.mode == "url":
            # Play the browser: open the page, follow the redirect back to the gateway.
            await anyio.to_thread.run_sync(lambda: urllib.request.urlopen(params.url, timeout=10).read())
            return types.ElicitResult(action="accept")
        assert "no one: plain http on this computer" in params.message
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    try:
        with anyio.fail_after(TIMEOUT):
            async with Client(params, mode="legacy", elicitation_callback=on_elicit, cache=None) as client:
                guide = await client.call_tool("web_discover", {"url": f"http://127.0.0.1:{site.port}"})
                assert "me()" in text(guide), text(guide)
                result = await client.call_tool("aai_exec", {"app": "com.example.notes", "tool": "me"})
                assert not result.is_error, text(result)
                assert result.structured_content == {"user": "ada"}
                assert asked == ["form", "url"]
                again = await client.call_tool("aai_exec", {"app": "com.example.notes", "tool": "me"})
                assert again.structured_content == {"user": "ada"} and asked == ["form", "url"]
    finally:
        site.server.shutdown()
    stored = (home / "tokens" / "com.example.notes.json")
    assert stored.exists() and oct(stored.stat().st_mode & 0o777) == "0o600"


async def test_binary_responses_arrive_as_image_and_resource_content(home, bus, site, monkeypatch):
    import base64
    (home / "config.json").write_text(json.dumps({
        "web": {"registry_url": f"http://127.0.0.1:{site.port}", "allow_http_loopback": True},
    }))
    site.release.set()
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, "2025-11-25", monkeypatch) as client:
            # The registry's copy arrives in the background.
            while "app_com_example_pinger" not in [t.name for t in (await client.list_tools()).tools]:
                await anyio.sleep(0.05)
            picture = await client.call_tool("aai_exec", {"app": "com.example.pinger", "tool": "picture"})
            document = await client.call_tool("aai_exec", {"app": "com.example.pinger", "tool": "document"})
    assert not picture.is_error, text(picture)
    image = next(b for b in picture.content if getattr(b, "type", "") == "image")
    assert image.mime_type == "image/png" and base64.b64decode(image.data) == PNG
    assert "image/png" in text(picture)
    embedded = next(b for b in document.content if getattr(b, "type", "") == "resource")
    assert embedded.resource.mime_type == "application/pdf"
    assert base64.b64decode(embedded.resource.blob) == PDF


async def test_the_registry_is_read_again_while_the_gateway_runs(home, bus, site, monkeypatch):
    (home / "config.json").write_text(json.dumps({
        "web": {"registry_url": f"http://127.0.0.1:{site.port}", "allow_http_loopback": True,
                "registry_refresh_seconds": 1},
    }))
    names = lambda tools: [t.name for t in tools.tools]
    with anyio.fail_after(TIMEOUT):
        async with client_for(home, bus, "2025-11-25", monkeypatch) as client:
            # The registry answers only after start-up, while the client keeps the gateway
            # busy (each list is logged in the home folder the gateway watches).
            await client.list_tools()
            site.release.set()
            while "app_com_example_pinger" not in names(await client.list_tools()):
                await anyio.sleep(0.05)
            assert "app_com_example_ponger" not in names(await client.list_tools())
            site.second_app.set()  # the registry now lists a second app
            while "app_com_example_ponger" not in names(await client.list_tools()):
                await anyio.sleep(0.1)
