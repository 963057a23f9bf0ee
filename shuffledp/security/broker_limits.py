"""What one broker account may cost the broker: packet sizes per role, queues, retained messages.

Why: an account's traffic lands in the broker's memory (queued for a slow or absent subscriber,
retained on a topic) and in its subscribers'. Without bounds one client account could publish
16 MB messages by the dozen to hop 0's topic, or retain junk on the topics of round ids nobody
runs, and the broker keeps it. The bounds, by role:

- **clients** (``clients-<j>``) publish reports of a fixed size and small JSON status/progress
  messages: at most :func:`client_payload_bytes` (the report size of the deployment's hops, at
  least :data:`CONTROL_PAYLOAD_BYTES`); they may not retain anything.
- **stages** (hops, the analyzer, the monitor) publish frames (256 KiB of reports, an
  END frame with a log of at most 1 MiB) and the round's report: at most
  :data:`STAGE_PACKET_BYTES` per MQTT packet.
- **queues**: at most :data:`QUEUED_MESSAGES` messages and :data:`QUEUED_BYTES` bytes waiting for
  one client beyond those in flight (a full round of 10^6 reports at hop 0 fits).

Where each is enforced: the embedded broker enforces every bound per role
(:mod:`shuffledp.brokers.amqtt_compat`; a client's retained flag is dropped, the message still
delivered). Mosquitto 2.0 has one value per option for all clients (``max_packet_size``,
``max_queued_*`` and ``retain_available`` all "apply globally"), so its generated configurations
(:func:`mosquitto_limit_settings`) bound every packet by the stages' size and every queue as
above, and load a plugin of ours for the per-role rules
(:mod:`shuffledp.security.mosquitto_bounds`): a client account's retained PUBLISH or will, or a
PUBLISH over :func:`client_payload_bytes`, is refused (delivered to no one; client processes
publish nothing retained, :func:`shuffledp.protocol.topics.retains_status`). Where the plugin
cannot be built (no C compiler, no ``mosquitto-dev`` headers) the configuration says so and a
client account there can still retain messages of at most :data:`STAGE_PACKET_BYTES` on its own
topics (docs/threat-model.md).
"""

from __future__ import annotations

import os
from pathlib import Path

from shuffledp.protocol.client_auth import ENVELOPE_SIZE
from shuffledp.protocol.onion import message_length
from shuffledp.protocol.topics import is_client_process

__all__ = [
    "CONTROL_PAYLOAD_BYTES",
    "QUEUED_BYTES",
    "QUEUED_MESSAGES",
    "STAGE_PACKET_BYTES",
    "client_payload_bytes",
    "deployment_client_payload",
    "is_client_account",
    "mosquitto_limit_settings",
]

STAGE_PACKET_BYTES = 4 * 1024 * 1024
"""Largest MQTT packet a stage may send: an END frame (a log of at most 1 MiB), a data frame
(256 KiB of reports) or the analyzer's report, with room to spare; also Mosquitto's one
``max_packet_size``."""
CONTROL_PAYLOAD_BYTES = 16 * 1024
"""Largest status or progress message of a client process (a few hundred bytes of JSON)."""
QUEUED_MESSAGES = 2_000_000
"""Messages a broker holds for one client beyond those in flight (2x a round of 10^6)."""
QUEUED_BYTES = 1024 * 1024 * 1024
"""Bytes a broker holds for one client beyond those in flight (1 GiB: a round of 10^6 reports
of 3 hops is 296 MB)."""


def client_payload_bytes(n_hops: int) -> int:
    """Largest payload a client account may publish with ``n_hops`` hops: its authenticated
    report (envelope and onion), or a status/progress message, whichever is larger."""
    return max(ENVELOPE_SIZE + message_length(0, n_hops), CONTROL_PAYLOAD_BYTES)


def deployment_client_payload(access_dir: str | os.PathLike[str]) -> int:
    """The client accounts' payload bound for the hops of the access directory ``access_dir``
    (its parent's ``access/access.json``); 3 hops, the default, if it has none (a directory
    made without ``keys init``)."""
    from shuffledp.security.access import AccessError, load_access_settings

    try:
        n_hops = load_access_settings(Path(access_dir).parent).n_hops
    except AccessError:
        n_hops = 3
    return client_payload_bytes(n_hops)


def is_client_account(username: object) -> bool:
    """True for a client process's broker account (``clients-<j>``: the process's stage name,
    :func:`shuffledp.protocol.topics.is_client_process`)."""
    return is_client_process(username)


def mosquitto_limit_settings() -> str:
    """The Mosquitto 2.x lines of the bounds above (module docstring), commented."""
    return f"""\
# Per-client queue of QoS 1 messages beyond those in flight: bounded, in messages and bytes, so
# that junk for a slow or absent subscriber cannot fill the broker's memory. Mosquitto's default
# (1000 messages) silently dropped reports to a hop that fell behind (27-34 % lost with one
# paused 3 s); these bounds hold a whole round of 10^6 reports, and a report dropped beyond them
# is a loss the stages count and the clients repair, not a silent one.
max_queued_messages {QUEUED_MESSAGES}
max_queued_bytes {QUEUED_BYTES}
# Up to 1000 unacknowledged QoS 1/2 messages in flight to each client (default 20 throttles a
# fast subscriber); beyond that they wait in the queue above.
max_inflight_messages 1000
# Largest MQTT packet accepted from anyone: a stage's largest (frames, END frame, report). A
# larger packet gets its sender disconnected (loud), unlike the deprecated message_size_limit,
# which drops it silently. Mosquitto has one value for all; the embedded broker also bounds a
# client's packets by the report size.
max_packet_size {STAGE_PACKET_BYTES}
"""
