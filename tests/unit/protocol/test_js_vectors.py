"""The cross-implementation known answers of docs/protocol.md ("Known-answer vectors"): the
Python side of what clients/js/test/vectors.test.js checks in JavaScript. A record sealed by the
JavaScript client (libsodium-wrappers) opens here hop by hop, its envelope's tag is the one
Python computes, and the manifest digest, the record and the derived keys are Python's."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from nacl.public import PrivateKey

from shuffledp.protocol.client_auth import ClientRoster, ClientVerifier, process_key
from shuffledp.protocol.errors import BadAuthenticator
from shuffledp.protocol.manifest import SignedManifest
from shuffledp.protocol.onion import message_length, peel
from shuffledp.protocol.receipts import Receipt
from shuffledp.protocol.record import decode_record, encode_record

DOC = Path(__file__).resolve().parents[3] / "docs" / "protocol.md"


def _vectors() -> dict[str, Any]:
    text = DOC.read_text(encoding="utf-8")
    match = re.search(r"### Known-answer vectors.*?```json\n(.*?)\n```", text, re.DOTALL)
    assert match is not None, "docs/protocol.md has no known-answer vectors block"
    vectors: dict[str, Any] = json.loads(match.group(1))
    return vectors


V = _vectors()


def _manifest() -> Any:
    signed = SignedManifest.from_json(V["manifest_file"])
    return signed.verified(bytes.fromhex(V["manifest_file"]["manifest"]["coordinator"]))


def test_manifest_digest_and_record_are_the_vectors() -> None:
    manifest = _manifest()
    assert manifest.digest.hex() == V["manifest_digest"]
    padding = bytes.fromhex(V["padding"])
    record = encode_record(
        V["round_id"],
        V["value"],
        manifest.k,
        manifest_digest=manifest.digest,
        padding_source=lambda n: padding,
    )
    assert record.hex() == V["record"]


@pytest.mark.parametrize("envelope", ["envelope_js", "envelope_python"])
def test_an_envelope_opens_and_verifies(envelope: str) -> None:
    manifest = _manifest()
    message = bytes.fromhex(V[envelope])
    verifier = ClientVerifier(
        master_key=bytes.fromhex(V["master_key"]),
        roster=ClientRoster(client_processes=2, clients_per_process=16),
        round_id=V["round_id"],
    )
    client_id, onion = verifier.open(message)  # the tag verifies (else BadAuthenticator)
    assert client_id == V["client_id"]
    keys = [PrivateKey(bytes.fromhex(h)) for h in V["hop_secret_keys"]]
    keys.append(PrivateKey(bytes.fromhex(V["analyzer_secret_key"])))
    for stage, key in enumerate(keys):
        onion = peel(onion, key, expected_length=message_length(stage, len(keys) - 1))
    assert onion.hex() == V["record"]
    record = decode_record(
        onion, expected_round=V["round_id"], k=manifest.k, manifest_digest=manifest.digest
    )
    assert record.value == V["value"]


def test_derived_keys_are_the_vectors() -> None:
    assert process_key(bytes.fromhex(V["master_key"]), V["process"]).hex() == V["process_key"]


def test_a_changed_tag_is_refused() -> None:
    message = bytearray(bytes.fromhex(V["envelope_js"]))
    message[8] ^= 1
    verifier = ClientVerifier(
        master_key=bytes.fromhex(V["master_key"]),
        roster=ClientRoster(client_processes=2, clients_per_process=16),
        round_id=V["round_id"],
    )
    with pytest.raises(BadAuthenticator, match="does not verify"):
        verifier.open(bytes(message))


def test_the_receipt_vector_holds_exactly_its_bits() -> None:
    receipt = Receipt.decode(bytes.fromhex(V["receipt"]), round_id=V["round_id"], process=1)
    assert receipt is not None and receipt.closed and receipt.seq == 3
    assert [int(i) for i in receipt.accepted_mask(receipt.clients).nonzero()[0]] == V[
        "receipt_accepted"
    ]
