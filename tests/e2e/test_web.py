"""Web apps through the official MCP SDK: the registry is refreshed in the background (start-up
never waits for it) and its apps arrive with list_changed; a REST tool then runs."""

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import anyio
import pytest

from test_mcp import TIMEOUT, client_for, text

pytestmark = pytest.mark.anyio


class Site:
    """A registry, a descriptor and a REST API on one plain-HTTP loopback server. The
    registry's answer is held back until `release` is set."""

    def __init__(self):
        self.release = threading.Event()
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
                    self.reply(200, {"apps": [{"appId": "com.example.pinger", "name": "Pinger",
                                                "descriptor_url": f"{base}/pinger.json"}]})
                elif self.path == "/pinger.json":
                    self.reply(200, {
                        "schema_version": "1.0", "appId": "com.example.pinger", "name": "Pinger",
                        "description": "Answers pings over REST",
                        "platforms": {"web": {"automation": "restapi", "base_url": f"{base}/rest",
                                              "auth": {"type": "none"},
                                              "tools": [{"name": "ping", "description": "Ping", "readOnly": True,
                                                         "endpoint": "/ping/${who}",
                                                         "parameters": {"type": "object", "properties": {"who": {"type": "string"}}, "required": ["who"]}}]}},
                    })
                elif self.path.startswith("/rest/ping/"):
                    self.reply(200, {"pong": self.path[len("/rest/ping/"):]})
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
