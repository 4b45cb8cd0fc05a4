"""The box's costs (issue 36), measured through the built binary:

- the launcher alone: `/bin/true` under `aai-gateway __contain` (view; view + egress) against
  `/bin/true` spawned directly, median of N runs;
- a command in a warm terminal session, through a real MCP client (`bash_execute true`);
- the egress proxy's added latency per request: `curl` of a file on a loopback HTTP server,
  N requests from inside the box (through the proxy, the server named in local.egress.allow)
  against the same requests from outside, medians.

Run: .venv/bin/python bench/box.py [target/release/aai-gateway]
"""
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import anyio
from mcp import StdioServerParameters
from mcp.client.session import ClientSession
from mcp.client.stdio import stdio_client

GATEWAY = Path(sys.argv[1] if len(sys.argv) > 1 else "target/release/aai-gateway").resolve()
N = 60


def median_ms(run, n=N):
    times = []
    for _ in range(n):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def launcher(base):
    home, work = base / "home", base / "work"
    for d in (home, work):
        d.mkdir(exist_ok=True)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    port = listener.getsockname()[1]
    common = [str(GATEWAY), "__contain", "--home", str(home), "--write", str(work), "--temp", "/tmp"]
    quiet = dict(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)
    direct = median_ms(lambda: subprocess.run(["/bin/true"], **quiet))
    view = median_ms(lambda: subprocess.run(common + ["--", "/bin/true"], **quiet))
    egress = median_ms(lambda: subprocess.run(common + ["--egress", str(port), "--", "/bin/true"], **quiet))
    listener.close()
    return direct, view, egress


class Quiet(SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


async def through_gateway(base):
    served = base / "served"
    served.mkdir()
    (served / "f.txt").write_text("x" * 1024)
    handler = lambda *a, **k: Quiet(*a, directory=str(served), **k)  # noqa: E731
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    port = server.server_address[1]
    home = base / "aai"
    home.mkdir()
    (home / "config.json").write_text(json.dumps({
        "policy": {"default_profile": "auto", "profiles": {"auto": {"preset": "full_auto"}}},
        "local": {"sandbox": {"allowed_directories": [str(base / "work")]},
                  "egress": {"allow": [f"127.0.0.1:{port}"]}},
    }))
    env = {**os.environ, "AAI_HOME": str(home)}
    env.pop("DISPLAY", None)
    url = f"http://127.0.0.1:{port}/f.txt"
    loop = f"for i in $(seq {N}); do curl -s -o /dev/null -w '%{{time_total}}\\n' {url}; done"
    outside = subprocess.run(["sh", "-c", loop.replace("curl -s", "curl -s --noproxy '*'")],
                             capture_output=True, text=True).stdout.split()
    params = StdioServerParameters(command=str(GATEWAY), args=[], env=env)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as session:
        await session.initialize()

        async def bash(command):
            result = await session.call_tool("aai_exec", {"app": "local.terminal", "tool": "bash_execute",
                                                          "args": {"command": command}})
            return json.loads(result.content[0].text) if result.content else {}

        await bash("true")
        warm = []
        for _ in range(N):
            start = time.perf_counter()
            await bash("true")
            warm.append((time.perf_counter() - start) * 1000)
        inside = (await bash(loop)).get("stdout", "").split()
    server.shutdown()
    median = lambda xs: statistics.median(float(x) * 1000 for x in xs)  # noqa: E731
    return statistics.median(warm), median(outside), median(inside), len(inside)


def main():
    with tempfile.TemporaryDirectory(prefix="aai-bench-box-") as tmp:
        base = Path(tmp)
        (base / "work").mkdir()
        direct, view, egress = launcher(base)
        print(f"/bin/true directly: {direct:.2f} ms; under the launcher (view): {view:.2f} ms "
              f"(+{view - direct:.2f}); view + egress: {egress:.2f} ms (+{egress - direct:.2f})")
        warm, outside, inside, n = anyio.run(through_gateway, base)
        print(f"bash_execute `true` in a warm session, through an MCP client: {warm:.2f} ms")
        print(f"curl of 1 KiB from loopback: directly {outside:.2f} ms, from the box through the proxy "
              f"{inside:.2f} ms (+{inside - outside:.2f} per request; {n} requests)")


if __name__ == "__main__":
    main()
