"""Client processes in a headless browser for `shuffledp simulate --browser-clients N`.

The N clients of the browser form one client process (``clients-<P>``, after the P Python ones)
run by the JavaScript client (``clients/js/``, docs/browser-client.md) in one page of the
system's headless Chromium, driven by Node (``clients/js/bin/browser-clients.mjs``,
puppeteer-core). The page speaks MQTT over a WebSocket: websockify bridges it to the broker's
TCP port (Debian's Mosquitto 2.0.11 has no WebSocket listener), so the browser's process logs
in with its own broker account and ACL exactly like a Python client process.

What this module does, each a small step the launcher calls: find the tools (:func:`find_tools`,
one clear line for what is missing), start the bridge (:func:`start_bridge`), write the
driver's configuration (:func:`write_config`, mode 0600: it holds the process's password and
key), and read the driver's summary after the round (:func:`read_summary`): the browser and
versions, what the process sent and hop 0 confirmed, the browser's peak memory.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import socket
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from shuffledp.errors import InvalidParameterError, OperationalError
from shuffledp.protocol.mqtt import parse_broker_address

__all__ = [
    "BrowserTools",
    "bridge_label",
    "find_tools",
    "read_summary",
    "start_bridge",
    "write_config",
]

JS_DIR = Path(__file__).resolve().parents[2] / "clients" / "js"
DRIVER = JS_DIR / "bin" / "browser-clients.mjs"
BRIDGE_START_TIMEOUT = 15.0
EXAMPLE_SCREENSHOT = "SHUFFLEDP_BROWSER_EXAMPLE_SCREENSHOT"
"""With this variable set to a PNG path, the browser's (one-client) process sends its report
through the example page (clients/js/example/) instead, which is then photographed there:
how docs/browser-example.png is made (docs/browser-client.md)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class BrowserTools:
    """Where the browser round's programs are: node, chromium, websockify, the npm package."""

    node: str
    chromium: str
    websockify: str
    js_dir: Path = JS_DIR

    @property
    def driver(self) -> Path:
        return self.js_dir / "bin" / "browser-clients.mjs"


def find_tools() -> BrowserTools:
    """The programs a browser round needs; InvalidParameterError naming the first one missing
    (``--browser-clients`` needs it) and how to get it."""
    found: dict[str, str] = {}
    for name, package in (
        ("node", "nodejs"),
        ("chromium", "chromium"),
        ("websockify", "websockify"),
    ):
        path = shutil.which(name)
        if path is None:
            raise InvalidParameterError(
                f"--browser-clients needs {name} on PATH, it is not (install the Debian package "
                f"{package})"
            )
        found[name] = path
    for package in ("puppeteer-core", "libsodium-wrappers", "mqtt"):
        if not (JS_DIR / "node_modules" / package / "package.json").is_file():
            raise InvalidParameterError(
                f"--browser-clients needs the npm packages of {JS_DIR}, {package} is missing "
                f"(run `npm ci` there)"
            )
    return BrowserTools(
        node=found["node"], chromium=found["chromium"], websockify=found["websockify"]
    )


def bridge_label(broker_url: str, ws_url: str) -> str:
    return f"websockify at {ws_url} in front of {broker_url}"


def _listening(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.settimeout(0.5)
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def start_bridge(
    tools: BrowserTools, broker_url: str, log_path: Path
) -> tuple[asyncio.subprocess.Process, str]:
    """websockify on a free 127.0.0.1 port in front of the broker's TCP address: (its process,
    the ws:// URL). OperationalError if it does not listen within BRIDGE_START_TIMEOUT s;
    InvalidParameterError for a TLS broker (the bridge would carry the clear text past TLS)."""
    from shuffledp.brokers.ports import free_loopback_port

    address = parse_broker_address(broker_url)
    if address.tls:
        raise InvalidParameterError(
            f"--browser-clients needs a plain mqtt:// broker on this machine (the WebSocket "
            f"bridge does not speak TLS), got --broker {broker_url}"
        )
    port = free_loopback_port()
    with open(log_path, "wb") as log:
        process = await asyncio.create_subprocess_exec(
            tools.websockify,
            f"127.0.0.1:{port}",
            f"{address.host}:{address.port}",
            stdin=asyncio.subprocess.DEVNULL,
            stdout=log,
            stderr=log,
            start_new_session=True,
        )
    stop_at = time.monotonic() + BRIDGE_START_TIMEOUT
    while not await asyncio.to_thread(_listening, port):
        if process.returncode is not None or time.monotonic() > stop_at:
            tail = log_path.read_text(errors="replace").strip().splitlines()[-3:]
            if process.returncode is None:
                process.kill()
                await process.wait()
            raise OperationalError(f"websockify did not start: {' '.join(tail) or 'no output'}")
        await asyncio.sleep(0.1)
    return process, f"ws://127.0.0.1:{port}"


def write_config(
    path: Path,
    *,
    tools: BrowserTools,
    ws_url: str,
    manifest: Path,
    trusted_coordinator: bytes,
    round_id: int,
    processes: list[dict[str, Any]],
    accept_loss: bool,
    out: Path,
) -> Path:
    """The driver's configuration (JSON, mode 0600): ``processes`` is one entry per browser
    client process, ``{"name", "username", "password", "processKey", "values"}``."""
    config = {
        "chromium": tools.chromium,
        "brokerUrl": ws_url,
        # websockify answers the WebSocket subprotocol "binary" only; a browser asking for
        # "mqtt" (mqtt.js's default) and getting no answer refuses the connection.
        "subprotocols": ["binary"],
        "manifestText": manifest.read_text(encoding="utf-8"),
        "trustedCoordinator": trusted_coordinator.hex(),
        "roundId": str(round_id),
        "processes": processes,
        "acceptLoss": accept_loss,
        "out": str(out),
        # the browser's profile: in the round's folder, which the launcher removes even if
        # the driver is killed before it can
        "profileParent": str(out.parent),
    }
    screenshot = os.environ.get(EXAMPLE_SCREENSHOT)
    if screenshot:
        config["exampleScreenshot"] = os.path.abspath(screenshot)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as handle:
        json.dump(config, handle)
    return path


def read_summary(path: Path, *, clients: int, bridge: str) -> dict[str, Any]:
    """The round log's ``simulation.browser`` from the driver's summary file: how many clients
    ran in the browser, what they sent and hop 0 confirmed, the browser and versions, its peak
    memory (PSS of its process tree), the bridge. OperationalError if the driver wrote none (it failed: its log says why)."""
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise OperationalError(f"the browser driver wrote no summary ({path}): {exc}") from None
    results = summary.get("processes") or []
    delivery = [r.get("delivery") or {} for r in results]
    return {
        "clients": clients,
        "processes": len(results),
        "sent": sum(int(r.get("sent", 0)) for r in results),
        # hop 0's receipts (null without client authentication: hop 0 sends none);
        # "unconfirmed": hop 0 left before answering, so the analyzer's count is the proof
        "confirmed_by_hop_0": sum(int(d.get("accepted", 0)) for d in delivery)
        if all(delivery)
        else None,
        "unconfirmed": sum(int(d.get("unconfirmed", 0)) for d in delivery),
        "browser": str(summary.get("browser", "")),
        "runtime": str(summary.get("runtime", "")),
        "user_agent": str(summary.get("userAgent", "")),
        "seconds": round(float(summary.get("seconds", 0.0)), 3),
        # the slowest process's sending (sealing and publishing, from hop 0 ready to all sent)
        "send_seconds": round(max((float(r.get("seconds", 0.0)) for r in results), default=0.0), 3),
        "peak_memory_bytes": int(summary.get("peakPssBytes", 0)),
        "bridge": bridge,
    }
