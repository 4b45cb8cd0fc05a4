"""A macOS JXA tool driven through the official MCP SDK on Linux: the gateway serves the linux
and macos sections side by side (config `platforms`), and osascript is a stand-in that runs the
JXA program under Node the way osascript runs it, with the values in argv."""

import json

import anyio
import pytest

from conftest import install
from test_mcp import TIMEOUT, client_for, text, version  # noqa: F401 (version is a fixture)

pytestmark = pytest.mark.anyio

FAKE_OSASCRIPT = """#!/bin/sh
while [ $# -gt 0 ]; do
  case "$1" in
    -l|-s) shift 2;;
    -) shift; break;;
    *) echo "unexpected $1" >&2; exit 2;;
  esac
done
program=$(mktemp); cat > "$program"
exec node -e 'const fs = require("fs"); const run = new Function(fs.readFileSync(process.argv[1], "utf8") + "\\nreturn run;")();
process.stdout.write(String(run(process.argv.slice(2))) + "\\n");' "$program" "$@"
"""

NOTES = {
    "schema_version": "1.0", "appId": "com.example.notes", "name": "Notes",
    "description": "Notes on macOS",
    "platforms": {"macos": {"automation": "jxa", "tools": [{
        "name": "echo", "description": "Return the note as the script saw it", "readOnly": True,
        "parameters": {"type": "object", "properties": {"title": {"type": "string"}, "stars": {"type": "integer"}},
                       "required": ["title", "stars"]},
        "script": "return {title: '${title}', upper: '${title}'.toUpperCase(), stars: ${stars} + 1};",
        "output_parser": "result as record",
    }]}},
}


@pytest.fixture
def macos_home(home, tmp_path):
    fake = tmp_path / "osascript"
    fake.write_text(FAKE_OSASCRIPT)
    fake.chmod(0o755)
    (home / "config.json").write_text(json.dumps({
        "platforms": ["linux", "macos"],
        "executors": {"osascript": str(fake)},
    }))
    install(home, "com.example.notes", NOTES)
    return home


async def test_jxa_tool_through_mcp(macos_home, bus, version, monkeypatch):
    hostile = "' + process.exit(3) + ' \" ` ${x} \\\\ \n\u2028 ü"
    with anyio.fail_after(TIMEOUT):
        async with client_for(macos_home, bus, version, monkeypatch) as client:
            names = [t.name for t in (await client.list_tools()).tools]
            assert "app_com_example_notes" in names and "app_org_aai_test" in names
            guide = text(await client.call_tool("app_com_example_notes", {}))
            assert "echo(title: string, stars: int)" in guide
            result = await client.call_tool("aai_exec", {"app": "com.example.notes", "tool": "echo",
                                                         "args": {"title": hostile, "stars": 4}})
            assert not result.is_error, text(result)
            assert result.structured_content == {"title": hostile, "upper": hostile.upper(), "stars": 5}
            # A number parameter must be a number: the schema check runs before the script.
            bad = await client.call_tool("aai_exec", {"app": "com.example.notes", "tool": "echo",
                                                      "args": {"title": "t", "stars": "4; do shell script"}})
            assert bad.is_error and bad.structured_content["type"] == "INVALID_PARAMS"
