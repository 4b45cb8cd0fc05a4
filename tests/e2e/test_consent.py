"""Consent through MCP elicitation, with the Python SDK's elicitation callback, and the
audit rows it leaves."""

import json
import subprocess

import anyio
import mcp.client.session as session_module
import mcp_types as types
import pytest
from mcp.client.client import Client
from mcp.client.stdio import StdioServerParameters

from conftest import GATEWAY, gateway_env, text

pytestmark = pytest.mark.anyio
TIMEOUT = 30
ADD = {"app": "org.aai.test", "tool": "add", "args": {"a": 40, "b": 2}}
HOSTILE = 'x" & (do shell script "id")'


def approval_config(home, **extra):
    config = {"policy": {"profiles": {"p": {"tool_overrides": {"org.aai.test:add": "require_approval"}}}, "default_profile": "p"}}
    config.update(extra)
    (home / "config.json").write_text(json.dumps(config))


def client(home, bus, version, monkeypatch, answers, asked, name="tester"):
    async def on_elicit(context, params):
        asked.append(params.message)
        answer = answers.pop(0)
        if answer in ("decline", "cancel"):
            return types.ElicitResult(action=answer)
        return types.ElicitResult(action="accept", content={"decision": answer})

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    info = types.Implementation(name=name, version="1")
    if version == "2026-07-28":
        return Client(params, mode=version, elicitation_callback=on_elicit, client_info=info, cache=None)
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", version)
    return Client(params, mode="legacy", elicitation_callback=on_elicit, client_info=info, cache=None)



def audit(home, *args):
    out = subprocess.run([str(GATEWAY), "audit", *args], env=gateway_env(home, None), capture_output=True, text=True, timeout=30)
    return out.stdout


@pytest.mark.parametrize("version", ["2025-06-18", "2025-11-25"])
async def test_elicitation_accept_decline_cancel(home, bus, version, monkeypatch):
    approval_config(home)
    asked = []
    answers = ["decline", "cancel", "deny", "always_tool"]
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, version, monkeypatch, answers, asked) as c:
            for expected in ["the user said no", "the user cancelled", "the user chose Deny"]:
                result = await c.call_tool("aai_exec", ADD)
                assert result.is_error and result.structured_content["type"] == "PERMISSION_DENIED", text(result)
                message = result.structured_content["message"]
                assert expected in message
                # Said once: not "declined … (the user declined)".
                assert message.count("declined") == 1, message
                # The agent is told not to ask again, and not sent to the user with a command.
                assert "Do not ask again" in message and "consent grant" not in message, message
                assert result.structured_content["detail"]["reason"] == "user_declined"
            result = await c.call_tool("aai_exec", ADD)
            assert not result.is_error and text(result) == "42"
            # Remembered: no question the second time.
            assert text(await c.call_tool("aai_exec", ADD)) == "42"
    assert len(asked) == 4
    assert "Allow tester to run \"add\" in Test Service (org.aai.test)?" in asked[0]
    assert "Risk: medium" in asked[0]

    # The grant belongs to that client only.
    other_asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, version, monkeypatch, ["decline"], other_asked, name="someone-else") as c:
            assert (await c.call_tool("aai_exec", ADD)).is_error
    assert len(other_asked) == 1

    rows = [json.loads(line) for line in audit(home, "export").splitlines()]
    results = [(r["caller"], r["decision"], r["result"]) for r in rows if r["tool"] == "add"]
    assert results == [
        ("tester", "require_approval", "denied"),
        ("tester", "require_approval", "denied"),
        ("tester", "require_approval", "denied"),
        ("tester", "require_approval:allowed_always_tool", "started"),
        ("tester", "require_approval:allowed_always_tool", "success"),
        ("tester", "require_approval:granted", "started"),
        ("tester", "require_approval:granted", "success"),
        ("someone-else", "require_approval", "denied"),
    ]
    assert "ok: 8 rows" in audit(home, "verify")


async def test_allow_all_operations_of_the_app(home, bus, monkeypatch):
    approval_config(home)
    (home / "config.json").write_text(json.dumps({"policy": {"default_profile": "observe"}}))
    asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["always_app"], asked) as c:
            assert text(await c.call_tool("aai_exec", ADD)) == "42"
            assert text(await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "x"}})) == "x"
    assert len(asked) == 1


async def test_stateless_consent_through_input_required(home, bus, monkeypatch):
    approval_config(home)
    asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2026-07-28", monkeypatch, ["decline", "always_tool"], asked) as c:
            result = await c.call_tool("aai_exec", ADD)
            assert result.is_error and "the user said no" in result.structured_content["message"]
            result = await c.call_tool("aai_exec", ADD)
            assert text(result) == "42"
            assert text(await c.call_tool("aai_exec", ADD)) == "42"  # remembered
    assert len(asked) == 2 and "Allow tester to run" in asked[0]


async def test_tampered_and_replayed_approval_states_are_refused(home, bus, monkeypatch):
    approval_config(home)
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2026-07-28", monkeypatch, [], []) as c:
            first = await c.session.call_tool("aai_exec", ADD, allow_input_required=True)
            assert first.result_type == "input_required", first
            state = first.request_state
            (key,) = first.input_requests.keys()
            allow = {key: {"action": "accept", "content": {"decision": "always_tool"}}}
            deny = {key: {"action": "accept", "content": {"decision": "deny"}}}

            tampered = state[:-4] + ("AAAA" if not state.endswith("AAAA") else "BBBB")
            result = await c.call_tool("aai_exec", ADD, input_responses=allow, request_state=tampered)
            assert result.is_error and "altered or has expired" in result.structured_content["message"]

            # Bound to the exact call: other arguments cannot reuse it.
            other = dict(ADD, args={"a": 1, "b": 1})
            result = await c.call_tool("aai_exec", other, input_responses=allow, request_state=state)
            assert result.is_error and "belongs to another call" in result.structured_content["message"]

            result = await c.call_tool("aai_exec", ADD, input_responses=deny, request_state=state)
            assert result.is_error and "the user chose Deny" in result.structured_content["message"]
            # Answering the same state again, now with "allow", is a replay.
            result = await c.call_tool("aai_exec", ADD, input_responses=allow, request_state=state)
            assert result.is_error and "already used" in result.structured_content["message"]
    grants = subprocess.run([str(GATEWAY), "consent", "list"], env=gateway_env(home, None), capture_output=True, text=True, timeout=30)
    assert "no grants" in grants.stdout


async def test_clients_without_elicitation_get_the_grant_command(home, bus, monkeypatch):
    approval_config(home)
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None) as c:
            result = await c.call_tool("aai_exec", ADD)
            assert result.is_error and "aai-gateway consent grant org.aai.test add --client mcp" in result.structured_content["message"]
            subprocess.run([str(GATEWAY), "consent", "grant", "org.aai.test", "add", "--client", "mcp"], env=gateway_env(home, None), check=True, timeout=30, capture_output=True)
            assert text(await c.call_tool("aai_exec", ADD)) == "42"


async def test_no_answer_in_time_is_a_denial(home, bus, monkeypatch):
    approval_config(home, consent_timeout_seconds=1)
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")

    async def never(context, params):
        await anyio.sleep(5)
        return types.ElicitResult(action="cancel")

    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", elicitation_callback=never, cache=None) as c:
            result = await c.call_tool("aai_exec", ADD)
            assert result.is_error and "no answer within 1 s" in result.structured_content["message"]
            assert "Do not ask again" in result.structured_content["message"]


async def test_progress_keeps_a_waiting_call_alive(home, bus, monkeypatch):
    approval_config(home)
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    progress = []

    async def slow_user(context, params):
        await anyio.sleep(5)
        return types.ElicitResult(action="accept", content={"decision": "allow_once"})

    async def on_progress(value, total, message):
        progress.append((value, message))

    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", elicitation_callback=slow_user, cache=None) as c:
            result = await c.call_tool("aai_exec", ADD, progress_callback=on_progress)
            assert text(result) == "42"
    assert len(progress) >= 2, progress
    assert progress[0][1].startswith("waiting for the user to approve")


@pytest.mark.parametrize("dialog,exit_code,stdout,expected", [
    ("zenity", 0, "Allow once\n", "42"),
    ("zenity", 0, "Always allow this app\n", "42"),
    ("zenity", 0, "Deny\n", "PERMISSION_DENIED"),
    ("zenity", 1, "", "PERMISSION_DENIED"),
    ("kdialog", 0, "allow_session\n", "42"),
    ("kdialog", 1, "", "PERMISSION_DENIED"),
])
async def test_native_dialog_without_elicitation(home, bus, tmp_path, monkeypatch, dialog, exit_code, stdout, expected):
    """A client without elicitation on a desktop session: the gateway runs the desktop's dialog
    program. A stand-in program records its argv and answers as the real one would."""
    config = {"policy": {"profiles": {"p": {"tool_overrides": {"org.aai.test:echo": "require_approval"}}}, "default_profile": "p"}}
    (home / "config.json").write_text(json.dumps(config))
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    record = tmp_path / "argv.json"
    script = bin_dir / dialog
    script.write_text(
        "#!/usr/bin/env python3\nimport json, sys\n"
        f"json.dump(sys.argv[1:], open({str(record)!r}, 'w'))\n"
        f"sys.stdout.write({stdout!r})\nsys.exit({exit_code})\n"
    )
    script.chmod(0o755)
    env = gateway_env(home, bus)
    env["DISPLAY"] = ":99"
    env["PATH"] = f"{bin_dir}:/usr/bin:/bin"
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=env)
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None) as c:
            result = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": HOSTILE}})
    body = text(result)
    assert body == HOSTILE if expected == "42" else result.structured_content["type"] == expected, body
    argv = json.loads(record.read_text())
    message = next(a for a in argv if "Allow mcp" in a)
    assert 'do shell script' in message  # the arguments are shown to the user, as data
    labels = ["Deny", "Allow once", "Allow this tool for this session", "Always allow this tool", "Always allow this app"]
    if dialog == "zenity":
        assert argv[-5:] == labels, argv
    else:
        assert [argv[i] for i in range(5, len(argv), 3)] == labels, argv


@pytest.mark.parametrize("roots,expect_denied", [(["file:///work/prod/api"], True), (["file:///work/sandbox"], False)])
async def test_profiles_by_client_roots(home, bus, monkeypatch, roots, expect_denied):
    (home / "config.json").write_text(json.dumps({"policy": {"rules": [{"root": "/work/prod", "profile": "observe"}]}}))
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")

    async def list_roots(context):
        return types.ListRootsResult(roots=[types.Root(uri=uri) for uri in roots])

    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", list_roots_callback=list_roots, cache=None) as c:
            result = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "r"}})
    if expect_denied:
        assert result.is_error and result.structured_content["detail"]["profile"] == "observe", text(result)
    else:
        assert text(result) == "r"


async def test_a_locked_audit_log_fails_calls_clearly_and_the_server_keeps_serving(home, bus, monkeypatch):
    import sqlite3

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    echo = {"app": "org.aai.test", "tool": "echo", "args": {"text": "e"}}
    with anyio.fail_after(TIMEOUT):
        async with Client(params, mode="legacy", cache=None) as c:
            assert text(await c.call_tool("aai_exec", echo)) == "e"  # data.db now exists
            lock = sqlite3.connect(home / "data.db", isolation_level=None)
            lock.execute("BEGIN EXCLUSIVE")
            try:
                result = await c.call_tool("aai_exec", echo)
                assert result.is_error and "audit log cannot be written" in result.structured_content["message"]
                assert "not run" in result.structured_content["message"]
            finally:
                lock.execute("ROLLBACK")
                lock.close()
            assert text(await c.call_tool("aai_exec", echo)) == "e"
    assert "chain intact" in audit(home, "verify")


ECHO = {"app": "org.aai.test", "tool": "echo", "args": {"text": "x"}}


def consent_list(home):
    out = subprocess.run([str(GATEWAY), "consent", "list"], env=gateway_env(home, None), capture_output=True, text=True, timeout=30)
    assert out.returncode == 0, out.stderr
    return out.stdout


@pytest.mark.parametrize("version", ["2025-11-25", "2026-07-28"])
async def test_the_question_offers_each_choice_in_order_and_names_the_client(home, bus, monkeypatch, version):
    approval_config(home)
    asked, forms = [], []

    async def on_elicit(context, params):
        forms.append(params.requested_schema)
        asked.append(params.message)
        return types.ElicitResult(action="decline")

    params = StdioServerParameters(command=str(GATEWAY), args=[], env=gateway_env(home, bus))
    info = types.Implementation(name="Cursor Agent", version="1")
    if version == "2026-07-28":
        c = Client(params, mode=version, elicitation_callback=on_elicit, client_info=info, cache=None)
    else:
        monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", version)
        c = Client(params, mode="legacy", elicitation_callback=on_elicit, client_info=info, cache=None)
    with anyio.fail_after(TIMEOUT):
        async with c:
            assert (await c.call_tool("aai_exec", ADD)).is_error
    decision = forms[0]["properties"]["decision"]
    assert decision["enum"] == ["deny", "allow_once", "allow_session", "always_tool", "always_app"]
    assert decision["enumNames"] == ["Deny", "Allow once", "Allow this tool for this session", "Always allow this tool", "Always allow this app"]
    assert "Cursor Agent" in asked[0]


async def test_allow_once_remembers_nothing(home, bus, monkeypatch):
    approval_config(home)
    asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["allow_once", "deny"], asked) as c:
            assert text(await c.call_tool("aai_exec", ADD)) == "42"
            # The same call again is asked again, and this time denied.
            result = await c.call_tool("aai_exec", ADD)
            assert result.is_error and "declined" in result.structured_content["message"]
    assert len(asked) == 2
    listed = consent_list(home)
    assert "no grants" in listed
    assert "client=tester org.aai.test:add  once" in listed, listed
    rows = [json.loads(line) for line in audit(home, "export").splitlines()]
    assert [r["decision"] for r in rows if r["tool"] == "add"][:2] == ["require_approval:allowed_once"] * 2


async def test_allow_for_this_session_ends_when_the_client_disconnects(home, bus, monkeypatch):
    approval_config(home)
    asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["allow_session"], asked) as c:
            assert text(await c.call_tool("aai_exec", ADD)) == "42"
            assert text(await c.call_tool("aai_exec", ADD)) == "42"  # not asked again
            listed = consent_list(home)
            assert "client=tester org.aai.test:add  session" in listed and "via elicitation" in listed, listed
    assert len(asked) == 1
    # Disconnected: the grant is gone, and a new session is asked again.
    assert "no grants" in consent_list(home)
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["deny"], asked) as c:
            assert (await c.call_tool("aai_exec", ADD)).is_error
    assert len(asked) == 2


async def test_always_grants_survive_restarts_and_are_listed_with_how_they_were_given(home, bus, monkeypatch):
    approval_config(home)
    asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["always_tool"], asked) as c:
            assert text(await c.call_tool("aai_exec", ADD)) == "42"
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, [], asked) as c:
            assert text(await c.call_tool("aai_exec", ADD)) == "42"
    assert len(asked) == 1
    listed = consent_list(home)
    assert "client=tester org.aai.test:add  always  since" in listed and "via elicitation" in listed, listed


async def test_an_answer_that_was_not_offered_is_refused(home, bus, monkeypatch):
    approval_config(home)
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["allow_tool"], []) as c:
            result = await c.call_tool("aai_exec", ADD)
            assert result.is_error and "was not offered" in result.structured_content["message"]
    assert "no grants" in consent_list(home)


def run_cli(home, *args):
    return subprocess.run([str(GATEWAY), *args], env=gateway_env(home, None), capture_output=True, text=True, timeout=30)


def test_consent_grant_and_revoke_refuse_what_does_not_exist(home, bus):
    approval_config(home)
    (home / "org.aai.test").mkdir(exist_ok=True)
    out = run_cli(home, "consent", "grant", "org.aai.tset", "--client", "c")
    assert out.returncode != 0 and "org.aai.test" in out.stderr, out.stderr
    out = run_cli(home, "consent", "grant", "org.aai.test", "ad", "--client", "c")
    assert out.returncode != 0 and 'Did you mean "add"' in out.stderr, out.stderr
    out = run_cli(home, "consent", "revoke", "org.nothing.here", "--client", "c")
    assert out.returncode != 0 and "No app" in out.stderr, out.stderr
    assert "no grants" in consent_list(home)
    out = run_cli(home, "consent", "grant", "org.aai.test", "add", "--client", "c")
    assert out.returncode == 0, out.stderr
    assert "client=c org.aai.test:add  always" in consent_list(home)
    assert "via cli" in consent_list(home)
    assert run_cli(home, "consent", "revoke", "org.aai.test", "add", "--client", "c").returncode == 0
    assert "no grants" in consent_list(home)


async def test_a_question_asked_because_the_config_is_broken_says_so(home, bus, monkeypatch):
    """A trailing comma (beside a `$comment` note) makes the gateway ask about every call: the
    question names that mistake, not the note."""
    (home / "config.json").write_text('{\n  "$comment": "my notes",\n  "timeout_seconds": 30,\n}\n')
    asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["allow_once"], asked) as c:
            echoed = await c.call_tool("aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "hi"}})
            assert not echoed.is_error, text(echoed)
    assert len(asked) == 1, asked
    assert "config.json is invalid" in asked[0] and "trailing comma" in asked[0], asked[0]
    assert "$comment" not in asked[0], asked[0]
