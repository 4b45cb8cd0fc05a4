"""The daemon's memory under session churn (issue 37), measured through the built binary:

- closed sessions: 10,000 Streamable HTTP sessions, each opened (initialize, initialized, one
  tools/list) and closed (DELETE) in turn; the daemon's resident set (VmRSS) and its peak
  (VmHWM) after 0, 100, 1,000, 2,000, 5,000 and 10,000;
- abandoned sessions: 500 more opened and left open; the resident set they add, per session.

The daemon lets one client send 200 requests a second (a session here is four), so the run
takes about four minutes.

Run: .venv/bin/python bench/churn.py [target/release/aai-gateway]
"""
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx2

GATEWAY = Path(sys.argv[1] if len(sys.argv) > 1 else "target/release/aai-gateway").resolve()
VERSION = "2025-11-25"


def memory(pid):
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmRSS", "VmHWM", "RssAnon"):
            fields[key] = int(value.split()[0])
    return fields


def start(home):
    (home / "config.json").write_text("{}")
    log = open(home.parent / "daemon.log", "a")
    env = {"AAI_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home.parent)}
    proc = subprocess.Popen([str(GATEWAY), "serve", "--listen", "127.0.0.1:0"], env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=log)
    info = home / "run" / "serve.json"
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            served = json.loads(info.read_text())
            if served["pid"] == proc.pid:
                break
        except (OSError, ValueError, KeyError):
            pass
        time.sleep(0.05)
    else:
        raise SystemExit("the daemon did not start")
    token = (home / "run" / "token").read_text().strip()
    return proc, served["url"], token


def send(call, *args, **kwargs):
    """One request, waiting out the daemon's rate limit (200 per second per client)."""
    while True:
        r = call(*args, **kwargs)
        if r.status_code != 429:
            return r
        time.sleep(float(r.headers.get("retry-after", "0.05") or 0.05))


def open_session(http, url):
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": VERSION, "capabilities": {}, "clientInfo": {"name": "churn", "version": "1"}}}
    r = send(http.post, url, json=init)
    r.raise_for_status()
    session = r.headers["mcp-session-id"]
    headers = {"mcp-session-id": session, "mcp-protocol-version": VERSION}
    send(http.post, url, json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
    send(http.post, url, json={"jsonrpc": "2.0", "id": 2, "method": "tools/list"}, headers=headers).raise_for_status()
    return headers


def main():
    with tempfile.TemporaryDirectory() as base:
        home = Path(base) / "home"
        home.mkdir()
        proc, url, token = start(home)
        try:
            headers = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
            with httpx2.Client(headers=headers, timeout=30) as http:
                print(f"| closed sessions | VmRSS MiB | VmHWM MiB | RssAnon MiB | seconds |")
                print(f"|---|---|---|---|---|")
                started = time.monotonic()
                done = 0
                for mark in (0, 100, 1000, 2000, 5000, 10000):
                    while done < mark:
                        session = open_session(http, url)
                        send(http.delete, url, headers=session)
                        done += 1
                    time.sleep(0.5)  # let the closed sessions' tasks end
                    m = memory(proc.pid)
                    print(f"| {mark:,} | {m['VmRSS'] / 1024:.1f} | {m['VmHWM'] / 1024:.1f} | "
                          f"{m['RssAnon'] / 1024:.1f} | {time.monotonic() - started:.1f} |")
                before = memory(proc.pid)["VmRSS"]
                for _ in range(500):
                    open_session(http, url)
                time.sleep(0.5)
                after = memory(proc.pid)["VmRSS"]
                print(f"\n500 abandoned sessions: +{(after - before) / 1024:.1f} MiB, "
                      f"{(after - before) / 500:.0f} KiB each")
        finally:
            proc.terminate()
            proc.wait(timeout=10)


if __name__ == "__main__":
    main()
