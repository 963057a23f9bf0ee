"""Wire figures: what the round-manifest binding (record and frames version 2) costs.

Usage::

    .venv/bin/python bench/wire.py              # H = 3, about 20 s
    .venv/bin/python bench/wire.py --hops 5 --repeats 5

What it measures, on this machine, one core, medians of ``--repeats`` runs (microbenchmarks:
the whole pipeline's throughput is bench/pipeline.py's):

- per report, the cost of the 32-byte manifest digest in the record: the H + 1 seals of a
  client and the H + 1 opens downstream at the version-1 sizes (32-byte record) and at the
  version-2 sizes (64 bytes), and decode_record of version 2 (with its digest check);
- per 256 KiB data frame (``FRAME_BYTES``, messages of hop 1's length): building the frames of
  a batch with their Ed25519 signatures (encode_batch) and taking them back with the signature
  check (FrameAssembler.add), against the same work without signature (header and body only,
  the version-1 cost), and per message of the frame;
- per END frame of the last hop: signing it (with its own STATEMENT frame) and taking it
  (both signatures verified), its statement carrying the chain of H hops' STATEMENT frames.

The issue's budget (issue 23): signatures and digests may cost at most 10 % of the pipeline's
throughput; this prints each added cost next to the per-report crypto cost it adds to.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import os
import statistics
import struct
import time
from collections.abc import Callable

from nacl.public import SealedBox
from nacl.signing import SigningKey

from shuffledp.protocol.end_statement import EndStatement
from shuffledp.protocol.frames import (
    FRAME_BYTES,
    FrameAssembler,
    FrameSigner,
    encode_batch,
    encode_end,
    statement_frame,
)
from shuffledp.protocol.onion import SEAL_OVERHEAD, generate_keypair
from shuffledp.protocol.record import decode_record, encode_record

DIGEST = hashlib.sha256(b"bench manifest").digest()


def median_seconds(work: Callable[[], object], *, repeats: int, inner: int) -> float:
    """Median over ``repeats`` of the time of ``inner`` calls of ``work``, per call."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(inner):
            work()
        times.append((time.perf_counter() - start) / inner)
    return statistics.median(times)


def onion_cost(hops: int, record_size: int, repeats: int) -> float:
    """Seconds per report of H + 1 seals and H + 1 opens around a ``record_size``-byte record."""
    keys = [generate_keypair() for _ in range(hops + 1)]
    total = 0.0
    for stage in range(hops + 1):
        plaintext = os.urandom(record_size + SEAL_OVERHEAD * (hops - stage))
        sealer, opener = SealedBox(keys[stage].public), SealedBox(keys[stage].private)
        ciphertext = sealer.encrypt(plaintext)
        total += median_seconds(
            functools.partial(sealer.encrypt, plaintext), repeats=repeats, inner=1000
        )
        total += median_seconds(
            functools.partial(opener.decrypt, ciphertext), repeats=repeats, inner=1000
        )
    return total


def frame_costs(item_length: int, repeats: int) -> dict[str, float]:
    """Seconds per 256 KiB data frame: signed encode/verify vs header and body alone."""
    per_frame = FRAME_BYTES // item_length
    messages = [os.urandom(item_length) for _ in range(per_frame)]
    key = SigningKey.generate()
    signer = FrameSigner(manifest_digest=DIGEST, round_id=1, sender=0, signing_key=key)
    (frame,) = encode_batch(messages, signer=signer, item_length=item_length)
    header = struct.Struct(">4sBBQIII")  # the version-1 header, for the unsigned baseline

    def unsigned_encode() -> bytes:
        return header.pack(b"SDPF", 1, 1, 1, 0, per_frame, item_length) + b"".join(messages)

    def signed_take() -> int:
        assembler = FrameAssembler(1, DIGEST, 0, key.verify_key)
        return len(list(assembler.add(frame)))

    def unsigned_take() -> int:
        body = bytes(memoryview(frame)[60:-64])
        return len([body[i : i + item_length] for i in range(0, len(body), item_length)])

    return {
        "messages": float(per_frame),
        "signed encode": median_seconds(
            lambda: encode_batch(messages, signer=signer, item_length=item_length),
            repeats=repeats,
            inner=20,
        ),
        "unsigned encode": median_seconds(unsigned_encode, repeats=repeats, inner=20),
        "signed take": median_seconds(signed_take, repeats=repeats, inner=20),
        "unsigned take": median_seconds(unsigned_take, repeats=repeats, inner=20),
    }


def end_costs(hops: int, repeats: int) -> tuple[float, float, int]:
    """(sign, verify seconds, bytes) of the last hop's END: its statement (its own log) and the
    chain of every hop's STATEMENT frame (the earlier ones built here with the same key: the
    cost is the same). Signing includes the hop's own STATEMENT frame, taking verifies both."""
    key = SigningKey.generate()
    sender = hops - 1
    signer = FrameSigner(manifest_digest=DIGEST, round_id=1, sender=sender, signing_key=key)
    log = {
        "accepted": 100_000,
        "forwarded": 100_000,
        "rejected": dict.fromkeys(["wrong-length", "duplicate", "batch-full"], 0),
        "randomness": "os-csprng",
        "timings": {"collect_seconds": 12.345678, "forward_seconds": 1.234567},
    }

    def statement_of(hop: int) -> EndStatement:
        return EndStatement(
            stage=f"hop-{hop}",
            accepted=100_000,
            forwarded=100_000,
            frames=80,
            rejected=log["rejected"],  # type: ignore[arg-type]
            aborted=None,
            upstream_end="ab" * 32 if hop else None,
            stages={f"hop-{hop}": log},
        )

    chain = tuple(
        statement_frame(
            signer=FrameSigner(manifest_digest=DIGEST, round_id=1, sender=hop, signing_key=key),
            item_length=160,
            statement=statement_of(hop),
        ).hex()
        for hop in range(sender)
    )
    statement = statement_of(sender)
    end = encode_end(signer=signer, item_length=160, statement=statement, upstream_chain=chain)
    sign = median_seconds(
        lambda: encode_end(
            signer=signer, item_length=160, statement=statement, upstream_chain=chain
        ),
        repeats=repeats,
        inner=50,
    )

    def take() -> None:
        FrameAssembler(1, DIGEST, sender, key.verify_key).add(end)

    return sign, median_seconds(take, repeats=repeats, inner=50), len(end)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--hops", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()
    hops, repeats = args.hops, args.repeats
    v1 = onion_cost(hops, 32, repeats)
    v2 = onion_cost(hops, 64, repeats)
    record = encode_record(5, 3, 15, manifest_digest=DIGEST)
    decode = median_seconds(
        lambda: decode_record(record, expected_round=5, k=15, manifest_digest=DIGEST),
        repeats=repeats,
        inner=20_000,
    )
    print(f"H = {hops}; medians of {repeats} runs, one core")
    print(
        f"per report, H + 1 seals and opens: record v1 (32 B) {v1 * 1e6:.1f} us, "
        f"v2 (64 B) {v2 * 1e6:.1f} us: +{(v2 - v1) * 1e6:.2f} us (+{(v2 / v1 - 1) * 100:.1f} %)"
    )
    print(f"decode_record v2 (digest check included): {decode * 1e6:.2f} us")
    item = 64 + SEAL_OVERHEAD * hops  # hop 1's input length, record v2
    costs = frame_costs(item, repeats)
    n = costs["messages"]
    added = (costs["signed encode"] - costs["unsigned encode"]) + (
        costs["signed take"] - costs["unsigned take"]
    )
    print(f"data frame of {int(n)} messages of {item} B (~{FRAME_BYTES // 1024} KiB):")
    for name in ("signed encode", "unsigned encode", "signed take", "unsigned take"):
        print(
            f"  {name:16s} {costs[name] * 1e3:8.3f} ms/frame  {costs[name] / n * 1e6:7.3f} us/message"
        )
    print(
        f"  signature added (sign + verify): {added * 1e3:.3f} ms/frame, "
        f"{added / n * 1e6:.3f} us/message per hop = {added / n / v2 * 100:.2f} % of the "
        f"per-report crypto cost for each of the {hops} frame legs"
    )
    sign, verify, size = end_costs(hops, repeats)
    print(
        f"END frame ({size} B, a chain of {hops} statements): sign {sign * 1e3:.3f} ms, verify and "
        f"check {verify * 1e3:.3f} ms (once per hop and round)"
    )


if __name__ == "__main__":
    main()
