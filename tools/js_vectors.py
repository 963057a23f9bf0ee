"""Print the Python half of the cross-implementation vectors of docs/protocol.md (one-off: the
vectors are fixed in the doc; tests/unit/protocol/test_js_vectors.py and clients/js/test/
vectors.test.js check them). Usage: python tools/js_vectors.py"""

import hashlib
import json

from nacl.public import PrivateKey
from nacl.signing import SigningKey

from shuffledp.protocol.client_auth import ClientCredential, process_key, seal_envelope
from shuffledp.protocol.manifest import Manifest, StageKeys, sign_manifest
from shuffledp.protocol.onion import wrap
from shuffledp.protocol.receipts import Receipt, bitmap_of
from shuffledp.protocol.record import encode_record


def seed(name: str) -> bytes:
    return hashlib.sha256(b"shuffledp/js-vectors/" + name.encode()).digest()


def main() -> None:
    hops = [PrivateKey(seed(f"hop-{i}")) for i in range(2)]
    analyzer = PrivateKey(seed("analyzer"))
    signers = [SigningKey(seed(f"sign-{i}")) for i in range(3)]
    coordinator = SigningKey(seed("coordinator"))
    round_id = 2**40 + 5
    manifest = Manifest(
        prefix="shuffledp/vectors",
        rounds=(7, round_id),
        k=5,
        labels=("a", "b", "caf\u00e9", 'quote"', "e"),
        eps0=4.0,
        hops=tuple(
            StageKeys(box=bytes(h.public_key), sign=bytes(s.verify_key), name=f"hops[{i}]")
            for i, (h, s) in enumerate(zip(hops, signers, strict=False))
        ),
        analyzer=StageKeys(box=bytes(analyzer.public_key), sign=bytes(signers[2].verify_key)),
        clients=(3, 9),
        expected=12,
        min_batch=6,
        deadline=60.002,
        delta=1e-06,
        colluders=0,
        coordinator=bytes(coordinator.verify_key),
    )
    signed = sign_manifest(manifest, coordinator)
    padding = bytes(range(19))
    record = encode_record(
        round_id, 3, 5, manifest_digest=manifest.digest, padding_source=lambda n: padding
    )
    onion = wrap(record, [h.public_key for h in hops], analyzer.public_key)
    master = seed("master")
    credential = ClientCredential.derive(process_key(master, 1), 1, 7)
    envelope = seal_envelope(credential, round_id, onion)
    print(
        json.dumps(
            {
                "hop_secret_keys": [bytes(h).hex() for h in hops],
                "analyzer_secret_key": bytes(analyzer).hex(),
                "manifest_file": signed.to_json(),
                "manifest_digest": manifest.digest.hex(),
                "round_id": round_id,
                "value": 3,
                "padding": padding.hex(),
                "record": record.hex(),
                "master_key": master.hex(),
                "process": 1,
                "index": 7,
                "client_id": credential.client_id,
                "process_key": process_key(master, 1).hex(),
                "client_key": credential.key.hex(),
                "envelope_python": envelope.hex(),
                "receipt": Receipt(
                    round_id=round_id,
                    process=1,
                    clients=11,
                    bitmap=bitmap_of([0, 2, 9], 11),
                    seq=3,
                    closed=True,
                )
                .encode()
                .hex(),
                "receipt_accepted": [0, 2, 9],
            },
            indent=1,
        )
    )


if __name__ == "__main__":
    main()
