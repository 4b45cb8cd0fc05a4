"""Traces the release gateway under callgrind through one bench workload, first on a cold
descriptor cache and then on the warm one it left, and writes the functions it ran as the
linker's symbol order (see run.sh): those of the warm session first (what a client starts on
every day), first run first, then those only the cold one ran."""
import bisect
import json
import os
import re
import shutil
import subprocess
import sys

work, bin_dir, link_map, out = sys.argv[1:5]
fixture = json.load(open("crates/test-support/fixtures/test-service.aai.json"))
home = os.path.join(work, "home")
if os.path.exists(home):
    shutil.rmtree(home)
for i in range(1000):
    doc = json.loads(json.dumps(fixture))
    doc["appId"], doc["name"] = f"org.example.bench{i}", f"Bench app {i}"
    os.makedirs(f"{home}/org.example.bench{i}")
    json.dump(doc, open(f"{home}/org.example.bench{i}/aai.json", "w"))
# Under valgrind a scan runs ~50× slower: the first tools/list may wait for it.
json.dump({"scan_budget_ms": 60000}, open(f"{home}/config.json", "w"))
service = subprocess.Popen([f"{bin_dir}/aai-test-dbus-service", fixture["platforms"]["linux"]["service"]],
                           stdout=subprocess.PIPE)
assert service.stdout.readline().strip() == b"ready"
gateway = os.path.abspath(f"{bin_dir}/aai-gateway")


def session(trace):
    """One client session: what a client does on every turn."""
    proc = subprocess.Popen(
        ["valgrind", "-q", "--tool=callgrind", f"--callgrind-out-file={trace}", "--dump-instr=yes",
         "--compress-pos=no", "--compress-strings=no", gateway],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=dict(os.environ, AAI_HOME=home, AAI_LOG="error"))
    ids = iter(range(1, 10**6))

    def request(method, params):
        rid = next(ids)
        proc.stdin.write((json.dumps({"jsonrpc": "2.0", "id": rid, "method": method, "params": params}) + "\n").encode())
        proc.stdin.flush()
        while True:
            message = json.loads(proc.stdout.readline())
            if message.get("id") == rid:
                return message

    request("initialize", {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "order", "version": "1"}})
    proc.stdin.write(b'{"jsonrpc":"2.0","method":"notifications/initialized"}\n')
    tools = [t["name"] for t in request("tools/list", {})["result"]["tools"] if t["name"].startswith("app_org_example")]
    request("resources/list", {})
    request("ping", {})
    for i in range(100):
        request("tools/call", {"name": tools[(i * 37) % len(tools)], "arguments": {}})
    for i in range(1000):
        app = f"org.example.bench{(i * 7) % len(tools)}"
        reply = request("tools/call", {"name": "aai_exec", "arguments": {"app": app, "tool": "echo", "args": {"text": "hello"}}})
        assert reply["result"]["content"][0]["text"] == "hello", reply
    proc.stdin.close()
    proc.wait(timeout=120)


traces = [os.path.join(work, f"callgrind.{kind}.out") for kind in ("cold", "warm")]
cache = os.path.join(home, "cache")
if os.path.exists(cache):
    shutil.rmtree(cache)
for trace in traces:
    session(trace)
service.kill()

# The map: each input section of .text with its address, size and first symbol.
functions, section = [], None
for line in open(link_map):
    m = re.match(r"^\s*([0-9a-f]+)\s+[0-9a-f]+\s+([0-9a-f]+)\s+(\d+)\s(.*)$", line.rstrip("\n"))
    if not m:
        continue
    vma, size, rest = int(m.group(1), 16), int(m.group(2), 16), m.group(4)
    if not rest.startswith(" "):
        section = rest.split()[0]
        continue
    if section != ".text":
        continue
    name = rest.strip()
    if ":(" in name:
        functions.append([vma, size, None])
    elif functions and functions[-1][2] is None and functions[-1][0] == vma:
        functions[-1][2] = name
functions = sorted(f for f in functions if f[2])
starts = [f[0] for f in functions]



def ran(trace):
    """The functions the gateway ran in one trace, first run first (callgrind reports the
    binary's own addresses)."""
    order, seen, current = [], set(), None
    for line in open(trace, errors="replace"):
        if line.startswith("ob="):
            current = line[3:].strip()
            continue
        if current == gateway and line.startswith("0x"):
            address = int(line.split()[0], 16)
            at = bisect.bisect_right(starts, address) - 1
            if at >= 0 and address < functions[at][0] + functions[at][1]:
                name = functions[at][2]
                if name not in seen:
                    seen.add(name)
                    order.append(name)
    return order


warm = ran(traces[1])
in_warm = set(warm)
order = warm + [name for name in ran(traces[0]) if name not in in_warm]
sizes = {f[2]: f[1] for f in functions}
open(out, "w").write("".join(name + "\n" for name in order))
print(f"{len(order)} functions ({sum(sizes[n] for n in order) / 1024:.0f} KiB of code) written to {out}, "
      f"{len(warm)} ({sum(sizes[n] for n in warm) / 1024:.0f} KiB) of the warm session first", file=sys.stderr)
