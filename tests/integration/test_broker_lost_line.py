"""A broker lost mid-round is one line: the connection reset under a live MqttTransport (a
relay in front of Mosquitto closes the client's side with a TCP reset, as a killed broker with
unread data does, and stops listening) gives one MqttConnectionError and no library log line.
paho logs "failed to receive on socket: [Errno 104] Connection reset by peer" at ERROR for such
a reset; the components' logging printed it above their own one-line error. With
``reconnect_timeout``, every task that noticed the loss ends with the same error after a single
"reconnecting" warning (each used to retry, and warn, once more after the first gave up)."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import uuid

import pytest

from shuffledp.protocol.mqtt import MqttConnectionError, MqttTransport


class _ResettingRelay:
    """A TCP relay to the broker whose ``reset`` aborts every client connection with an RST
    (SO_LINGER 0) and stops listening, so reconnecting is refused like a dead broker's port."""

    def __init__(self, broker_host: str, broker_port: int) -> None:
        self.broker = (broker_host, broker_port)
        self.clients: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.pumps: set[asyncio.Task[None]] = set()

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"mqtt://127.0.0.1:{port}"

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await asyncio.open_connection(*self.broker)
        self.clients.append(writer)
        for source, sink in ((reader, up_writer), (up_reader, writer)):
            task = asyncio.create_task(self._pump(source, sink))
            self.pumps.add(task)
            task.add_done_callback(self.pumps.discard)

    @staticmethod
    async def _pump(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
        with contextlib.suppress(OSError):
            while data := await source.read(65536):
                sink.write(data)
                await sink.drain()
        sink.close()

    def reset(self) -> None:
        assert self.server is not None
        self.server.close()
        for writer in self.clients:
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            writer.transport.abort()
        for task in self.pumps:
            task.cancel()


async def _consume(transport: MqttTransport) -> None:
    async for _message in transport.messages():
        pass


async def _publish_forever(transport: MqttTransport, topic: str) -> None:
    while True:
        await transport.publish(topic, b"x")
        await asyncio.sleep(0.02)


def _library_lines(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "shuffledp.mqtt"]


async def _lose_broker(
    mosquitto_url: str, caplog: pytest.LogCaptureFixture, **options: object
) -> list[BaseException]:
    """Connect through the relay, subscribe, run a reader and a publisher, reset the
    connection; what each task ended with."""
    caplog.set_level(logging.INFO)  # what the components' logging shows (components.py)
    host, port = mosquitto_url.removeprefix("mqtt://").rsplit(":", 1)
    relay = _ResettingRelay(host, int(port))
    url = await relay.start()
    topic = f"lost-line/{uuid.uuid4().hex}"
    name = f"lost-{uuid.uuid4().hex[:12]}"
    # timeout 2: a publish waiting for its PUBACK notices the loss in 2 s, not 10
    transport = MqttTransport(url, client_id=name, timeout=2.0, **options)  # type: ignore[arg-type]
    async with contextlib.AsyncExitStack() as stack:
        await stack.enter_async_context(transport)
        await transport.subscribe(topic)
        tasks = [
            asyncio.create_task(_consume(transport)),
            asyncio.create_task(_publish_forever(transport, topic)),
        ]
        await asyncio.sleep(0.5)  # messages flowing both ways
        relay.reset()
        _done, pending = await asyncio.wait(tasks, timeout=30)
        assert not pending, "a task went on after the broker was lost"
        with contextlib.suppress(MqttConnectionError):
            await stack.aclose()
    return [task.exception() for task in tasks]  # type: ignore[misc]


@pytest.mark.asyncio
async def test_a_reset_connection_is_one_line_and_no_library_line(
    mosquitto_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    errors = await _lose_broker(mosquitto_url, caplog)
    assert all(isinstance(e, MqttConnectionError) for e in errors), errors
    assert all("\n" not in str(e) for e in errors)
    assert _library_lines(caplog) == []


@pytest.mark.asyncio
async def test_a_reconnection_that_gives_up_warns_once_for_every_task(
    mosquitto_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    errors = await _lose_broker(
        mosquitto_url, caplog, persistent_session=True, reconnect_timeout=1.0
    )
    assert all(isinstance(e, MqttConnectionError) for e in errors), errors
    assert {str(e) for e in errors} == {str(errors[0])}  # the one that gave up, for both
    assert "not reconnected within 1 s" in str(errors[0])
    warnings = [r.getMessage() for r in caplog.records if r.name == "shuffledp.reconnect"]
    assert len(warnings) == 1 and warnings[0].endswith("reconnecting"), warnings
    assert _library_lines(caplog) == []
