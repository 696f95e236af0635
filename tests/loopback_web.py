"""Test helpers for issue 4: an asyncio HTTP/1.1 server on loopback addresses, and a packet guard.

The server speaks just enough HTTP/1.1 (keep-alive, Content-Length or chunked bodies, streamed bodies, resets,
hangs) for fault tests and the crawl bench. The guard patches name resolution and socket connects so that a
test fails on any connection attempt outside 127.0.0.0/8 and ::1, even when the resource's own guard is broken.
"""

import asyncio
import contextlib
import ipaddress
import socket
import struct
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Self

# --------------------------------------------------------------------------- packet guard


def _is_loopback(host: str) -> bool:
    try:
        ip = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_loopback


class PacketGuard:
    """Only loopback connections and no DNS: fake names resolve through ``names``, everything else fails.

    ``violations`` lists every attempt to reach a non-loopback address (the attempt itself is refused locally,
    so no packet leaves the machine); tests assert it stays empty.
    """

    def __init__(self, names: dict[str, str] | None = None):
        self.names = {k.lower(): v for k, v in (names or {}).items()}
        self.violations: list[str] = []
        self.connects: list[str] = []
        self._saved: list[tuple[object, str, object]] = []

    def __enter__(self) -> Self:
        real_getaddrinfo = socket.getaddrinfo
        real_connect = socket.socket.connect
        real_connect_ex = socket.socket.connect_ex
        real_sendto = socket.socket.sendto
        guard = self

        def getaddrinfo(host, port, *args, **kwargs):
            name = host.decode() if isinstance(host, bytes) else (host or "")
            mapped = guard.names.get(name.lower().rstrip("."))
            if mapped is not None:
                return real_getaddrinfo(mapped, port, *args, **kwargs)
            try:
                ipaddress.ip_address(name.split("%", 1)[0])
            except ValueError:
                if name.lower() == "localhost":
                    return real_getaddrinfo("127.0.0.1", port, *args, **kwargs)
                raise socket.gaierror(socket.EAI_NONAME, f"packet guard: no DNS for {name!r}") from None
            return real_getaddrinfo(name, port, *args, **kwargs)  # a literal needs no lookup traffic

        def check(address, what: str) -> None:
            if isinstance(address, tuple) and address and isinstance(address[0], str):
                guard.connects.append(f"{address[0]}:{address[1]}")
                if not _is_loopback(address[0]):
                    guard.violations.append(f"{what} {address[0]}:{address[1]}")
                    raise ConnectionRefusedError(f"packet guard: refused {what} to {address[0]}")

        def connect(sock, address):
            check(address, "connect")
            return real_connect(sock, address)

        def connect_ex(sock, address):
            check(address, "connect")
            return real_connect_ex(sock, address)

        def sendto(sock, data, *args):
            check(args[-1], "sendto")
            return real_sendto(sock, data, *args)

        for owner, name, value in (
            (socket, "getaddrinfo", getaddrinfo),
            (socket.socket, "connect", connect),
            (socket.socket, "connect_ex", connect_ex),
            (socket.socket, "sendto", sendto),
        ):
            self._saved.append((owner, name, getattr(owner, name)))
            setattr(owner, name, value)
        return self

    def __exit__(self, *exc) -> None:
        for owner, name, value in reversed(self._saved):
            setattr(owner, name, value)
        self._saved.clear()


# --------------------------------------------------------------------------- server


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    local_ip: str
    at: float  # time.monotonic() when the request head arrived
    body: bytes = b""

    @property
    def host(self) -> str:
        return self.headers.get("host", "").rsplit(":", 1)[0]


@dataclass
class Reply:
    status: int = 200
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | Callable[[], AsyncIterator[bytes]] = b""
    chunked: bool = False  # a streamed body without Content-Length
    delay_s: float = 0.0  # latency before the status line
    action: str = ""  # "reset": RST the connection; "hang": say nothing for `delay_s`, then close


Handler = Callable[[Request], Awaitable[Reply]]


class LoopbackServer:
    """Serves ``handler`` on one port of each of ``hosts`` (loopback addresses) from its own thread."""

    def __init__(self, handler: Handler, hosts: tuple[str, ...] = ("127.0.0.1",)):
        self.handler = handler
        self.hosts = hosts
        self.requests: list[Request] = []
        self.bytes_sent = 0
        self.port = 0
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._server: asyncio.AbstractServer | None = None

    def base(self, host: str | None = None) -> str:
        return f"http://{host or self.hosts[0]}:{self.port}"

    def __enter__(self) -> Self:
        self._thread.start()
        asyncio.run_coroutine_threadsafe(self._start(), self._loop).result(timeout=10)
        return self

    async def _start(self) -> None:
        with socket.socket() as probe:  # a port free on 127.0.0.1 is free on the other loopback addresses too
            probe.bind((self.hosts[0], 0))
            self.port = probe.getsockname()[1]
        self._server = await asyncio.start_server(self._serve, host=list(self.hosts), port=self.port, backlog=1024)

    def __exit__(self, *exc) -> None:
        async def stop():
            self._server.close()
            for task in [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]:
                task.cancel()
            await asyncio.sleep(0)

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=10)
        self._loop.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        local_ip = writer.get_extra_info("sockname")[0]
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path, _ = lines[0].split(" ", 2)
                headers = {}
                for line in lines[1:]:
                    if ":" in line:
                        key, value = line.split(":", 1)
                        headers[key.strip().lower()] = value.strip()
                length = int(headers.get("content-length") or 0)
                body = await reader.readexactly(length) if length else b""
                request = Request(method, path, headers, local_ip, time.monotonic(), body)
                self.requests.append(request)
                reply = await self.handler(request)
                if reply.delay_s and reply.action != "hang":
                    await asyncio.sleep(reply.delay_s)
                if reply.action == "reset":
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
                if reply.action == "hang":
                    await asyncio.sleep(reply.delay_s)
                    writer.close()
                    return
                await self._write(writer, reply)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError, ValueError):
            pass
        finally:
            with contextlib.suppress(Exception):
                writer.close()

    async def _write(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        head = [f"HTTP/1.1 {reply.status} X"]
        head += [f"{k}: {v}" for k, v in reply.headers.items()]
        body = reply.body
        if isinstance(body, bytes):
            if "content-length" not in {k.lower() for k in reply.headers}:
                head.append(f"Content-Length: {len(body)}")
            writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1") + body)
            self.bytes_sent += len(body)
            await writer.drain()
            return
        if reply.chunked:
            head.append("Transfer-Encoding: chunked")
        writer.write(("\r\n".join(head) + "\r\n\r\n").encode("latin-1"))
        async for piece in body():
            writer.write(b"%x\r\n%s\r\n" % (len(piece), piece) if reply.chunked else piece)
            self.bytes_sent += len(piece)
            await writer.drain()  # back-pressure: a client that stopped reading stops the generator here
        if reply.chunked:
            writer.write(b"0\r\n\r\n")
        await writer.drain()


class ThreadedHTTP:
    """A plain ``http.server`` handler class served on 127.0.0.1 from a thread, as a context manager (for tests
    that script one handler rather than hosts and replies)."""

    def __init__(self, handler: type[BaseHTTPRequestHandler]):
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)  # quick shutdown

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __enter__(self) -> Self:
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
