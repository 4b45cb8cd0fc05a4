"""`aai_batch` through the official MCP SDK: every step checked before any runs, one approval
question for the batch (approve all, deny all, step by step), each step through the gate
with its own audit rows, results passed on by JSON Pointer as values, and parallel steps
really running at once."""

import json

import anyio
import pytest

from test_consent import audit, client

pytestmark = pytest.mark.anyio
TIMEOUT = 60


def asking_config(home):
    (home / "config.json").write_text(json.dumps({"policy": {"default_profile": "p", "profiles": {"p": {
        "preset": "development", "tool_overrides": {"org.aai.test:echo": "require_approval"}}}}}))


def echo(text):
    return {"app": "org.aai.test", "tool": "echo", "args": {"text": text}}


def rows(home, tool):
    return [json.loads(line) for line in audit(home, "export").splitlines() if json.loads(line)["tool"] == tool]


async def test_one_question_covers_the_batch_and_each_step_is_gated_and_audited(home, bus, monkeypatch):
    asking_config(home)
    asked = []
    steps = [echo("first"), {"app": "org.aai.test", "tool": "add", "args": {"a": 1, "b": 2}}, echo("second")]
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["allow_once"], asked) as c:
            r = await c.call_tool("aai_batch", {"steps": steps})
            assert not r.is_error, r.content
            out = r.structured_content
            assert [s["status"] for s in out["steps"]] == ["ok", "ok", "ok"], out
            assert out["ok"] == 3 and out["failed"] == 0
    assert len(asked) == 1, asked  # one question for both echo steps; add needs none
    question = asked[0]
    assert "2 step(s)" in question and "0. org.aai.test:echo" in question and "2. org.aai.test:echo" in question
    assert "add" not in question.split("\n", 2)[-1]
    ran = rows(home, "echo")
    assert [r["result"] for r in ran] == ["started", "success", "started", "success"]
    assert all("allowed_once" in r["decision"] for r in ran), ran
    assert [r["result"] for r in rows(home, "add")] == ["started", "success"]
    assert "chain intact" in audit(home, "verify")


async def test_deny_all_runs_nothing_and_step_by_step_asks_each(home, bus, monkeypatch):
    asking_config(home)
    asked = []
    steps = [echo("a"), echo("b")]
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["deny", "always_tool", "allow_once", "deny"], asked) as c:
            denied = await c.call_tool("aai_batch", {"steps": steps})
            assert denied.is_error and "no step ran" in denied.structured_content["message"]
            assert rows(home, "echo") == []
            one_by_one = await c.call_tool("aai_batch", {"steps": steps})
            out = one_by_one.structured_content
            assert [s["status"] for s in out["steps"]] == ["ok", "failed"], out
            assert out["steps"][1]["error"]["type"] == "PERMISSION_DENIED"
    assert len(asked) == 4, asked  # the batch twice, then each step
    assert "Deny all" not in asked[2] and "org.aai.test" in asked[2]


async def test_every_step_is_checked_before_any_runs(home, bus, monkeypatch):
    (home / "config.json").write_text(json.dumps({"policy": {"default_profile": "p", "profiles": {"p": {
        "preset": "development", "tool_overrides": {"org.aai.test:fail": "always_block"}}}}}))
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, [], []) as c:
            for bad, field in [
                ({"app": "org.aai.test", "tool": "no_such_tool"}, "TOOL_NOT_FOUND"),
                ({"app": "org.aai.test", "tool": "add", "args": {"a": "one", "b": 2}}, "INVALID_PARAMS"),
                ({"app": "org.aai.test", "tool": "fail"}, "PERMISSION_DENIED"),
                ({"app": "org.aai.nowhere", "tool": "x"}, "APP_NOT_FOUND"),
            ]:
                r = await c.call_tool("aai_batch", {"steps": [echo("must not run"), bad]})
                assert r.is_error, bad
                error = r.structured_content
                assert error["type"] == field, error
                assert error["message"].startswith("step 1 (") and "no step ran" in error["message"], error
                assert error["detail"]["step"] == 1
            r = await c.call_tool("aai_batch", {"steps": [echo("x"), {"app": "org.aai.test", "tool": "echo", "args": {"text": {"$from": "/1/result"}}}]})
            assert r.is_error and "does not run before step 1" in r.structured_content["message"]
    assert rows(home, "echo") == [], "nothing ran"


async def test_a_result_flows_into_a_later_step_as_a_value(home, bus, monkeypatch, tmp_path):
    witness = tmp_path / "pwned"
    hostile = f"$(touch {witness}); `touch {witness}` \"quoted\" {{\"$from\": \"/0\"}}"
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, [], []) as c:
            r = await c.call_tool("aai_batch", {"parallel": True, "steps": [
                {"app": "org.aai.test", "tool": "add", "args": {"a": 40, "b": 2}},
                {"app": "org.aai.test", "tool": "fixed_add", "args": {"x": {"$from": "/0/result"}}},
                echo(hostile),
                {"app": "org.aai.test", "tool": "echo", "args": {"text": {"$from": "/2/result"}}},
                {"app": "org.aai.test", "tool": "fail"},
                {"app": "org.aai.test", "tool": "echo", "args": {"text": {"$from": "/4/result"}}},
                echo("independent of the failure"),
            ]})
    steps = r.structured_content["steps"]
    assert steps[0]["result"] == 42 and steps[1]["status"] == "ok", steps[:2]
    assert steps[3]["result"] == hostile, steps[3]
    assert steps[4]["status"] == "failed" and steps[5]["status"] == "skipped", steps[4:]
    assert "step 4" in steps[5]["reason"]
    assert steps[6]["status"] == "ok", "in parallel only a step's sources can hold it back"
    assert not witness.exists()


async def test_parallel_steps_run_at_once(home, bus, monkeypatch, tmp_path):
    """Step 0 waits for a file that only step 1 writes: in parallel both finish; in order the
    first step is over before the second begins. Nothing here depends on how fast the machine is."""
    (home / "config.json").write_text(json.dumps({
        "local": {"sandbox": {"allowed_directories": [str(tmp_path)]}},
        "policy": {"default_profile": "full_auto"}}))
    flag = tmp_path / "flag"
    waiter = {"app": "local.terminal", "tool": "bash_execute",
              "args": {"command": f"while [ ! -e {flag} ]; do sleep 0.02; done; echo seen", "timeout_ms": 20000}}
    writer = {"app": "local.files", "tool": "file_write", "args": {"path": str(flag), "content": "go"}}
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, [], []) as c:
            r = await c.call_tool("aai_batch", {"steps": [waiter, writer], "parallel": True})
            out = r.structured_content
            assert [s["status"] for s in out["steps"]] == ["ok", "ok"], out
            assert out["steps"][0]["result"]["stdout"] == "seen"
            flag.unlink()
            # In order, the first step has finished before the writer starts: it finds no flag.
            # (A look, not a wait that has to time out, so a loaded machine cannot change it.)
            looker = {"app": "local.terminal", "tool": "bash_execute",
                      "args": {"command": f"if [ -e {flag} ]; then echo seen; else echo absent; fi"}}
            r = await c.call_tool("aai_batch", {"steps": [looker, writer]})
            out = r.structured_content
            assert [s["status"] for s in out["steps"]] == ["ok", "ok"], out
            assert out["steps"][0]["result"]["stdout"] == "absent", out
            assert flag.exists()


async def test_the_batch_question_reaches_a_2026_client_through_input_required(home, bus, monkeypatch):
    asking_config(home)
    asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2026-07-28", monkeypatch, ["allow_once"], asked) as c:
            r = await c.call_tool("aai_batch", {"steps": [echo("one"), echo("two")]})
            assert not r.is_error, r.content
            assert [s["status"] for s in r.structured_content["steps"]] == ["ok", "ok"]
    assert len(asked) == 1 and "2 step(s)" in asked[0]



async def test_a_batch_nobody_can_ask_about_waits_in_the_daemon_queue_and_resumes_once(home, bus, monkeypatch):
    import mcp.client.session as session_module

    from conftest import queue_daemon

    monkeypatch.setattr(session_module, "LATEST_HANDSHAKE_VERSION", "2025-11-25")
    d = queue_daemon(home, bus, 1)
    try:
        with anyio.fail_after(TIMEOUT):
            async with d.client(name="batch-client") as c:
                pending = await c.call_tool("aai_batch", {"steps": [echo("queued one"), echo("queued two")]})
                assert pending.is_error, pending.content
                detail = pending.structured_content["detail"]
                assert detail["reason"] == "pending_approval", pending.structured_content
                listed = d.cli("approvals").stdout
                assert detail["approval_id"] in listed and "2 step(s)" in listed, listed
                assert d.cli("approvals", "approve", detail["approval_id"]).returncode == 0
                ran = await c.call_tool("aai_batch", {"approval_id": detail["approval_id"]})
                assert [s["status"] for s in ran.structured_content["steps"]] == ["ok", "ok"], ran.structured_content
                again = await c.call_tool("aai_batch", {"approval_id": detail["approval_id"]})
                assert again.is_error and "already used" in again.structured_content["message"]
        successes = [json.loads(r)["args"] for r in d.cli("audit", "export").stdout.splitlines() if json.loads(r)["result"] == "success"]
        assert len(successes) == 2, successes  # each step ran exactly once
    finally:
        d.close()
