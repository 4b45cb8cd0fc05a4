"""`initialize` on a home's first start (issue 37): a home of N apps the gateway has never
started in (no `store/moved` marker, so the one-time housekeeping — store apps moved out of
the home, inline credentials moved to the store — has not run), spawn → `initialize`
answered, median of R runs (the marker is removed before each). Also the peak resident set
(VmHWM) of a plain run: initialize, tools/list, then the process's memory split into what its
files map (the binary, libraries) and its own (RssAnon).

Run: .venv/bin/python bench/first_start.py [target/release/aai-gateway ...]
"""
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

N = 10_000
R = 7


def descriptor(i):
    app = f"org.example.app{i}"
    return app, {"schema_version": "1.0", "appId": app, "name": f"App {i}", "description": "An app.",
                 "platforms": {"linux": {"automation": "dbus", "service": "org.example.App",
                                         "object": "/org/example/App", "interface": "org.example.App",
                                         "tools": [{"name": "ping", "description": "Ping", "method": "Ping"}]}}}


def request(proc, message):
    proc.stdin.write((json.dumps(message) + "\n").encode())
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            raise SystemExit("the gateway closed its output")
        reply = json.loads(line)
        if reply.get("id") == message["id"]:
            return reply


def memory(pid):
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("VmHWM", "VmRSS", "RssAnon", "RssFile"):
            fields[key] = int(value.split()[0]) / 1024
    return fields


def run(gateway, home, listing):
    env = {"AAI_HOME": str(home), "PATH": "/usr/bin:/bin", "HOME": str(home.parent), "AAI_LOG": "warn"}
    started = time.perf_counter()
    proc = subprocess.Popen([gateway], env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL)
    request(proc, {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "bench", "version": "1"}}})
    initialized = time.perf_counter() - started
    mem = None
    if listing:
        proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
        request(proc, {"jsonrpc": "2.0", "id": 2, "method": "tools/list"})
        mem = memory(proc.pid)
    proc.kill()
    proc.wait()
    return initialized, mem


def main():
    gateways = sys.argv[1:] or ["target/release/aai-gateway"]
    with tempfile.TemporaryDirectory() as base:
        home = Path(base) / "home"
        home.mkdir()
        (home / "config.json").write_text("{}")
        for i in range(N):
            app, doc = descriptor(i)
            (home / app).mkdir()
            (home / app / "aai.json").write_text(json.dumps(doc))
        for gateway in gateways:
            times = []
            for _ in range(R):
                shutil.rmtree(home / "store", ignore_errors=True)
                times.append(run(gateway, home, False)[0] * 1000)
            _, warm_mem = run(gateway, home, True)
            print(f"{gateway}: first start at {N:,} apps, spawn → initialize: median {statistics.median(times):.1f} ms "
                  f"(runs {', '.join(f'{t:.0f}' for t in sorted(times))})")
            print(f"  plain run (initialize + tools/list): VmHWM {warm_mem['VmHWM']:.1f} MiB, "
                  f"RssFile {warm_mem['RssFile']:.1f} MiB (the binary and libraries), RssAnon {warm_mem['RssAnon']:.1f} MiB (its own)")


if __name__ == "__main__":
    main()
