"""The chain of signed END statements, checked end to end by whoever holds the manifest (pure core).

Every hop signs its statement (:mod:`~shuffledp.protocol.end_statement`) twice: in its END frame,
which only the next stage verifies, and as a STATEMENT frame, which its END frame carries in its
``chain`` after the STATEMENT frames of every hop before it, exactly as they were signed
(:func:`~shuffledp.protocol.frames.encode_end`). So the last hop's END frame brings the
analyzer one statement per hop, each signed by its own hop, and each committing to the one
before it (``upstream_end`` is the SHA-256 of the previous STATEMENT frame).

:func:`verify_chain` checks, from the last hop back to hop 0, that the chain holds exactly one
statement per hop, that hop j's verifies with hop j's key from the manifest (and names the
manifest and round), and that hop j+1's commits to it. A statement a later hop (or the broker)
rewrote, dropped or replaced fails one of these, and the error names the hop where the chain
breaks. A hop whose upstream's END never reached it (its ``upstream_end`` is null) starts the
chain afresh: the statements from it on are verified and returned, and the accounting's first
leg then runs from the clients to that hop (the manifest's expected reports against what it
signed it accepted), so no shortfall before it can hide; only the earlier hops' statements are
not there to show.

:func:`check_sums` then checks what no honest stage can break: hop 0 accepts at most the
manifest's expected reports (the first hop of the chain, if it starts later), and no stage
accounts for more messages (accepted plus rejected)
than its upstream says it forwarded (every message after hop 0 comes in the upstream's signed
frames). A shortfall is not checked here: it is a loss, placed on its leg by the analyzer's
delivery accounting from the verified statements.

Both raise :class:`~shuffledp.protocol.end_statement.StatementError` (``forged-end``) with one
line; the analyzer refuses the round with it and publishes no histogram.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence

from nacl.signing import VerifyKey

from shuffledp.protocol.end_statement import EndStatement, StatementError
from shuffledp.protocol.frames import open_statement

__all__ = ["check_sums", "verify_chain"]


def _broken(hop: int, why: str) -> StatementError:
    return StatementError(f"the chain of signed END statements breaks at hop-{hop}: {why}")


def verify_chain(
    end: EndStatement,
    *,
    verify_keys: Sequence[VerifyKey],
    manifest_digest: bytes,
    round_id: int,
) -> tuple[EndStatement, ...]:
    """Every hop's signed statement, hop 0 first (or the hop that started the chain afresh),
    from the chain of the last hop's verified END statement ``end`` (``verify_keys``: hop j's
    verify key from the manifest at j, one per hop); StatementError naming the hop where the
    chain breaks (module docstring)."""
    n_hops, chain = len(verify_keys), end.chain
    statements: list[EndStatement] = []
    later: EndStatement | None = None
    for hop in reversed(range(n_hops)):
        entry = hop - (n_hops - len(chain))
        assert entry >= 0 or later is not None  # the last hop's own statement is in its chain
        if later is not None and later.upstream_end is None:
            if entry < 0:  # hop + 1 started the chain afresh: its upstream's END never came
                break
            raise _broken(
                hop,
                f"hop-{hop + 1} says hop-{hop}'s END never reached it, yet its chain carries "
                f"a statement of hop-{hop}",
            )
        if entry < 0:
            raise _broken(hop, f"hop-{hop + 1} carries no signed statement of hop-{hop}")
        frame = bytes.fromhex(chain[entry])
        try:
            statement = open_statement(
                frame,
                sender=hop,
                verify_key=verify_keys[hop],
                manifest_digest=manifest_digest,
                round_id=round_id,
            )
        except StatementError as exc:
            raise _broken(hop, f"hop-{hop}'s statement in the chain is not genuine: {exc}") from exc
        if later is not None and later.upstream_end != hashlib.sha256(frame).hexdigest():
            raise _broken(
                hop,
                f"hop-{hop + 1}'s signed statement commits to another statement of hop-{hop} "
                "than the chain carries",
            )
        statements.append(statement)
        later = statement
    if statements[0].core() != end.core():
        raise _broken(n_hops - 1, f"hop-{n_hops - 1}'s END says otherwise than its statement")
    return tuple(reversed(statements))


def _took(rejected: Mapping[str, int], accepted: int) -> int:
    return accepted + sum(rejected.values())


def check_sums(
    statements: Sequence[EndStatement],
    *,
    expected: int,
    analyzer_accepted: int,
    analyzer_rejected: Mapping[str, int],
) -> None:
    """StatementError unless the chain's first hop (hop 0, normally) accepted at most
    ``expected`` reports and every stage after it (the analyzer last, with its own counts)
    accounts for at most what its upstream's verified statement says it forwarded (module
    docstring)."""
    if statements and statements[0].accepted > expected:
        raise StatementError(
            f"the chain does not add up: {statements[0].stage} accepted "
            f"{statements[0].accepted:,} reports, the manifest expects {expected:,}"
        )
    sinks = [(s.stage, _took(s.rejected, s.accepted)) for s in statements[1:]]
    sinks.append(("analyzer", _took(analyzer_rejected, analyzer_accepted)))
    for upstream, (sink, took) in zip(statements, sinks, strict=True):
        if took > upstream.forwarded:
            raise StatementError(
                f"the chain does not add up between {upstream.stage} and {sink}: {sink} "
                f"accounts for {took:,} messages, {upstream.stage} forwarded {upstream.forwarded:,}"
            )
