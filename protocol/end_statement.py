"""What a hop states at the end of its batch: the body of its signed END frame (pure core).

A hop that forwards its batch ends it with one END frame (:mod:`~shuffledp.protocol.frames`):
the frame's header names the round manifest, the round, the sending hop, the number of data
frames and of messages, and the body is this statement as a UTF-8 JSON object; the hop signs
header and body with its Ed25519 signing key (the round manifest names its verify key). The
statement says, for the hop ``stage`` = ``hop-<i>``:

- ``accepted``: the messages it accepted; ``forwarded``: the messages it released (all of the
  accepted ones, or none if it refused the round); ``frames``: the data frames they filled;
- ``rejected``: what it refused, by reason (the slugs of its round log);
- ``aborted``: why it refused the round (released nothing), or null;
- ``upstream_end``: hex SHA-256 of the upstream hop's STATEMENT frame, the last entry of the
  chain its END frame carried (each statement commits to the one before), null for hop 0 or
  if that END never came;
- ``stages``: the hop's own round log, under ``stage`` (what the report shows for this hop);
- ``chain``: the signed statements of every hop so far, hop 0 first, this hop's last, each the
  hex of a STATEMENT frame (:func:`~shuffledp.protocol.frames.statement_frame`: this statement
  with an empty ``chain``, signed by its hop). A STATEMENT frame itself carries an empty chain;
  the END frame carries the chain, so the analyzer can verify every hop's statement with that
  hop's key from the manifest (:mod:`~shuffledp.protocol.end_chain`). Carrying statements
  without their own chains keeps the END body linear in the number of hops (a chain of whole
  END frames would nest, and triple at every hop).

:meth:`EndStatement.from_json` is the receiving side's check: any field missing or of the wrong
type, or counts that disagree with each other or with the signed header (``forwarded`` is the
header's message count, ``frames`` its frame count, ``stages[stage]`` says the same counts as
the statement, ``chain`` at most one lowercase hex entry per hop up to the sender), refuse it:
an END that does not add up never closes a batch.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from shuffledp.protocol.errors import ForgedEnd

__all__ = ["EndStatement", "StatementError"]

_HEX_DIGEST = re.compile(r"[0-9a-f]{64}")
_HEX_BYTES = re.compile(r"(?:[0-9a-f]{2})+")

StatementError = ForgedEnd
"""An END statement that is not well formed or does not add up (the message says which rule):
the frame assembler counts it as ``forged-end``, it is never raised past it."""


def _count(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise StatementError(f"{name} must be a count (an integer >= 0), got {value!r}")
    return value


PEELER_SENDER_BASE = 0x8000
"""Frame sender numbers from here are peelers of a hop of several processes
(docs/hop-workers.md): peeler P of hop J signs as ``PEELER_SENDER_BASE + 256 J + P`` with the
hop's key; a hop signs as its index (< 64)."""
MAX_PEELERS = 256


def peeler_sender(hop_index: int, worker: int) -> int:
    """The frame sender number of peeler ``worker`` of hop ``hop_index``."""
    if not (0 <= hop_index < 64 and 0 <= worker < MAX_PEELERS):
        raise ValueError(f"no peeler sender number for hop {hop_index}, worker {worker}")
    return PEELER_SENDER_BASE + hop_index * MAX_PEELERS + worker


def signer_stage(sender: int) -> str:
    """The stage that signs as frame sender ``sender``: ``hop-J`` or peeler ``hop-J-pP``."""
    if sender >= PEELER_SENDER_BASE:
        hop, worker = divmod(sender - PEELER_SENDER_BASE, MAX_PEELERS)
        return f"hop-{hop}-p{worker}"
    return f"hop-{sender}"


def _chain(value: object, sender: int) -> tuple[str, ...]:
    """The ``chain`` of hop ``sender``'s statement: at most sender + 1 lowercase hex strings."""
    if not isinstance(value, list) or len(value) > sender + 1:
        raise StatementError(
            f"chain must be a list of at most {sender + 1} signed statements, got "
            f"{type(value).__name__} of {len(value) if isinstance(value, list) else '?'}"
        )
    for index, entry in enumerate(value):
        if not isinstance(entry, str) or not _HEX_BYTES.fullmatch(entry):
            raise StatementError(f"chain[{index}] must be lowercase hex bytes")
    return tuple(value)


def _rejected(value: object) -> dict[str, int]:
    if not isinstance(value, Mapping):
        raise StatementError(f"rejected must be an object of counts, got {value!r}")
    return {str(reason): _count(count, f"rejected[{reason!r}]") for reason, count in value.items()}


@dataclass(frozen=True, slots=True, kw_only=True)
class EndStatement:
    """One hop's signed account of its batch (module docstring)."""

    stage: str
    accepted: int
    forwarded: int
    frames: int
    rejected: dict[str, int]
    aborted: str | None
    upstream_end: str | None
    stages: dict[str, Any] = field(default_factory=dict)
    chain: tuple[str, ...] = ()

    def core(self) -> EndStatement:
        """This statement without its chain: what its hop signs as its STATEMENT frame."""
        return replace(self, chain=())

    def to_json(self) -> dict[str, Any]:
        return {
            "stage": self.stage,
            "accepted": self.accepted,
            "forwarded": self.forwarded,
            "frames": self.frames,
            "rejected": dict(self.rejected),
            "aborted": self.aborted,
            "upstream_end": self.upstream_end,
            "stages": self.stages,
            "chain": list(self.chain),
        }

    @classmethod
    def from_json(cls, value: object, *, sender: int, frames: int, messages: int) -> EndStatement:
        """The statement of hop ``sender`` whose signed header announced ``frames`` data frames
        and ``messages`` messages; StatementError unless it is well formed and adds up."""
        if not isinstance(value, Mapping):
            raise StatementError(f"an END statement must be a JSON object, got {value!r}")
        stage = signer_stage(sender)
        if value.get("stage") != stage:
            raise StatementError(
                f"stage must be {stage!r} (the signer), got {value.get('stage')!r}"
            )
        aborted, upstream = value.get("aborted"), value.get("upstream_end")
        if aborted is not None and (not isinstance(aborted, str) or not aborted):
            raise StatementError(f"aborted must be null or a reason, got {aborted!r}")
        if upstream is not None and (sender == 0 or not _HEX_DIGEST.fullmatch(str(upstream))):
            raise StatementError(f"upstream_end must be null or a hex SHA-256, got {upstream!r}")
        stages = value.get("stages")
        if not isinstance(stages, dict):
            raise StatementError(f"stages must be an object, got {stages!r}")
        statement = cls(
            stage=stage,
            accepted=_count(value.get("accepted"), "accepted"),
            forwarded=_count(value.get("forwarded"), "forwarded"),
            frames=_count(value.get("frames"), "frames"),
            rejected=_rejected(value.get("rejected")),
            aborted=aborted,
            upstream_end=upstream,
            stages=stages,
            chain=_chain(value.get("chain"), sender),
        )
        statement._check_counts(frames=frames, messages=messages)
        return statement

    def _check_counts(self, *, frames: int, messages: int) -> None:
        """StatementError unless the counts agree with the header and with each other."""
        if self.forwarded != messages or self.frames != frames:
            raise StatementError(
                f"the statement says {self.forwarded} messages in {self.frames} frames, the "
                f"header {messages} in {frames}"
            )
        if self.aborted is not None and (self.forwarded or self.frames):
            raise StatementError(
                f"a refused round releases nothing, the statement forwards {self.forwarded}"
            )
        if self.aborted is None and self.forwarded != self.accepted:
            raise StatementError(
                f"a released batch is every accepted message: accepted {self.accepted}, "
                f"forwarded {self.forwarded}"
            )
        if (self.frames == 0) != (self.forwarded == 0) or self.frames > self.forwarded:
            raise StatementError(f"{self.forwarded} messages cannot fill {self.frames} data frames")
        own = self.stages.get(self.stage)
        if not isinstance(own, Mapping) or any(
            own.get(key) != getattr(self, key) for key in ("accepted", "forwarded", "rejected")
        ):
            raise StatementError(
                f"stages[{self.stage!r}] must say the statement's accepted, forwarded and "
                f"rejected, got {own!r}"
            )
