"""A loopback HTTP/1.1 proxy that adds the daemon's bearer token to every request, for test
clients that cannot send headers of their own (the MCP conformance suite). A `Host` naming the
proxy is rewritten to the daemon's; any other `Host` is passed on as sent, so the daemon's
DNS-rebinding check still sees it (and likewise an `Origin`). Responses (SSE streams included) are piped unchanged."""

import asyncio
import threading


class AuthProxy:
    def __init__(self, upstream_host, upstream_port, token):
        self.upstream = (upstream_host, upstream_port)
        self.token = token
        self.loop = asyncio.new_event_loop()
        ready = threading.Event()
        self.thread = threading.Thread(target=self._run, args=(ready,), daemon=True)
        self.thread.start()
        assert ready.wait(10), "the proxy did not start"

    def _run(self, ready):
        asyncio.set_event_loop(self.loop)
        self.server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.port = self.server.sockets[0].getsockname()[1]
        self.names = {f"127.0.0.1:{self.port}", f"localhost:{self.port}"}
        ready.set()
        self.loop.run_forever()

    async def _serve(self, reader, writer):
        up_reader, up_writer = await asyncio.open_connection(*self.upstream)
        back = asyncio.ensure_future(self._pipe(up_reader, writer))
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")[:-2]
                out, length, chunked = [lines[0]], 0, False
                for line in lines[1:]:
                    name, _, value = line.partition(":")
                    key = name.strip().lower()
                    if key == "authorization":
                        continue
                    if key in ("host", "origin") and value.strip().removeprefix("http://") in self.names:
                        ours = f"{self.upstream[0]}:{self.upstream[1]}"
                        line = f"Host: {ours}" if key == "host" else f"Origin: http://{ours}"
                    if key == "content-length":
                        length = int(value.strip())
                    if key == "transfer-encoding" and "chunked" in value.lower():
                        chunked = True
                    out.append(line)
                out.append(f"Authorization: Bearer {self.token}")
                up_writer.write(("\r\n".join(out) + "\r\n\r\n").encode("latin-1"))
                if chunked:
                    while True:
                        size_line = await reader.readuntil(b"\r\n")
                        size = int(size_line.split(b";")[0], 16)
                        up_writer.write(size_line + await reader.readexactly(size + 2))
                        if size == 0:
                            break
                elif length:
                    up_writer.write(await reader.readexactly(length))
                await up_writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            up_writer.close()
            await asyncio.gather(back, return_exceptions=True)
            writer.close()

    @staticmethod
    async def _pipe(reader, writer):
        try:
            while chunk := await reader.read(65536):
                writer.write(chunk)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    def close(self):
        async def shut():
            self.server.close()
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        asyncio.run_coroutine_threadsafe(shut(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=10)
        self.loop.close()
