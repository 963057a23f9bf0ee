"""MQTT topic names of a round: one ingress topic per hop, one for the analyzer.

Layout: ``{prefix}/round/{round_id}/hop/{hop_index}`` (hop ``hop_index`` subscribes, clients or
hop ``hop_index - 1`` publish) and ``{prefix}/round/{round_id}/analyzer`` (the last hop publishes,
the analyzer subscribes). End-to-end delivery (protocol/receipts.py) adds one pair per client
process ``clients-j``: ``.../claim/clients-j`` (the process says what it sent, hop 0 reads) and
``.../receipt/clients-j`` (hop 0 says which of its clients it accepted, only that process
reads). A hop of W peelers and a mixer (docs/hop-workers.md) adds ``.../hop/{i}/w/{p}`` (peeler
``p`` of hop ``i``: its share of the clients or of the upstream mixer's frames) and ``.../hop/{i}/mix`` (the peelers'
sealed frames to the mixer). Distinct (prefix, round, stage) give distinct topics, and none contains
a wildcard, so a subscription to one never receives another's messages.
"""

from __future__ import annotations

import re

from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.record import MAX_ROUND_ID

MAX_TOPIC_BYTES = 65535  # MQTT: a topic is a UTF-8 string with a 16-bit length


def validate_prefix(prefix: str) -> str:
    """``prefix`` unchanged if it is a usable topic prefix, else InvalidParameterError naming the
    rule: a non-empty string of levels separated by '/', no level empty (no leading, trailing or
    doubled '/'), no MQTT wildcard ('+', '#'), no leading '$' (reserved for the broker, e.g.
    $SYS), no NUL or other control character, encodable as UTF-8.
    """
    if not isinstance(prefix, str):
        raise InvalidParameterError(f"--prefix must be a string, got {prefix!r}")
    if not prefix:
        raise InvalidParameterError("--prefix must be non-empty, got ''")
    for char in ("+", "#"):
        if char in prefix:
            raise InvalidParameterError(
                f"--prefix must not contain the MQTT wildcard {char!r}, got {prefix!r}"
            )
    if "" in prefix.split("/"):
        raise InvalidParameterError(
            f"--prefix must not have empty levels (leading, trailing or doubled '/'), "
            f"got {prefix!r}"
        )
    if prefix.startswith("$"):
        raise InvalidParameterError(
            f"--prefix must not start with '$' (reserved for the broker), got {prefix!r}"
        )
    if any(ord(c) < 0x20 or 0x7F <= ord(c) <= 0x9F for c in prefix):
        raise InvalidParameterError(f"--prefix must not contain control characters, got {prefix!r}")
    try:
        size = len(prefix.encode("utf-8"))
    except UnicodeEncodeError as exc:
        raise InvalidParameterError(f"--prefix must be encodable as UTF-8, got {prefix!r}") from exc
    if size > MAX_TOPIC_BYTES - 100:  # room for the round and stage levels
        raise InvalidParameterError(
            f"--prefix must be at most {MAX_TOPIC_BYTES - 100} bytes in UTF-8, got {size}"
        )
    return prefix


def ingress_topic(prefix: str, round_id: int, hop_index: int) -> str:
    """The topic hop ``hop_index`` of round ``round_id`` subscribes to."""
    _check_round(round_id)
    if isinstance(hop_index, bool) or not isinstance(hop_index, int):
        raise InvalidParameterError(f"hop_index must be an integer, got {hop_index!r}")
    if not 0 <= hop_index < 2**32:  # bounded so that the topic length stays bounded
        raise InvalidParameterError(f"hop_index must be in [0, 2^32), got {hop_index}")
    return f"{validate_prefix(prefix)}/round/{round_id}/hop/{hop_index}"


def peeler_topic(prefix: str, round_id: int, hop_index: int, worker: int) -> str:
    """The topic peeler ``worker`` of hop ``hop_index`` subscribes to when the hop is W peelers
    and a mixer (docs/hop-workers.md): ``.../hop/{hop_index}/w/{worker}``: at hop 0 its share
    of the client processes send there, at a later hop the upstream mixer sends its share of
    the data frames and its END."""
    _check_worker(worker)
    return f"{ingress_topic(prefix, round_id, hop_index)}/w/{worker}"


def mix_topic(prefix: str, round_id: int, hop_index: int) -> str:
    """Where the peelers of hop ``hop_index`` send their sealed frames to the hop's mixer."""
    return f"{ingress_topic(prefix, round_id, hop_index)}/mix"


def _check_worker(worker: int) -> None:
    if isinstance(worker, bool) or not isinstance(worker, int) or not 0 <= worker < 256:
        raise InvalidParameterError(f"worker must be an integer in [0, 255], got {worker!r}")


def analyzer_topic(prefix: str, round_id: int) -> str:
    """The topic the analyzer of round ``round_id`` subscribes to."""
    _check_round(round_id)
    return f"{validate_prefix(prefix)}/round/{round_id}/analyzer"


def _check_round(round_id: int) -> None:
    if isinstance(round_id, bool) or not isinstance(round_id, int):
        raise InvalidParameterError(f"round_id must be an integer, got {round_id!r}")
    if not 0 <= round_id <= MAX_ROUND_ID:
        raise InvalidParameterError(f"round_id must be in [0, 2^64), got {round_id}")


def status_topic(prefix: str, round_id: int, stage: str) -> str:
    """Where stage ``stage`` ("hop-0", "analyzer", "clients-0", ...) of round ``round_id``
    publishes its retained state (``ready``, ``done``, ``refused``, ``failed``): upstream stages
    wait for their downstream's ``ready`` before publishing to it. ``stage="+"`` gives the filter
    that subscribes to every stage."""
    _check_round(round_id)
    if stage != "+":
        _check_stage(stage)
    return f"{validate_prefix(prefix)}/round/{round_id}/status/{stage}"


def progress_topic(prefix: str, round_id: int, stage: str) -> str:
    """Where stage ``stage`` of round ``round_id`` publishes its progress counts while it works
    (not retained); ``progress_topic(prefix, round_id, "+")`` subscribes to every stage."""
    _check_round(round_id)
    if stage != "+":
        _check_stage(stage)
    return f"{validate_prefix(prefix)}/round/{round_id}/progress/{stage}"


def report_topic(prefix: str, round_id: int) -> str:
    """Where the analyzer publishes the report of round ``round_id`` (JSON, retained)."""
    _check_round(round_id)
    return f"{validate_prefix(prefix)}/round/{round_id}/report"


_CLIENT_PROCESS = re.compile(r"clients-(0|[1-9][0-9]*)")


def is_client_process(name: object) -> bool:
    """True for a client process's stage name, which is also its broker account
    (``clients-<j>``)."""
    return isinstance(name, str) and _CLIENT_PROCESS.fullmatch(name) is not None


def retains_status(stage: str) -> bool:
    """Whether ``stage`` publishes its status retained: every stage but a client process
    (``clients-<j>``). A client account may retain nothing on the broker
    (shuffledp/security/broker_limits.py: Mosquitto's bounds plugin refuses its retained
    publishes and wills, the embedded broker drops the flag), and no stage waits for a client
    process's status; a subscriber already listening (the launcher) still receives it."""
    return not is_client_process(stage)


def _check_stage(stage: str) -> str:
    if not isinstance(stage, str) or not stage or not all(c.isalnum() or c in "-_" for c in stage):
        raise InvalidParameterError(
            f"stage name must be non-empty letters, digits, '-' or '_', got {stage!r}"
        )
    return stage


def claim_topic(prefix: str, round_id: int, process: str) -> str:
    """Where client process ``process`` ("clients-0", ...) of round ``round_id`` says what it
    sent (protocol/receipts.py: a Claim); ``process="+"`` gives hop 0's filter for every one."""
    _check_round(round_id)
    if process != "+":
        _check_stage(process)
    return f"{validate_prefix(prefix)}/round/{round_id}/claim/{process}"


def receipt_topic(prefix: str, round_id: int, process: str) -> str:
    """Where hop 0 of round ``round_id`` tells client process ``process`` which of its clients
    it accepted (protocol/receipts.py: a Receipt)."""
    _check_round(round_id)
    _check_stage(process)
    return f"{validate_prefix(prefix)}/round/{round_id}/receipt/{process}"
