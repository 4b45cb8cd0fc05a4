"""A coding session through the gate as a new user has it: the default profile, no grant given,
every question answered "Allow once". Commands that stay in the box run unasked; deletions are
judged by what they would lose; nothing waits on a pager or a prompt; nothing outside the
allowed folder changes."""

import json
import os
import subprocess
import time

import anyio
import mcp.types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import GATEWAY, gateway_env

TIMEOUT = 300

pytestmark = pytest.mark.anyio

# Thirty commands of an ordinary session on a small Python project: look, edit, build, test,
# format, git (status, diff, log, commit, branch), a virtual environment, make, clean.
SESSION = [
    "git status",
    "git diff --stat",
    "git log --oneline -5",
    "ls -la",
    "cat README.md",
    "grep -rn 'def ' src",
    "sed -i 's/hello/hullo/' src/app.py",
    "git diff",
    "python3 -m py_compile src/app.py",
    "python3 -m unittest discover -s tests -q",
    "make build",
    "make test",
    "sed -i 's/[[:space:]]*$//' src/app.py tests/test_app.py",
    "python3 -m venv .venv",
    ".venv/bin/python -c 'import sys; print(sys.prefix)'",
    "git add -A && git commit -qm 'Say hullo'",
    "git branch feature && git checkout -q feature",
    "printf 'X = 1\\n' > src/extra.py && git add src/extra.py && git commit -qm extra",
    "git checkout -q -",
    "git branch -D feature",
    "find . -name '*.pyc' -delete",
    "rm -rf build/",
    "rm -rf .venv",
    "make clean",
    "git clean -fdX",
    "tar czf \"$TMPDIR/src.tgz\" src && tar tzf \"$TMPDIR/src.tgz\" | sort",
    "git log -3",
    "git show --stat HEAD",
    "man ls | head -3",
    "git status --short",
]


def _project(work):
    project = work / "proj"
    (project / "src").mkdir(parents=True)
    (project / "tests").mkdir()
    (project / "README.md").write_text("A small project.\n")
    (project / "src" / "app.py").write_text("def greet():\n    return 'hello'   \n")
    (project / "tests" / "test_app.py").write_text(
        "import sys, unittest\nsys.path.insert(0, 'src')\nimport app\n\n"
        "class T(unittest.TestCase):\n    def test_greet(self):\n        self.assertTrue(app.greet())\n")
    (project / "Makefile").write_text(
        "build:\n\tmkdir -p build && python3 -m compileall -q -b src && cp src/*.pyc build/\n"
        "test:\n\tpython3 -m unittest discover -s tests -q\n"
        "clean:\n\trm -rf build src/*.pyc\n")
    (project / ".gitignore").write_text("build/\n.venv/\n__pycache__/\n*.pyc\n")
    env = {**os.environ, "GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com",
           "GIT_COMMITTER_NAME": "a", "GIT_COMMITTER_EMAIL": "a@example.com"}
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "first"]):
        subprocess.run(["git", *args], cwd=project, env=env, check=True)
    return project


def _snapshot(root, skip):
    """Every file under `root` but `skip`, with its size and modification time."""
    seen = {}
    for folder, dirs, files in os.walk(root):
        dirs[:] = [d for d in dirs if os.path.join(folder, d) != str(skip)]
        for name in files:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
            except FileNotFoundError:
                continue
            seen[path] = (st.st_size, st.st_mtime_ns)
    return seen


async def test_a_coding_session_runs_unasked_under_the_default_profile(home, tmp_path):
    work = tmp_path / "work"
    project = _project(work)
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
    }))
    env = gateway_env(home, None)
    # Git's identity for the commits, as a user's ~/.gitconfig would give it.
    env.update(GIT_AUTHOR_NAME="a", GIT_AUTHOR_EMAIL="a@example.com",
               GIT_COMMITTER_NAME="a", GIT_COMMITTER_EMAIL="a@example.com")
    before = _snapshot(tmp_path, work)
    asked = []

    async def allow_once(context, params):
        asked.append(params.message)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=env)
    info = types.Implementation(name="coding-session", version="1")
    ran, outputs, took = 0, {}, []
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", elicitation_callback=allow_once, client_info=info,
                          cache=None) as c:
            first = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                "command": f"cd {project}"}})
            assert not first.is_error, first
            for command in SESSION:
                started = time.monotonic()
                result = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                    "command": command, "timeout_ms": 60000}})
                took.append(time.monotonic() - started)
                body = "".join(b.text for b in result.content if getattr(b, "type", "") == "text")
                assert not result.is_error, f"{command}: {body}"
                value = json.loads(body)
                assert value["exit_code"] == 0 and not value["timed_out"], f"{command}: {value}"
                outputs[command] = value["stdout"]
                ran += 1
    print(f"\n30-command session: {len(asked)} questions, {ran} of {len(SESSION)} ran, "
          f"median {sorted(took)[len(took) // 2] * 1000:.0f} ms per command")
    assert asked == [], asked
    assert ran == len(SESSION) == 30
    # What the commands did happened in the project.
    assert "hullo" in (project / "src" / "app.py").read_text()
    assert not (project / "build").exists() and not (project / ".venv").exists()
    assert "src/app.py" in outputs["tar czf \"$TMPDIR/src.tgz\" src && tar tzf \"$TMPDIR/src.tgz\" | sort"]
    assert "Say hullo" in outputs["git log -3"]
    assert "feature" not in subprocess.run(["git", "branch"], cwd=project, capture_output=True, text=True).stdout
    # Nothing outside the allowed folder changed (the archive went to the box's own TMPDIR).
    after = _snapshot(tmp_path, work)
    changed = {p for p in set(before) | set(after) if before.get(p) != after.get(p)
               and not p.startswith(str(home))}
    assert changed == set(), changed


async def test_losing_work_is_asked_with_what_would_be_lost(home, tmp_path):
    work = tmp_path / "work"
    project = _project(work)
    (project / "notes.txt").write_text("only copy\n")
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
    }))
    asked = []
    answer = {"decision": "deny"}

    async def on_elicit(context, params):
        asked.append(params.message)
        if answer["decision"] == "deny":
            return types.ElicitResult(action="decline")
        return types.ElicitResult(action="accept", content=answer)

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, None))
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", elicitation_callback=on_elicit, cache=None) as c:
            run = lambda command: c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                "command": command, "working_dir": str(project)}})
            denied = await run("git clean -fd")
            assert denied.is_error and len(asked) == 1, asked
            assert "notes.txt" in asked[0] and "untracked" in asked[0], asked[0]
            assert (project / "notes.txt").exists()
            # Allowed once, it runs; the next time it is asked again (no grant covers it).
            answer["decision"] = "allow_once"
            (project / "draft.txt").write_text("also only copy\n")
            done = await run("git clean -fd")
            assert not done.is_error and not (project / "draft.txt").exists()
            (project / "draft.txt").write_text("again\n")
            await run("git clean -fd")
            assert len(asked) == 3, asked
            # A relative name is judged from where the session is now (after its own `cd`).
            answer["decision"] = "deny"
            (project / "notes.txt").write_text("written again\n")
            moved = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                "command": f"cd {project}"}})
            assert not moved.is_error
            kept = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                "command": "rm notes.txt"}})
            assert kept.is_error and "notes.txt" in asked[-1] and (project / "notes.txt").exists(), asked[-1]
            # A critical command outside what a box contains stays blocked by the default profile.
            pushed = await run("git push --force origin main")
            assert pushed.is_error and "blocked" in "".join(b.text for b in pushed.content), pushed
            # Hosts beyond the egress policy are asked, naming them.
            asked.clear()
            answer["decision"] = "deny"
            reach = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                "command": "true", "hosts": ["example.org"]}})
            assert reach.is_error and len(asked) == 1 and "example.org" in asked[0], asked


async def test_nothing_waits_on_a_pager_an_editor_or_a_prompt(home, tmp_path):
    work = tmp_path / "work"
    project = _project(work)
    for n in range(60):
        (project / "README.md").write_text(f"line {n}\n" * n)
        subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@e", "commit", "-qam", f"c{n}"],
                       cwd=project, check=False)
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
    }))
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, None))
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None) as c:
            for command, expect in [
                ("git log", "c59"),
                ("git log -p | head -400 >/dev/null; git diff HEAD~5 --stat", "README.md"),
                ("man ls | head -5", "LS(1)"),
                ("systemctl status --no-legend >/dev/null 2>&1; echo returned", "returned"),
                ("git commit --allow-empty; echo status=$?", "status=1"),
                ("read line; echo read=$?", "read=1"),
                ("git log --oneline -1 --color=auto | od -c | grep -c 033 || true", "0"),
            ]:
                result = await c.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute", "args": {
                    "command": command, "working_dir": str(project), "timeout_ms": 30000}})
                body = "".join(b.text for b in result.content if getattr(b, "type", "") == "text")
                assert not result.is_error, f"{command}: {body}"
                value = json.loads(body)
                assert not value["timed_out"], f"{command} waited: {value}"
                assert expect in value["stdout"], f"{command}: {value}"


async def test_a_new_host_is_asked_once_for_the_session_or_for_good(home, tmp_path):
    """A command naming a host beyond the egress policy is asked, with "for this session" and
    "always" offered besides Allow once; the answer is remembered for that host alone (not for
    the terminal), in the client's session or for good, and the host is reached through the
    proxy each time."""
    import http.server
    import threading

    served = tmp_path / "served"
    served.mkdir()
    (served / "hello.txt").write_text("hello through the gate")

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *a, **k):
            super().__init__(*a, directory=str(served), **k)

        def log_message(self, *a):
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Quiet)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host = f"127.0.0.1:{server.server_address[1]}"
    work = tmp_path / "work"
    work.mkdir()
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(work)]}},
    }))
    asked, offered = [], []
    answer = {"decision": "allow_session"}

    async def on_elicit(context, params):
        asked.append(params.message)
        offered.append(json.dumps(params.requested_schema))
        return types.ElicitResult(action="accept", content=answer)

    fetch = {"app": "local.terminal", "tool": "bash_execute", "args": {
        "command": f"curl -s -m 5 http://{host}/hello.txt", "working_dir": str(work), "hosts": [host]}}
    other = {"app": "local.terminal", "tool": "bash_execute", "args": {
        "command": "true", "working_dir": str(work), "hosts": ["example.org"]}}

    def said(result):
        body = "".join(b.text for b in result.content if getattr(b, "type", "") == "text")
        assert not result.is_error, body
        return json.loads(body)["stdout"]

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, None))
    try:
        with anyio.fail_after(TIMEOUT):
            async with Client(params, mode="legacy", elicitation_callback=on_elicit, cache=None) as c:
                assert said(await c.call_tool("aai_exec", fetch)) == "hello through the gate"
                assert len(asked) == 1 and host in asked[0], asked
                assert "for this session" in offered[0] and "Always allow reaching" in offered[0], offered
                # Allowed for the session: not asked again, and still reached.
                assert said(await c.call_tool("aai_exec", fetch)) == "hello through the gate"
                assert len(asked) == 1, asked
                # Another host is its own question: the answer covered that host alone.
                answer["decision"] = "deny"
                refused = await c.call_tool("aai_exec", other)
                assert refused.is_error and len(asked) == 2 and "example.org" in asked[1], asked
            # A new session asks again; "always" is remembered for good.
            async with Client(params, mode="legacy", elicitation_callback=on_elicit, cache=None) as c:
                answer["decision"] = "always_tool"
                assert said(await c.call_tool("aai_exec", fetch)) == "hello through the gate"
                assert len(asked) == 3, asked
            async with Client(params, mode="legacy", elicitation_callback=on_elicit, cache=None) as c:
                assert said(await c.call_tool("aai_exec", fetch)) == "hello through the gate"
                assert len(asked) == 3, asked
                # The grant is for the host, not the terminal: other hosts are still asked.
                answer["decision"] = "deny"
                assert (await c.call_tool("aai_exec", other)).is_error
                assert len(asked) == 4, asked
        listed = subprocess.run([str(GATEWAY), "consent", "list"], env=gateway_env(home, None),
                                capture_output=True, text=True, timeout=60)
        assert "local.egress" in listed.stdout and host in listed.stdout, listed
    finally:
        server.shutdown()
