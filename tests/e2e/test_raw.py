"""The gateway at the byte level: stdout carries only JSON-RPC frames, and bad input gets an
error while the next valid call still succeeds."""

import json
import os
import selectors
import shutil
import subprocess
import threading
import time

from conftest import EXAMPLES, GATEWAY, descriptor_doc, gateway_env, install

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "1"}}}


class Raw:
    """A gateway process spoken to line by line."""

    def __init__(self, home, bus=None, args=(), drain_stderr=True, extra_env=None):
        env = {**gateway_env(home, bus), **(extra_env or {})}
        self.proc = subprocess.Popen([str(GATEWAY), *args], env=env,
                                     stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        self.selector = selectors.DefaultSelector()
        self.selector.register(self.proc.stdout, selectors.EVENT_READ)
        self.lines = []
        self.buffer = b""
        self.stderr = []
        self.stderr_reader = threading.Thread(target=lambda: self.stderr.append(self.proc.stderr.read()), daemon=True)
        if drain_stderr:
            self.stderr_reader.start()

    def send(self, message):
        data = message if isinstance(message, bytes) else json.dumps(message).encode()
        self.proc.stdin.write(data + b"\n")
        self.proc.stdin.flush()

    def read_frame(self, seconds=10):
        deadline = time.monotonic() + seconds
        while b"\n" not in self.buffer:
            left = deadline - time.monotonic()
            assert left > 0, "no frame from the gateway in time"
            if self.selector.select(timeout=left):
                chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
                assert chunk, "gateway closed stdout"
                self.buffer += chunk
        line, self.buffer = self.buffer.split(b"\n", 1)
        self.lines.append(line)
        return json.loads(line)

    def response(self, request_id, seconds=10):
        while True:
            frame = self.read_frame(seconds)
            if frame.get("id") == request_id and "method" not in frame:
                return frame

    def close(self):
        self.proc.stdin.close()
        rest = self.buffer
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline and self.selector.select(timeout=max(0.0, deadline - time.monotonic())):
            chunk = os.read(self.proc.stdout.fileno(), 1 << 20)
            if not chunk:
                break
            rest += chunk
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        if self.stderr_reader.is_alive():
            self.stderr_reader.join(timeout=10)
        self.lines.extend(l for l in rest.split(b"\n") if l)
        return self.proc.returncode, b"".join(self.stderr).decode(errors="replace")


def call(i, name, arguments):
    return {"jsonrpc": "2.0", "id": i, "method": "tools/call", "params": {"name": name, "arguments": arguments}}


def assert_all_frames(lines):
    for line in lines:
        frame = json.loads(line)
        assert frame.get("jsonrpc") == "2.0", line[:200]
        assert ("id" in frame) or ("method" in frame), line[:200]


def test_bad_input_gets_errors_and_the_session_continues(home, bus):
    gw = Raw(home, bus)
    # A request before initialize.
    gw.send({"jsonrpc": "2.0", "id": "early", "method": "tools/list"})
    early = gw.response("early")
    assert "Send `initialize` first" in early["error"]["message"]
    gw.send(INIT)
    assert gw.response(1)["result"]["serverInfo"]["name"] == "aai-gateway"
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    echo = lambda i, text="ok": call(i, "aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": text}})

    gw.send(b"this is not json")
    assert gw.read_frame()["error"]["code"] == -32700
    gw.send(echo(2))
    assert gw.response(2)["result"]["content"][0]["text"] == "ok"

    gw.send({"jsonrpc": "2.0", "id": 3, "method": "no/such/method"})
    assert gw.response(3)["error"]["code"] == -32601
    gw.send(echo(4))
    assert gw.response(4)["result"]["content"][0]["text"] == "ok"

    gw.send({"jsonrpc": "2.0", "id": 5, "method": "tools/call", "params": "not an object"})
    assert gw.response(5)["error"]["code"] == -32602
    gw.send(call(6, "aai_exec", {"app": "org.aai.test", "tool": "add", "args": {"a": [1], "b": 2}}))
    wrong = gw.response(6)["result"]
    assert wrong["isError"] and wrong["structuredContent"]["type"] == "INVALID_PARAMS"
    gw.send(call(7, "aai_exec", {"app": 5, "tool": "echo"}))
    assert gw.response(7)["result"]["structuredContent"]["detail"]["field"] == "app"

    gw.send(echo(8, "x" * (10 * 1024 * 1024)))
    huge = gw.response(8, seconds=30)
    assert huge["error"]["code"] == -32600 and "limit" in huge["error"]["message"]
    gw.send(echo(9))
    assert gw.response(9)["result"]["content"][0]["text"] == "ok"

    code, stderr = gw.close()
    assert code == 0
    assert_all_frames(gw.lines)
    assert "aai-gateway serving MCP on stdio" in stderr  # logs go to stderr


def test_stdout_is_only_frames_even_with_debug_logs_and_broken_descriptors(home, bus):
    (home / "broken").mkdir()
    (home / "broken" / "aai.json").write_text("{ not json")
    gw = Raw(home, bus, args=["--log-level", "trace"])
    gw.send(INIT)
    gw.response(1)
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    gw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    names = [t["name"] for t in gw.response(2)["result"]["tools"]]
    assert "app_org_aai_test" in names
    gw.send(call(3, "app_org_aai_test", {}))
    gw.response(3)
    code, stderr = gw.close()
    assert code == 0
    assert_all_frames(gw.lines)
    assert "broken/aai.json" in stderr or "discovery finished" in stderr


def test_third_party_dbus_program_through_a_shipped_descriptor(home, bus):
    install(home, "org.freedesktop.DBus", json.loads((EXAMPLES / "org.freedesktop.DBus" / "aai.json").read_text()))
    gw = Raw(home, bus)
    gw.send(INIT)
    gw.response(1)
    gw.send(call(2, "aai_exec", {"app": "org.freedesktop.DBus", "tool": "list_names"}))
    names = json.loads(gw.response(2)["result"]["content"][0]["text"])
    assert "org.freedesktop.DBus" in names and "org.aai.Test" in names
    gw.send(call(3, "aai_exec", {"app": "org.freedesktop.DBus", "tool": "name_has_owner", "args": {"name": "org.aai.Test"}}))
    assert gw.response(3)["result"]["content"][0]["text"] == "true"
    gw.close()


def bulk_apps(tmp_path, count):
    huge = tmp_path / "huge"
    template = json.loads((EXAMPLES / "org.freedesktop.DBus" / "aai.json").read_text())
    for i in range(count):
        doc = dict(template, appId=f"org.example.bulk{i}", name=f"Bulk {i}")
        d = huge / f"org.example.bulk{i}"
        d.mkdir(parents=True)
        (d / "aai.json").write_text(json.dumps(doc))
    return huge


def first_listing(home, bus):
    """A fresh gateway's first tools/list: its app tools, and how many files it parsed."""
    gw = Raw(home, bus)
    gw.send(INIT)
    gw.response(1)
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    gw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    tools = [t["name"] for t in gw.response(2, seconds=60)["result"]["tools"]]
    gw.close()
    log = b"".join(gw.stderr).decode(errors="replace")
    parsed = [int(line.split("parsed=")[1].split()[0]) for line in log.splitlines() if "discovery finished" in line]
    return [t for t in tools if t.startswith("app_org_example_bulk")], parsed


def test_the_first_tools_list_holds_every_app_cold_and_warm(tmp_path, bus):
    """A client that ignores list_changed sees every app in its first tools/list: on a cold
    start the list waits for a scan that keeps progressing; on a warm start the descriptor
    cache answers without parsing a file. A changed file is parsed again, alone."""
    home = tmp_path / "home"
    home.mkdir()
    huge = bulk_apps(tmp_path, 3000)
    (home / "config.json").write_text(json.dumps({"paths": [str(huge)], "exposure": "full"}))
    cold, parsed = first_listing(home, bus)
    assert len(cold) == 3000, f"the first tools/list had {len(cold)} of 3000 apps"
    assert parsed[0] >= 3000, parsed
    assert (home / "cache" / "descriptors.json").exists()
    warm, parsed = first_listing(home, bus)
    assert warm == cold
    assert parsed[0] == 0, f"a warm start parsed {parsed[0]} files"
    changed = huge / "org.example.bulk7" / "aai.json"
    doc = json.loads(changed.read_text())
    changed.write_text(json.dumps(dict(doc, name="Bulk seven, renamed")))
    again, parsed = first_listing(home, bus)
    assert again == cold and parsed[0] == 1, parsed
    # A cache broken on disk is not trusted: everything is read again, and all is listed.
    cache = home / "cache" / "descriptors.json"
    cache.write_bytes(cache.read_bytes()[:-100] + b"garbage")
    rebuilt, parsed = first_listing(home, bus)
    assert rebuilt == cold and parsed[0] >= 3000, parsed


def test_a_stalled_scan_does_not_hold_up_tools_list_beyond_the_budget(tmp_path, bus):
    """`scan_budget_ms` is the longest the first tools/list waits without progress: at 1 ms
    it answers with what it has and the rest arrives with list_changed."""
    home = tmp_path / "home"
    home.mkdir()
    huge = bulk_apps(tmp_path, 6000)
    (home / "config.json").write_text(json.dumps({"paths": [str(huge)], "scan_budget_ms": 1, "exposure": "full"}))
    gw = Raw(home, bus)
    started = time.monotonic()
    gw.send(INIT)
    gw.response(1)
    init_seconds = time.monotonic() - started
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    gw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
    first = len(gw.response(2)["result"]["tools"])
    # The rest arrives later, announced by list_changed.
    deadline = time.monotonic() + 120
    request_id, count, notices = 3, first, 0
    while count < 6001:
        assert time.monotonic() < deadline, f"only {count} tools after 120 s"
        frame = gw.read_frame(seconds=120)
        if frame.get("method") == "notifications/tools/list_changed":
            notices += 1
            gw.send({"jsonrpc": "2.0", "id": request_id, "method": "tools/list"})
            count = len(gw.response(request_id, seconds=60)["result"]["tools"])
            request_id += 1
    gw.close()
    assert first < 6001, f"tools/list waited for the whole scan ({first} tools)"
    assert notices >= 1
    print(f"initialize answered in {init_seconds * 1000:.1f} ms; first tools/list had {first} tools; {notices} list_changed")


def test_a_client_that_never_reads_stderr_cannot_stall_the_server(home, bus):
    gw = Raw(home, bus, args=["--log-level", "trace"], drain_stderr=False)
    gw.send(INIT)
    gw.response(1)
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    # Each call logs kilobytes at trace level: far more than a pipe buffer holds.
    for i in range(2, 302):
        gw.send(call(i, "app_org_aai_test", {}))
        assert "- echo(text: string)" in gw.response(i)["result"]["content"][0]["text"]
    gw.proc.kill()
    gw.proc.wait(timeout=10)


def test_system_bus_descriptors_use_the_system_bus(tmp_path, home, bus):
    # A second private daemon stands in for the system bus; the session bus has no service.
    from conftest import Bus
    system = Bus(tmp_path)
    system.spawn_service("org.aai.SystemOnly")
    try:
        doc = descriptor_doc("org.aai.system", "org.aai.SystemOnly")
        doc["platforms"]["linux"]["bus"] = "system"
        install(home, "org.aai.system", doc)
        session_doc = descriptor_doc("org.aai.sessiononly", "org.aai.SystemOnly")
        install(home, "org.aai.sessiononly", session_doc)
        gw = Raw(home, bus, extra_env={"DBUS_SYSTEM_BUS_ADDRESS": system.address})
        gw.send(INIT)
        gw.response(1)
        gw.send(call(2, "aai_exec", {"app": "org.aai.system", "tool": "echo", "args": {"text": "via system"}}))
        assert gw.response(2)["result"]["content"][0]["text"] == "via system"
        gw.send(call(3, "aai_exec", {"app": "org.aai.sessiononly", "tool": "echo", "args": {"text": "x"}}))
        assert gw.response(3)["result"]["structuredContent"]["type"] == "APP_NOT_RUNNING"
        gw.close()
    finally:
        system.close()


def test_stateless_discover_and_per_request_meta(home, bus):
    gw = Raw(home, bus)
    meta = {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientInfo": {"name": "raw-2026", "version": "1"},
        "io.modelcontextprotocol/clientCapabilities": {},
    }
    gw.send({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}})
    discovered = gw.response(1)
    assert "2026-07-28" in discovered["result"]["supportedVersions"], discovered
    gw.send({"jsonrpc": "2.0", "id": 2, "method": "tools/list", "params": {"_meta": meta}})
    names = [t["name"] for t in gw.response(2)["result"]["tools"]]
    assert "app_org_aai_test" in names
    gw.send({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
             "params": {"_meta": meta, "name": "aai_exec", "arguments": {"app": "org.aai.test", "tool": "echo", "args": {"text": "stateless"}}}})
    result = gw.response(3)["result"]
    assert result["content"][0]["text"] == "stateless" and result.get("resultType", "complete") == "complete"
    # A request without the per-request metadata is refused with a clear error.
    gw.send({"jsonrpc": "2.0", "id": 4, "method": "tools/list", "params": {}})
    assert "error" in gw.response(4)
    code, _ = gw.close()
    assert code == 0
    assert_all_frames(gw.lines)


def test_sigkill_during_a_burst_loses_no_reported_call(home, bus):
    gw = Raw(home, bus, extra_env={"AAI_LOG": "warn"})
    gw.send(INIT)
    gw.response(1)
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    burst = b"".join(
        json.dumps(call(100 + i, "aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": f"burst-{i}"}})).encode() + b"\n"
        for i in range(1000)
    )
    writer = threading.Thread(target=lambda: (gw.proc.stdin.write(burst), gw.proc.stdin.flush()), daemon=True)
    writer.start()
    answered = set()
    while len(answered) < 300:
        frame = gw.read_frame(seconds=30)
        if frame.get("id", 0) >= 100 and "result" in frame:
            assert not frame["result"].get("isError"), frame["result"]["content"][0]["text"]
            answered.add(frame["result"]["content"][0]["text"])
    gw.proc.kill()  # SIGKILL, mid-burst
    gw.proc.wait(timeout=10)

    export = subprocess.run([str(GATEWAY), "audit", "export"], env=gateway_env(home, None), capture_output=True, text=True, timeout=60)
    rows = [json.loads(line) for line in export.stdout.splitlines()]
    succeeded = {json.loads(r["args"])["text"] for r in rows if r["tool"] == "echo" and r["result"] == "success"}
    missing = answered - succeeded
    assert not missing, f"{len(missing)} answered calls have no audit row, e.g. {sorted(missing)[:3]}"
    verify = subprocess.run([str(GATEWAY), "audit", "verify"], env=gateway_env(home, None), capture_output=True, text=True, timeout=60)
    assert verify.returncode == 0 and "chain intact" in verify.stdout, verify.stdout
    print(f"{len(answered)} answered before SIGKILL; {len(rows)} rows; {verify.stdout.strip()}")


def test_json_rpc_edge_cases_follow_the_spec(home, bus):
    """A second initialize is refused (identity cannot change), invalid ids get -32600 with a
    null id and are never echoed, duplicate keys are refused, bad params of a known method
    are -32602, and each request gets exactly one answer."""
    gw = Raw(home, bus)
    gw.send(INIT)
    assert gw.response(1)["result"]["serverInfo"]["name"] == "aai-gateway"
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    again = dict(INIT, id=2, params=dict(INIT["params"], clientInfo={"name": "someone-else", "version": "1"}))
    gw.send(again)
    refused = gw.response(2)
    assert refused["error"]["code"] == -32600 and "already initialized" in refused["error"]["message"]

    for raw_id in [b"{}", b"[1]", b"1.5", b"true"]:
        gw.send(b'{"jsonrpc":"2.0","id":' + raw_id + b',"method":"tools/list"}')
        frame = gw.read_frame()
        assert frame["id"] is None and frame["error"]["code"] == -32600, frame

    gw.send(b'{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"aai_exec","name":"app_x"}}')
    frame = gw.read_frame()
    assert frame["id"] is None and "appears twice" in frame["error"]["message"], frame

    gw.send({"jsonrpc": "2.0", "id": 10, "method": "resources/read", "params": {"uri": 5}})
    assert gw.response(10)["error"]["code"] == -32602

    # The identity is still the first one: the audit rows name it.
    gw.send(call(11, "aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "still"}}))
    assert gw.response(11)["result"]["content"][0]["text"] == "still"
    gw.close()
    answered = [json.loads(line).get("id") for line in gw.lines]
    assert answered.count(2) == 1 and answered.count(10) == 1 and answered.count(11) == 1
    out = subprocess.run([str(GATEWAY), "audit", "export"], env=gateway_env(home, None), capture_output=True, text=True, timeout=30)
    callers = {json.loads(line)["caller"] for line in out.stdout.splitlines()}
    assert callers == {"raw"}, callers


def test_a_reused_id_of_an_unanswered_request_is_refused(home, bus):
    """Each request gets exactly one answer by its id: a second request with the id of one
    still running is refused (under that id, saying it is not the first one's answer), and the
    id is free again once answered."""
    gw = Raw(home, bus)
    gw.send(INIT)
    gw.response(1)
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    gw.send(call(50, "aai_exec", {"app": "org.aai.test", "tool": "slow", "args": {"millis": 1500}}))
    gw.send(call(50, "aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "dup"}}))
    refused = gw.read_frame()
    assert refused["id"] == 50 and "has not been answered" in refused["error"]["message"], refused
    first = gw.response(50)
    assert "result" in first, first
    gw.send(call(50, "aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "again"}}))
    assert gw.response(50)["result"]["content"][0]["text"] == "again"
    gw.close()
    assert [json.loads(l).get("id") for l in gw.lines].count(50) == 3


def test_two_requests_with_one_id_in_one_write_are_answered_each(home, bus):
    """Two requests with one id in a single write: the first is answered, the second refused
    (under its id), never silence; then an id repeated while its request runs, in one write with a
    request of another id."""
    gw = Raw(home, bus)
    gw.send(INIT)
    gw.response(1)
    gw.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    slow = call(60, "aai_exec", {"app": "org.aai.test", "tool": "slow", "args": {"millis": 600}})
    dup = call(60, "aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "dup"}})
    other = call(61, "aai_exec", {"app": "org.aai.test", "tool": "echo", "args": {"text": "other"}})
    gw.send(b"\n".join(json.dumps(m).encode() for m in (slow, dup, other)))
    frames = []
    while len(frames) < 3:
        frame = gw.read_frame(20)
        if "method" not in frame:  # answers only, not the server's notifications
            frames.append(frame)
    refused = [f for f in frames if "error" in f]
    assert len(refused) == 1 and refused[0]["id"] == 60 and "has not been answered" in refused[0]["error"]["message"], frames
    assert next(f for f in frames if f.get("id") == 61)["result"]["content"][0]["text"] == "other"
    assert any("result" in f for f in frames if f.get("id") == 60), frames
    gw.close()
    assert [json.loads(l).get("id") for l in gw.lines].count(60) == 2
