"""A TCP proxy in front of Redis that loses one reply, for the tests of what a lost reply
must not break (the stream's reads, the turn lock)."""

from __future__ import annotations

import asyncio


class CuttingProxy:
    """A TCP proxy in front of Redis that can lose one reply: to a request containing
    `request`, a reply containing `reply`. Redis ran the request; the connection is cut before
    the reply gets back, as when Redis is killed or the network fails at that moment."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.request: bytes | None = None
        self.reply = b""
        self.cut = asyncio.Event()
        self.refuse_after_cut = False
        self.refusing = False  # set: connections are closed at once (Redis unreachable)
        self.refused = 0
        self.refused_enough = asyncio.Event()  # the client's own tries (three) were refused
        self.server: asyncio.Server | None = None

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        return f"redis://127.0.0.1:{self.server.sockets[0].getsockname()[1]}/0"

    async def close(self) -> None:
        assert self.server is not None
        self.server.close()
        await self.server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        if self.refusing:
            self.refused += 1
            if self.refused >= 3:
                self.refused_enough.set()
            writer.close()
            return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.port)
        watched = False  # the last request on this connection is the one to watch

        async def pump(src: asyncio.StreamReader, dst: asyncio.StreamWriter, up: bool) -> None:
            nonlocal watched
            while data := await src.read(65536):
                if up:
                    watched = self.request is not None and self.request in data
                elif watched and self.reply in data and not self.cut.is_set():
                    self.cut.set()
                    self.refusing = self.refuse_after_cut
                    return  # the reply is dropped and both sides cut
                dst.write(data)
                await dst.drain()

        tasks = [
            asyncio.create_task(pump(reader, up_writer, True)),
            asyncio.create_task(pump(up_reader, writer, False)),
        ]
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)
            for w in (writer, up_writer):
                w.close()
