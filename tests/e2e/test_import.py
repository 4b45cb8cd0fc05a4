"""`aai-gateway import`: the MCP servers of Claude Desktop, Claude Code, Cursor, VS Code,
Windsurf and Codex, each config in its client's own format (written from their docs), become
descriptors; `--rewrite` leaves each client starting only aai-gateway, with a backup. A
server's credentials go to the credential store, and reach the server from there."""

import json
import subprocess
import textwrap

import anyio
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import GATEWAY, ROOT, gateway_env

MEMORY = ROOT / "target" / "mcp-servers" / "node_modules" / "@modelcontextprotocol" / "server-memory" / "dist" / "index.js"
needs_servers = pytest.mark.skipif(not MEMORY.is_file(), reason="scripts/test.sh installs the MCP servers")

# A stdio MCP server with one read-only tool that says which of its variables it got. Given
# with `python3 -c`: a contained server has a /tmp of its own, where a script file would hide.
ECHO_ENV = textwrap.dedent("""\
    import json, os, sys
    for line in sys.stdin:
        msg = json.loads(line)
        if "id" not in msg:
            continue
        method = msg.get("method")
        if method == "initialize":
            result = {"protocolVersion": msg["params"]["protocolVersion"], "capabilities": {"tools": {}},
                      "serverInfo": {"name": "echo-env", "version": "1"}}
        elif method == "tools/list":
            result = {"tools": [{"name": "show_env", "description": "Says which variables it got.",
                                 "inputSchema": {"type": "object", "properties": {}},
                                 "annotations": {"readOnlyHint": True}}]}
        elif method == "tools/call":
            names = ["GITHUB_PERSONAL_ACCESS_TOKEN", "MY_VAR", "DEBUG"]
            result = {"content": [{"type": "text", "text": json.dumps({k: os.environ.get(k) for k in names})}]}
        else:
            result = {}
        print(json.dumps({"jsonrpc": "2.0", "id": msg["id"], "result": result}), flush=True)
    """)


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def clients(user, project):
    """One config per client, in the places and shapes each one documents."""
    return {
        # Claude Desktop: claude_desktop_config.json, "mcpServers" with command/args/env.
        "claude-desktop": write(user / ".config" / "Claude" / "claude_desktop_config.json", json.dumps({
            "mcpServers": {"memory": {"command": "node", "args": [str(MEMORY)],
                                      "env": {"MEMORY_FILE_PATH": str(user / "memory.jsonl")}}},
            "globalShortcut": "Ctrl+Space"}, indent=2)),
        # Claude Code: ~/.claude.json (user and per-project servers), typed entries.
        "claude-code": write(user / ".claude.json", json.dumps({
            "numStartups": 3,
            "mcpServers": {"github": {"type": "http", "url": "https://api.githubcopilot.com/mcp/",
                                      "headers": {"Authorization": "Bearer ghp_secret"}}},
            "projects": {str(project): {"mcpServers": {"sqlite": {"type": "stdio", "command": "uvx",
                                                                  "args": ["mcp-server-sqlite", "--db-path", "test.db"], "env": {}}}}}})),
        # Cursor: ~/.cursor/mcp.json.
        "cursor": write(user / ".cursor" / "mcp.json", json.dumps({
            "mcpServers": {"memory": {"command": "node", "args": [str(MEMORY)],
                                      "env": {"MEMORY_FILE_PATH": str(user / "memory.jsonl")}},
                           "remote-docs": {"url": "https://docs.example.com/mcp"}}})),
        # VS Code: .vscode/mcp.json, "servers" with type, comments allowed, ${env:} variables.
        "vscode": write(project / ".vscode" / "mcp.json", textwrap.dedent("""\
            {
              // Workspace servers
              "inputs": [],
              "servers": {
                "fetch": {"type": "stdio", "command": "uvx", "args": ["mcp-server-fetch"], "env": {"TOKEN": "${env:FETCH_TOKEN}"}}
              }
            }
            """)),
        # Windsurf: ~/.codeium/windsurf/mcp_config.json, "serverUrl" for remote servers.
        "windsurf": write(user / ".codeium" / "windsurf" / "mcp_config.json", json.dumps({
            "mcpServers": {"figma": {"serverUrl": "https://figma.example.com/mcp"},
                           "self": {"command": str(GATEWAY)}}})),
        # Codex: ~/.codex/config.toml, [mcp_servers.<name>] tables.
        "codex": write(user / ".codex" / "config.toml", textwrap.dedent("""\
            model = "gpt-5"

            [mcp_servers.time]
            command = "uvx"
            args = ["mcp-server-time", "--local-timezone", "Europe/Paris"]

            [mcp_servers.time.env]
            TZ = "Europe/Paris"
            """)),
    }


def run(home, user, project, *args):
    env = {**gateway_env(home, None), "HOME": str(user)}
    env.pop("XDG_CONFIG_HOME", None)
    env.pop("CODEX_HOME", None)
    env.pop("APPDATA", None)
    return subprocess.run([str(GATEWAY), *args], env=env, cwd=project, capture_output=True, text=True, timeout=60)


@needs_servers
def test_import_reads_each_clients_format_and_writes_valid_descriptors(home, tmp_path):
    user, project = tmp_path / "user", tmp_path / "project"
    project.mkdir(parents=True)
    files = clients(user, project)
    # Project files are read only when asked: anyone who can write in a project writes them.
    plain = run(home, user, project, "--json", "import", "--dry-run")
    assert not any(r["client"] == "vscode" for r in json.loads(plain.stdout)["servers"]), plain.stdout
    dry = run(home, user, project, "--json", "import", "--dry-run", "--project")
    assert dry.returncode == 0, dry.stderr
    assert not (home / "mcp.memory").exists()
    out = run(home, user, project, "--json", "import", "--project")
    assert out.returncode == 0, out.stderr
    rows = json.loads(out.stdout)["servers"]
    # Each server says what it runs, for the user to read before trusting it.
    assert all("runs" in r for r in rows if "descriptor" in r), rows
    by_server = {(r["client"], r["server"]): r for r in rows}
    expected = {("claude-desktop", "memory"), ("claude-code", "github"), ("claude-code", "sqlite"), ("cursor", "memory"),
                ("cursor", "remote-docs"), ("vscode", "fetch"), ("windsurf", "figma"), ("windsurf", "self"), ("codex", "time")}
    assert expected <= set(by_server), sorted(by_server)
    # The same server in two clients is one app; the gateway itself is not imported.
    assert by_server[("cursor", "memory")]["result"] == "same as above"
    assert "aai-gateway" in by_server[("windsurf", "self")]["result"]
    for app in ["mcp.memory", "mcp.github", "mcp.sqlite", "mcp.remote-docs", "mcp.fetch", "mcp.figma", "mcp.time"]:
        path = home / app / "aai.json"
        assert path.is_file(), app
        valid = run(home, user, project, "validate", str(path))
        assert valid.returncode == 0, valid.stdout + valid.stderr
    codex = json.loads((home / "mcp.time" / "aai.json").read_text())["platforms"]["mcp"]
    assert codex["args"] == ["mcp-server-time", "--local-timezone", "Europe/Paris"] and codex["env"] == {"TZ": "Europe/Paris"}
    fetch = json.loads((home / "mcp.fetch" / "aai.json").read_text())["platforms"]["mcp"]
    assert fetch["env"] == {"TOKEN": "${FETCH_TOKEN}"}
    github = json.loads((home / "mcp.github" / "aai.json").read_text())
    assert "ghp_secret" not in json.dumps(github)
    assert github["platforms"]["mcp"]["auth"] == {"type": "bearer", "env_var": "AAI_TOKEN_GITHUB"}
    assert "AAI_TOKEN_GITHUB" in by_server[("claude-code", "github")]["note"]
    # Nothing was rewritten without --rewrite; a second import keeps what is there.
    assert "memory" in json.loads(files["claude-desktop"].read_text())["mcpServers"]
    again = run(home, user, project, "--json", "import", "--project")
    assert all(r["result"] != "written" for r in json.loads(again.stdout)["servers"])


@needs_servers
async def test_rewrite_leaves_each_client_starting_the_gateway_and_can_be_undone(home, tmp_path):
    user, project = tmp_path / "user", tmp_path / "project"
    project.mkdir(parents=True)
    files = clients(user, project)
    before = {client: path.read_text() for client, path in files.items()}
    out = run(home, user, project, "--json", "import", "--rewrite", "--project")
    assert out.returncode == 0, out.stderr
    rewritten = {r["client"]: r for r in json.loads(out.stdout)["rewritten"]}
    assert set(rewritten) == set(files), sorted(rewritten)
    desktop = json.loads(files["claude-desktop"].read_text())
    assert list(desktop["mcpServers"]) == ["aai-gateway"] and desktop["globalShortcut"] == "Ctrl+Space"
    assert list(json.loads(files["vscode"].read_text())["servers"]) == ["aai-gateway"]
    claude = json.loads(files["claude-code"].read_text())
    assert list(claude["mcpServers"]) == ["aai-gateway"] and claude["numStartups"] == 3
    assert claude["projects"][str(project)]["mcpServers"] == {}
    codex = files["codex"].read_text()
    assert "aai-gateway" in codex and "mcp-server-time" not in codex and 'model = "gpt-5"' in codex
    # The backup is the file as it was; the printed command puts it back.
    for client, row in rewritten.items():
        with open(row["backup"]) as backup:
            assert backup.read() == before[client], client
    undo = rewritten["claude-desktop"]["undo"]
    subprocess.run(undo, shell=True, check=True)
    assert files["claude-desktop"].read_text() == before["claude-desktop"]

    # The imported server runs behind the gateway.
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, None))
    with anyio.fail_after(120):
        async with Client(params, mode="legacy", client_info=types.Implementation(name="imported", version="1"), cache=None) as c:
            graph = await c.call_tool("aai_exec", {"app": "mcp.memory", "tool": "read_graph", "args": {}})
            assert not graph.is_error, "".join(getattr(b, "text", "") for b in graph.content)
    # Once it has run, the scan counts its tools (the memory server has nine).
    scan = json.loads(run(home, user, project, "--json", "--scan").stdout)
    memory = next(a for a in scan["apps"] if a["appId"] == "mcp.memory")
    assert memory["tools"] and memory["tools"] >= 5, memory
    text = run(home, user, project, "--scan").stdout
    assert f"{memory['tools']:>3} tools" in text and "as pinned when it last ran" in text, text


@needs_servers
def test_rewrite_after_a_plain_import_twice_in_a_second_and_the_undo_restores_the_original(home, tmp_path):
    user, project = tmp_path / "user", tmp_path / "project"
    project.mkdir(parents=True)
    files = clients(user, project)
    original = files["claude-desktop"].read_text()
    # --dry-run: each server, then what it runs; nothing written, and it says so.
    dry = run(home, user, project, "import", "--dry-run")
    assert dry.returncode == 0, dry.stderr
    lines = dry.stdout.splitlines()
    first_server = next(i for i, l in enumerate(lines) if l.startswith("memory (claude-desktop)"))
    assert lines[first_server + 1].startswith("  runs: node"), dry.stdout
    assert "would write" in dry.stdout and "Nothing was written (--dry-run)" in dry.stdout, dry.stdout
    assert "now runs behind the gateway" not in dry.stdout, dry.stdout
    assert not (home / "mcp.memory").exists()
    # A plain import, then --rewrite: the clients are rewritten (the descriptors are what the
    # first import wrote).
    assert run(home, user, project, "import").returncode == 0
    assert list(json.loads(files["claude-desktop"].read_text())["mcpServers"]) != ["aai-gateway"]
    first = run(home, user, project, "--json", "import", "--rewrite")
    assert first.returncode == 0, first.stderr
    rows = {r["server"]: r["result"] for r in json.loads(first.stdout)["servers"] if r["client"] == "claude-desktop"}
    assert rows == {"memory": "imported already"}, rows
    rewritten = {r["client"]: r for r in json.loads(first.stdout)["rewritten"]}
    assert "claude-desktop" in rewritten, first.stdout
    assert list(json.loads(files["claude-desktop"].read_text())["mcpServers"]) == ["aai-gateway"]
    # Again at once (the same second): it works, and its undo is still the original.
    second = run(home, user, project, "--json", "import", "--rewrite")
    assert second.returncode == 0, second.stderr
    again = {r["client"]: r for r in json.loads(second.stdout)["rewritten"]}
    assert again["claude-desktop"]["already"] is True, second.stdout
    subprocess.run(again["claude-desktop"]["undo"], shell=True, check=True)
    assert files["claude-desktop"].read_text() == original
    # The scan counts a server's tools once it has run (its pinned tools), not as zero.
    scan = json.loads(run(home, user, project, "--json", "--scan").stdout)
    memory = next(a for a in scan["apps"] if a["appId"] == "mcp.memory")
    assert memory["tools"] is None and memory["mcp"]["pinned"] == 0, memory


async def test_an_imported_servers_credentials_reach_it_from_the_store_and_no_file_the_agent_reads(home, tmp_path):
    user, project = tmp_path / "user", tmp_path / "project"
    project.mkdir(parents=True)
    token, mine = "ghp_" + "Zq7Xw2Vb9" * 4, "my own words"
    write(user / ".config" / "Claude" / "claude_desktop_config.json", json.dumps({"mcpServers": {"github": {
        "command": "python3", "args": ["-c", ECHO_ENV],
        "env": {"GITHUB_PERSONAL_ACCESS_TOKEN": token, "MY_VAR": mine, "DEBUG": "1"}}}}))
    out = run(home, user, project, "--json", "import", "--secret", "MY_VAR")
    assert out.returncode == 0, out.stderr
    row = next(r for r in json.loads(out.stdout)["servers"] if r["server"] == "github")
    assert row["env_from_store"] == ["GITHUB_PERSONAL_ACCESS_TOKEN", "MY_VAR"], row
    section = json.loads((home / "mcp.github" / "aai.json").read_text())["platforms"]["mcp"]
    assert section["env"] == {"DEBUG": "1"} and section["env_from_store"] == ["GITHUB_PERSONAL_ACCESS_TOKEN", "MY_VAR"]
    # Nothing the agent's shell may read in the gateway's home holds them; the store does.
    for path in home.rglob("*"):
        if path.is_file() and "tokens" not in path.relative_to(home).parts:
            assert token.encode() not in path.read_bytes() and mine.encode() not in path.read_bytes(), path
    assert (home / "tokens" / "mcp.github.json").stat().st_mode & 0o777 == 0o600

    # The server gets them in its own environment, as when the client started it.
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, None))
    with anyio.fail_after(120):
        async with Client(params, mode="legacy", client_info=types.Implementation(name="imported", version="1"), cache=None) as c:
            got = await c.call_tool("aai_exec", {"app": "mcp.github", "tool": "show_env", "args": {}})
            said = "".join(getattr(b, "text", "") for b in got.content)
            assert not got.is_error, said
            assert json.dumps({"GITHUB_PERSONAL_ACCESS_TOKEN": token, "MY_VAR": mine, "DEBUG": "1"}) in said, said


pytestmark = [pytest.mark.anyio]
