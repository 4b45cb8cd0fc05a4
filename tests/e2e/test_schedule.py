"""The scheduler in the daemon: exactly once across SIGKILL (killed mid-run in a loop),
checkpoints that resume at the first unfinished step without repeating a non-idempotent one,
catch-up policies, the task's policy layer (never waiting for a person unless it says so), the
hand-off to an agent command through the gateway's own MCP endpoint, the emergency stop pausing
it, and the tools agents add tasks with (risk high, asked)."""

import collections
import json
import os
import random
import sqlite3
import subprocess
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
import httpx2
import pytest

from conftest import GATEWAY, Daemon, gateway_env, install, wait_until
from test_consent import audit, client

TIMEOUT = 60


class Recorder:
    """A REST service on 127.0.0.1 that records every `POST /log/<key>/<step>` when it
    arrives. Steps named in `hold` wait (once per key) until `release` is set, so a test can
    kill the gateway while that step is in flight; every request takes `delay` seconds."""

    def __init__(self, delay=0.0, hold=(), fail_first=()):
        self.requests = []
        self.fail_first = set(fail_first)
        self.failed = set()
        self.lock = threading.Lock()
        self.arrived = threading.Condition(self.lock)
        self.delay = delay
        self.hold = set(hold)
        self.held = set()
        self.release = threading.Event()
        recorder = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args):
                pass

            def do_POST(self):
                length = int(self.headers.get("content-length") or 0)
                if length:
                    self.rfile.read(length)
                parts = self.path.strip("/").split("/")
                if len(parts) != 3 or parts[0] != "log":
                    self.send_response(404)
                    self.end_headers()
                    return
                key, step = urllib.parse.unquote(parts[1]), urllib.parse.unquote(parts[2])
                with recorder.arrived:
                    recorder.requests.append((key, step))
                    recorder.arrived.notify_all()
                    wait = step in recorder.hold and (key, step) not in recorder.held
                    recorder.held.add((key, step))
                    fail = step in recorder.fail_first and (key, step) not in recorder.failed
                    recorder.failed.add((key, step))
                if wait:
                    recorder.release.wait(30)
                time.sleep(recorder.delay)
                body = json.dumps({"logged": key, "step": step}).encode()
                try:
                    self.send_response(503 if fail else 200)
                    self.send_header("content-type", "application/json")
                    self.send_header("content-length", str(len(body)))
                    self.end_headers()
                    self.wfile.write(body)
                except OSError:
                    pass  # the gateway was killed while this step ran

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def count(self):
        with self.lock:
            return collections.Counter(self.requests)

    def wait_for(self, predicate, seconds, what):
        with self.arrived:
            assert self.arrived.wait_for(lambda: predicate(self.requests), seconds), what

    def close(self):
        self.release.set()
        self.server.shutdown()


@pytest.fixture
def recorder():
    made = []

    def make(**options):
        made.append(Recorder(**options))
        return made[-1]

    yield make
    for r in made:
        r.close()


def setup(home, rec, **scheduler):
    install(home, "org.aai.rec", {
        "schema_version": "1.0", "appId": "org.aai.rec", "name": "Recorder",
        "description": "Records what it is sent",
        "platforms": {"web": {"automation": "restapi", "base_url": f"http://127.0.0.1:{rec.port}", "auth": {"type": "none"},
                              "tools": [{"name": "log", "description": "Log a key", "risk": "medium", "method": "POST",
                                         "endpoint": "/log/${key}/${step}",
                                         "parameters": {"type": "object", "properties": {"key": {"type": "string"}, "step": {"type": "string"}},
                                                        "required": ["key", "step"]}}]}},
    })
    (home / "config.json").write_text(json.dumps({
        "web": {"allow_http_loopback": True},
        "scheduler": {"grace_seconds": 60, "retry_seconds": 1, **scheduler},
    }))


def log_step(step, **extra):
    return {"app": "org.aai.rec", "tool": "log", "args": {"key": {"$run": "/occurrence"}, "step": step}, **extra}


def workflow(home, name, steps):
    (home / "workflows").mkdir(exist_ok=True)
    (home / "workflows" / f"{name}.json").write_text(json.dumps({"description": name, "steps": steps}))


def cli(home, *args, timeout=30):
    return subprocess.run([str(GATEWAY), *args], env=gateway_env(home, None), capture_output=True, text=True,
                          timeout=timeout, stdin=subprocess.DEVNULL)


def ok(out):
    assert out.returncode == 0, out.stdout + out.stderr
    return out


def serve(home, tmp_path, env=None):
    """`aai-gateway serve` for `home`, its log in `tmp_path/daemon.log`."""
    return Daemon(home, env or gateway_env(home, None), log=tmp_path / "daemon.log")


def db(home):
    conn = sqlite3.connect(f"file:{home / 'data.db'}?mode=ro", uri=True, timeout=10)
    conn.row_factory = sqlite3.Row
    return conn


def runs(home, task):
    with db(home) as conn:
        return [dict(r) for r in conn.execute("SELECT * FROM schedule_runs WHERE task = ? ORDER BY scheduled_ms, id", (task,))]


def steps(home, run_id):
    with db(home) as conn:
        return {r["step"]: dict(r) for r in conn.execute("SELECT * FROM schedule_steps WHERE run = ?", (run_id,))}


def settled(home):
    with db(home) as conn:
        return conn.execute("SELECT count(*) FROM schedule_runs WHERE state IN ('pending', 'running')").fetchone()[0] == 0


def cursor(home, task):
    with db(home) as conn:
        return conn.execute("SELECT cursor_ms FROM schedule_tasks WHERE name = ?", (task,)).fetchone()[0]


def test_killing_the_daemon_mid_run_in_a_loop_runs_no_occurrence_twice_and_loses_none(home, tmp_path, recorder):
    rec = recorder(delay=0.12)
    setup(home, rec)
    # b may run twice (idempotent); a and c never.
    workflow(home, "tick", [log_step("a"), log_step("b", idempotent=True), log_step("c")])
    ok(cli(home, "schedule", "add", "tick", "--cron", "* * * * * *", "--time-zone", "UTC", "--workflow", "tick",
           "--grant", "org.aai.rec:log", "--catch-up", "all", "--overlap", "queue"))
    start = cursor(home, "tick")
    rng = random.Random(16)
    kills = 0
    for _ in range(8):
        daemon = serve(home, tmp_path)
        seen = len(rec.requests)
        # Killed while a step is in flight (or just after one answered), never at rest only.
        rec.wait_for(lambda r, seen=seen: len(r) > seen, 10, "a step reached the service")
        time.sleep(rng.uniform(0, 0.2))
        daemon.kill()
        kills += 1
    daemon = serve(home, tmp_path)
    try:
        ok(cli(home, "schedule", "disable", "tick"))
        wait_until(lambda: settled(home), 60, "every claimed run ended")
    finally:
        daemon.close()
    end = cursor(home, "tick")
    rows = runs(home, "tick")
    # None lost: every second in (start, end] was claimed, each exactly once.
    expected = list(range((start // 1000 + 1) * 1000, end + 1, 1000))
    assert [int(r["occurrence"]) for r in rows] == expected, (start, end, [r["occurrence"] for r in rows])
    assert len(expected) >= 3 and kills == 8
    counts = rec.count()
    interrupted = 0
    for row in rows:
        key = row["occurrence"]
        assert counts[(key, "a")] <= 1 and counts[(key, "c")] <= 1, (key, counts)
        recorded = steps(home, row["id"])
        if row["state"] == "succeeded":
            assert counts[(key, "a")] == 1 and counts[(key, "c")] == 1 and counts[(key, "b")] >= 1, (key, counts)
        else:
            assert row["state"] == "interrupted", row
            interrupted += 1
            cut = [s for s in recorded.values() if s["state"] == "interrupted"]
            assert len(cut) == 1 and json.loads(cut[0]["entry"])["step"] in (0, 2), recorded
    assert interrupted >= 1, "no kill landed in a non-idempotent step"
    # Nothing the service saw came from an occurrence the store does not know.
    assert {key for key, _ in counts} <= {r["occurrence"] for r in rows}


def test_a_run_resumes_at_its_first_unfinished_step_and_reports_what_it_would_repeat(home, tmp_path, recorder):
    rec = recorder(hold={"b"})
    setup(home, rec)
    workflow(home, "careful", [log_step("a"), log_step("b"), log_step("c")])
    workflow(home, "repeatable", [log_step("a"), log_step("b", idempotent=True), log_step("c")])
    for name in ("careful", "repeatable"):
        ok(cli(home, "schedule", "add", name, "--cron", "0 0 1 1 *", "--workflow", name, "--grant", "org.aai.rec:log"))
    for name in ("careful", "repeatable"):
        rec.release.clear()
        daemon = serve(home, tmp_path)
        try:
            before = len(rec.requests)
            ok(cli(home, "schedule", "run-now", name))
            rec.wait_for(lambda r, before=before: any(step == "b" for _, step in r[before:]), 20, f"{name}: step b in flight")
            daemon.kill()
        finally:
            daemon.close()
        rec.release.set()
        daemon = serve(home, tmp_path)
        try:
            wait_until(lambda: settled(home), 30, f"{name} resumed and ended")
        finally:
            daemon.close()
    counts = rec.count()
    careful, = runs(home, "careful")
    key = careful["occurrence"]
    assert careful["state"] == "interrupted"
    assert (counts[(key, "a")], counts[(key, "b")], counts[(key, "c")]) == (1, 1, 0), counts
    history = json.loads(ok(cli(home, "schedule", "history", "careful", "--json")).stdout)["runs"][0]
    assert [s["state"] for s in history["steps"]] == ["ok", "interrupted", "skipped"], history
    assert "not marked idempotent" in history["steps"][1]["error"]["message"]
    assert "not marked idempotent" in history["error"]["message"]
    assert history["steps"][0]["audit_ids"], history
    repeatable, = runs(home, "repeatable")
    key = repeatable["occurrence"]
    assert repeatable["state"] == "succeeded", repeatable
    assert (counts[(key, "a")], counts[(key, "b")], counts[(key, "c")]) == (1, 2, 1), counts
    # Each finished step's audit ids are rows of the audit log, by the task.
    rows = collections.defaultdict(list)
    for line in audit(home, "export").splitlines():
        row = json.loads(line)
        rows[row["call_id"]].append(row)
    for step in json.loads(ok(cli(home, "schedule", "history", "repeatable", "--json")).stdout)["runs"][0]["steps"]:
        assert step["audit_ids"], step
        for audit_id in step["audit_ids"]:
            assert {r["caller"] for r in rows[audit_id]} == {"schedule:repeatable"}
            assert rows[audit_id][-1]["result"] == "success"


def test_missed_occurrences_follow_catch_up(home, tmp_path, recorder):
    rec = recorder()
    setup(home, rec, grace_seconds=1)
    workflow(home, "mark", [{"app": "org.aai.rec", "tool": "log", "args": {"key": {"$run": "/occurrence"}, "step": {"$run": "/task"}}}])
    for policy in ("skip", "once", "all"):
        ok(cli(home, "schedule", "add", policy, "--cron", "* * * * * *", "--workflow", "mark", "--grant", "org.aai.rec:log",
               "--catch-up", policy, "--overlap", "queue"))
    added = {p: cursor(home, p) for p in ("skip", "once", "all")}
    time.sleep(4.2)  # the gateway is not running: at least three occurrences of each are missed
    daemon = serve(home, tmp_path)
    try:
        wait_until(lambda: all(any(r["kind"] == "on_time" for r in runs(home, p)) for p in added), 15, "on-time runs again")
        for p in added:
            ok(cli(home, "schedule", "disable", p))
        wait_until(lambda: settled(home), 30, "runs ended")
    finally:
        daemon.close()
    kinds = {p: collections.Counter(r["kind"] for r in runs(home, p)) for p in added}
    assert kinds["skip"]["catch_up"] == 0 and kinds["skip"]["missed"] == 1, kinds
    assert kinds["once"]["catch_up"] == 1 and kinds["once"]["missed"] == 1, kinds
    assert kinds["all"]["catch_up"] >= 3 and kinds["all"]["missed"] == 0, kinds
    missed = next(r for r in runs(home, "skip") if r["kind"] == "missed")
    assert missed["state"] == "skipped" and "catch_up is skip" in missed["outcome"]
    # `all` ran every second it missed, in order, with nothing between them lost.
    every = [int(r["occurrence"]) for r in runs(home, "all")]
    assert every == list(range((added["all"] // 1000 + 1) * 1000, every[-1] + 1, 1000)), every
    once = [r for r in runs(home, "once") if r["kind"] == "catch_up"][0]
    first_on_time = min(int(r["occurrence"]) for r in runs(home, "once") if r["kind"] == "on_time")
    assert int(once["occurrence"]) < first_on_time
    sent = {(k, s) for k, s in rec.requests}
    assert all((r["occurrence"], p) in sent for p in added for r in runs(home, p) if r["state"] == "succeeded")


def test_unattended_calls_never_wait_and_the_layer_only_tightens(home, tmp_path, recorder):
    rec = recorder()
    setup(home, rec)
    workflow(home, "send", [log_step("x")])
    (home / "config.json").write_text(json.dumps({
        "web": {"allow_http_loopback": True},
        "policy": {"default_profile": "p", "profiles": {"p": {"preset": "development", "tool_overrides": {"org.aai.rec:log": "always_block"}}}},
    }))
    cases = {
        "ungranted": (["--grant", "org.aai.rec:other"], "granted_tools do not include it"),
        "too-risky": (["--grant", "org.aai.rec:log", "--max-risk", "low"], "max_risk_level"),
        "blocked": (["--grant", "org.aai.rec:*", "--max-risk", "high"], "blocked by the policy profile"),
    }
    for name, (options, reason) in cases.items():
        ok(cli(home, "schedule", "add", name, "--cron", "0 0 1 1 *", "--workflow", "send", *options))
        started = time.monotonic()
        out = cli(home, "schedule", "run-now", name, "--json")
        assert out.returncode == 1 and time.monotonic() - started < 20, out.stdout + out.stderr
        report = json.loads(out.stdout)
        assert report["state"] == "failed" and reason in report["error"]["message"], (name, report)
    assert rec.requests == []
    # A task that says so waits in the approval queue for an ungranted call, and runs once
    # the user answers.
    (home / "config.json").write_text(json.dumps({"web": {"allow_http_loopback": True}, "scheduler": {"grace_seconds": 60}}))
    ok(cli(home, "schedule", "add", "asks", "--cron", "0 0 1 1 *", "--workflow", "send", "--on-approval", "queue"))
    daemon = serve(home, tmp_path)
    try:
        ok(cli(home, "schedule", "run-now", "asks"))
        waiting = []

        def queued():
            out = cli(home, "approvals")
            waiting[:] = [line.split()[0] for line in out.stdout.splitlines() if "org.aai.rec" in line and line.startswith("ap-")]
            return bool(waiting)

        wait_until(queued, 20, "the task's call waits in the approval queue")
        assert "schedule:asks" in cli(home, "approvals").stdout
        ok(cli(home, "approvals", "approve", waiting[0]))
        wait_until(lambda: settled(home), 20, "the run ended")
    finally:
        daemon.close()
    run, = runs(home, "asks")
    assert run["state"] == "succeeded", run
    assert [k for k, s in rec.requests] == [run["occurrence"]]


AGENT = r'''
import asyncio, json, os, sys
import httpx2
from mcp.client.client import Client
from mcp.client.streamable_http import streamable_http_client
from mcp.types import Implementation

instruction, config = sys.argv[1], json.load(open(sys.argv[2]))
server = config["mcpServers"]["aai-gateway"]

async def main():
    http = httpx2.AsyncClient(headers=server["headers"], timeout=30)
    async with Client(streamable_http_client(server["url"], http_client=http), mode="legacy", cache=None,
                      client_info=Implementation(name="fake-agent", version="1")) as c:
        done = await c.call_tool("aai_exec", {"app": "org.aai.rec", "tool": "log", "args": {"key": instruction, "step": "agent"}})
        refused = await c.call_tool("aai_exec", {"app": "local.system", "tool": "clipboard_write", "args": {"text": "x"}})
        # It runs contained: the gateway's home (its config beside run/) is read-only to it.
        home = os.path.dirname(os.path.dirname(os.path.abspath(sys.argv[2])))
        try:
            open(os.path.join(home, "config.json"), "a").write(" ")
            home_written = True
        except OSError:
            home_written = False
        print(json.dumps({"done": not done.is_error, "refused": refused.structured_content,
                          "home_written": home_written}))
        open(sys.argv[3], "w").write(server["headers"]["Authorization"])

asyncio.run(main())
'''


def test_an_agent_task_reaches_the_gateway_under_the_tasks_layer(home, tmp_path, recorder):
    rec = recorder()
    setup(home, rec)
    agent = tmp_path / "agent.py"
    agent.write_text(AGENT)
    # Made beforehand: the agent runs contained, and nothing new can be made directly in
    # tmp_path, which holds the gateway's home.
    (tmp_path / "out").mkdir()
    token_file = tmp_path / "out" / "token-used"
    config = json.loads((home / "config.json").read_text())
    # The agent runs in a box whose /tmp is its own: it writes the token in an allowed folder.
    config["local"] = {"sandbox": {"allowed_directories": [str(tmp_path / "out")]}}
    config["scheduler"]["agents"] = {"fake": {"command": [sys.executable, str(agent), "{instruction}", "{mcp_config}", str(token_file)],
                                              "timeout_seconds": 60}}
    (home / "config.json").write_text(json.dumps(config))
    ok(cli(home, "schedule", "add", "helper", "--cron", "0 0 1 1 *", "--agent", "fake", "--instruction", "tidy-up; rm -rf ~",
           "--grant", "org.aai.rec:log"))
    daemon = serve(home, tmp_path)
    try:
        report = json.loads(ok(cli(home, "schedule", "run-now", "helper", "--wait", "--json", timeout=90)).stdout)
        # The run's token no longer opens the gateway.
        token = token_file.read_text()
        refused = httpx2.post(daemon.url, headers={"Authorization": token, "Content-Type": "application/json",
                                                   "Accept": "application/json, text/event-stream"},
                              json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, timeout=10)
        assert refused.status_code == 401
    finally:
        daemon.close()
    assert report["state"] == "succeeded", report
    step = report["steps"][0]
    said = json.loads(step["output"])
    assert said["done"] is True
    assert said["home_written"] is False, said
    assert said["refused"]["type"] == "PERMISSION_DENIED" and "granted_tools" in said["refused"]["message"], said
    assert rec.requests == [("tidy-up; rm -rf ~", "agent")]
    rows = {r["call_id"]: r for r in (json.loads(line) for line in audit(home, "export").splitlines())}
    assert len(step["audit_ids"]) == 2
    assert all(rows[i]["caller"] == "schedule:helper" for i in step["audit_ids"])
    assert rows[step["audit_ids"][1]]["decision"] == "task_grant" and rows[step["audit_ids"][1]]["result"] == "denied"
    assert not list((home / "run").glob("task-*.mcp.json")), "the run's MCP config is removed"


def test_the_emergency_stop_pauses_the_scheduler(home, tmp_path, recorder):
    rec = recorder()
    setup(home, rec)
    workflow(home, "tick", [log_step("t")])
    ok(cli(home, "schedule", "add", "tick", "--cron", "* * * * * *", "--workflow", "tick", "--grant", "org.aai.rec:log",
           "--catch-up", "skip"))
    daemon = serve(home, tmp_path)
    try:
        rec.wait_for(lambda r: len(r) >= 1, 10, "a run before the stop")
        stop = cli(home, "stop")
        assert stop.returncode == 0, stop.stderr
        stopped_at = time.time() * 1000
        time.sleep(2.5)
        during = [r for r in runs(home, "tick") if r["started_ms"] and r["started_ms"] > stopped_at + 50]
        assert during == [], during
        count = len(rec.requests)
        ok(cli(home, "resume"))
        rec.wait_for(lambda r: len(r) > count, 10, "runs again after resume")
        ok(cli(home, "schedule", "disable", "tick"))
        wait_until(lambda: settled(home), 20, "runs ended")
    finally:
        daemon.close()


@pytest.mark.anyio
@pytest.mark.parametrize("answer", ["allow_once", "deny"])
async def test_agents_add_tasks_only_with_the_users_approval(home, bus, monkeypatch, answer, recorder):
    rec = recorder()
    setup(home, rec)
    workflow(home, "send", [log_step("x")])
    asked = []
    task = {"name": "from-agent", "cron": "0 9 * * 1-5", "time_zone": "Europe/Paris",
            "run": {"workflow": {"name": "send"}}, "granted_tools": ["org.aai.rec:log"]}
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, [answer], asked) as c:
            bad = await c.call_tool("aai_exec", {"app": "local.schedule", "tool": "schedule_add",
                                                 "args": {"task": {**task, "cron": "every day"}}})
            added = await c.call_tool("aai_exec", {"app": "local.schedule", "tool": "schedule_add", "args": {"task": task}})
    assert bad.is_error and "\"cron\"" in bad.structured_content["message"], bad.structured_content
    assert len(asked) == 1 and "risk high" in asked[0].lower().replace(":", ""), asked
    # The standing permission it gives is spelled out.
    assert "with no one asked for: org.aai.rec:log (up to medium risk)" in asked[0], asked
    listed = json.loads(ok(cli(home, "schedule", "list", "--json")).stdout)["tasks"]
    if answer == "deny":
        assert added.is_error and listed == []
        return
    assert not added.is_error, added.content
    assert added.structured_content["next_runs"][0].endswith("+01:00") or added.structured_content["next_runs"][0].endswith("+02:00")
    assert [t["name"] for t in listed] == ["from-agent"] and listed[0]["next_run"]


def test_overlap_policies_and_retries_that_resume_where_they_failed(home, tmp_path, recorder):
    rec = recorder(delay=1.5, fail_first={"flaky"})
    setup(home, rec)
    workflow(home, "slow", [{"app": "org.aai.rec", "tool": "log", "args": {"key": {"$run": "/occurrence"}, "step": {"$run": "/task"}}}])
    workflow(home, "flaky", [log_step("first"), log_step("flaky")])
    for name, overlap in (("skipper", "skip"), ("both", "allow")):
        ok(cli(home, "schedule", "add", name, "--cron", "* * * * * *", "--workflow", "slow", "--grant", "org.aai.rec:log",
               "--overlap", overlap))
    ok(cli(home, "schedule", "add", "again", "--cron", "0 0 1 1 *", "--workflow", "flaky", "--grant", "org.aai.rec:log",
           "--retries", "2"))
    daemon = serve(home, tmp_path)
    try:
        ok(cli(home, "schedule", "run-now", "again"))
        wait_until(lambda: sum(1 for r in runs(home, "skipper") if r["state"] == "skipped") >= 2
                   and sum(1 for r in runs(home, "both") if r["state"] == "succeeded") >= 3, 30, "overlapping occurrences")
        for name in ("skipper", "both"):
            ok(cli(home, "schedule", "disable", name))
        wait_until(lambda: settled(home), 30, "runs ended")
    finally:
        daemon.close()

    def spans(task):
        return sorted((r["started_ms"], r["finished_ms"]) for r in runs(home, task) if r["started_ms"])

    skipper = spans("skipper")
    assert all(a[1] <= b[0] for a, b in zip(skipper, skipper[1:])), "skip: never two runs at once"
    skipped = [r for r in runs(home, "skipper") if r["state"] == "skipped"]
    assert all("overlap" in json.loads(r["outcome"])["reason"] for r in skipped)
    both = spans("both")
    assert any(a[1] > b[0] for a, b in zip(both, both[1:])), "allow: runs overlap"
    retried, = runs(home, "again")
    assert retried["state"] == "succeeded" and retried["attempt"] == 2, retried
    counts = rec.count()
    key = retried["occurrence"]
    assert (counts[(key, "first")], counts[(key, "flaky")]) == (1, 2), counts
    # Removing a task keeps its history.
    ok(cli(home, "schedule", "remove", "again"))
    assert "again" not in [t["name"] for t in json.loads(ok(cli(home, "schedule", "list", "--json")).stdout)["tasks"]]
    assert json.loads(ok(cli(home, "schedule", "history", "again", "--json")).stdout)["runs"][0]["state"] == "succeeded"
    missing = cli(home, "schedule", "remove", "again")
    assert missing.returncode == 1 and "no scheduled task" in missing.stderr


@pytest.mark.anyio
async def test_under_full_auto_an_agent_still_cannot_enable_or_run_a_task_unasked(home, bus, monkeypatch, recorder):
    rec = recorder()
    setup(home, rec)
    config = json.loads((home / "config.json").read_text())
    config["policy"] = {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}}
    (home / "config.json").write_text(json.dumps(config))
    workflow(home, "send", [log_step("x")])
    ok(cli(home, "schedule", "add", "held", "--cron", "0 0 1 1 *", "--workflow", "send", "--grant", "org.aai.rec:log"))
    ok(cli(home, "schedule", "disable", "held"))
    asked = []
    with anyio.fail_after(TIMEOUT):
        async with client(home, bus, "2025-11-25", monkeypatch, ["deny", "deny"], asked) as c:
            enabled = await c.call_tool("aai_exec", {"app": "local.schedule", "tool": "schedule_enable", "args": {"name": "held"}})
            ran = await c.call_tool("aai_exec", {"app": "local.schedule", "tool": "schedule_run_now", "args": {"name": "held"}})
    assert enabled.is_error and ran.is_error, (enabled.content, ran.content)
    assert len(asked) == 2, asked
    assert "enables the task \"held\"" in asked[0] and "runs the task \"held\" now" in asked[1], asked
    listed = json.loads(ok(cli(home, "schedule", "list", "--json")).stdout)["tasks"]
    assert [t["enabled"] for t in listed] == [False], listed
    assert rec.requests == [], rec.requests
