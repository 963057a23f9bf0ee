"""The mixer's journal (shuffler/mix_journal.py) and its use by the mixer's intake.

Invariants, each of which a wrong journal breaks:
- what was committed survives a reopen (items, frames, ENDs, counters); a burst not committed
  when the process stopped is gone whole (it was never acknowledged: the broker delivers it
  again);
- the release is every item exactly once, and a release interrupted and started again from the
  reopened journal yields the same sequence (each bucket's order is committed before its first
  item leaves), while buckets not yet begun may draw afresh;
- the mixer's intake, restored from the journal, counts a frame it already holds as
  ``duplicate-frame`` (never twice), takes the frames it does not hold, and takes a peeler's END
  back with its statement;
- a journal of other settings, or one in use, is refused naming the file and the field.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from nacl.public import SealedBox

from shuffledp.protocol.end_statement import EndStatement, peeler_sender
from shuffledp.protocol.frames import KIND_DATA, FrameAssembler, FrameSigner, encode_end
from shuffledp.protocol.journal import JournalError
from shuffledp.shuffler.mix_journal import MixJournal
from shuffledp.shuffler.mixer import _MixIntake
from tests.binding import MANIFEST_DIGEST
from tests.unit.test_services_memory import HOPS, hop_settings

IDENTITY = {"stage": "hop-0", "round_id": 3}
ITEM = 24


def opened(
    tmp_path: Path, *, buckets: int = 4, identity: dict[str, object] | None = None
) -> MixJournal:
    return MixJournal.open(
        tmp_path, "mix.sqlite", identity or IDENTITY, item_length=ITEM, buckets=buckets
    )


def items(count: int, tag: int = 0) -> list[bytes]:
    return [bytes([tag]) + i.to_bytes(4, "big") + os.urandom(ITEM - 5) for i in range(count)]


def test_committed_bursts_survive_and_an_uncommitted_one_is_rolled_back(tmp_path: Path) -> None:
    journal = opened(tmp_path)
    first = items(50)
    journal.add_many(first)
    journal.note_data(0x8000, 0, 50)
    journal.commit(unsealable=2)
    journal.add_many(items(30, tag=1))  # the process dies before this burst is committed
    journal.note_data(0x8000, 1, 30)
    assert journal.count == 80
    journal.close()
    again = opened(tmp_path)
    assert again.count == again.resumed_items == 50
    assert again.frames() == [(0x8000, 0, 50)]
    assert again.unsealable == 2
    assert sorted(again.release()) == sorted(first)
    again.close()


def test_a_release_started_again_yields_the_same_sequence(tmp_path: Path) -> None:
    journal = opened(tmp_path, buckets=5)
    batch = items(400)
    journal.add_many(batch)
    journal.commit(unsealable=0)
    journal.close_round({"log": {}, "release": {}})
    journal.close()
    first = opened(tmp_path, buckets=5)
    released = first.release()
    head = [next(released) for _ in range(150)]  # some buckets begun, then the mixer dies
    first.close()
    second = opened(tmp_path, buckets=5)
    assert second.closed == {"log": {}, "release": {}}
    whole = list(second.release())
    assert whole[:150] == head
    assert sorted(whole) == sorted(batch)  # every item exactly once
    second.close()
    replayed = opened(tmp_path, buckets=5)
    assert list(replayed.release()) == whole  # every bucket's order is committed now
    replayed.remove()
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_other_settings_or_a_second_process_are_refused(tmp_path: Path) -> None:
    journal = opened(tmp_path)
    with pytest.raises(JournalError, match="locked by another running process"):
        opened(tmp_path)
    journal.close()
    with pytest.raises(JournalError, match="round_id is 3 there, 4 here"):
        opened(tmp_path, identity={"stage": "hop-0", "round_id": 4})
    with pytest.raises(JournalError, match="buckets is 4 there, 2 here"):
        opened(tmp_path, buckets=2)
    assert oct((tmp_path / "mix.sqlite").stat().st_mode & 0o777) == "0o600"


def _peeler_frames(count: int) -> tuple[list[bytes], bytes]:
    """Peeler 0 of hop 0: ``count`` data frames of 3 items each, sealed, and its sealed END."""
    settings = hop_settings(0, round_id=3, expected_size=100)
    signer = FrameSigner(
        manifest_digest=MANIFEST_DIGEST,
        round_id=3,
        sender=peeler_sender(0, 0),
        signing_key=settings.signing_key,
    )
    box = SealedBox(HOPS[0].private.public_key)
    frames = [
        bytes(box.encrypt(signer.frame(KIND_DATA, s, 3, ITEM, b"".join(items(3, tag=s)))))
        for s in range(count)
    ]
    statement = EndStatement(
        stage="hop-0-p0",
        accepted=3 * count,
        forwarded=3 * count,
        frames=count,
        rejected={},
        aborted=None,
        upstream_end=None,
        stages={
            "hop-0-p0": {"accepted": 3 * count, "forwarded": 3 * count, "rejected": {}},
        },
    )
    end = encode_end(signer=signer, item_length=ITEM, statement=statement, upstream_chain=())
    return frames, bytes(box.encrypt(end))


def _intake(journal: MixJournal) -> _MixIntake:
    settings = hop_settings(0, round_id=3, expected_size=100)
    sender = peeler_sender(0, 0)
    verify = settings.signing_key.verify_key
    return _MixIntake(
        ingress="x",
        box=SealedBox(HOPS[0].private),
        assemblers={sender: FrameAssembler(3, MANIFEST_DIGEST, sender, verify)},
        store=journal,
        journal=journal,
    )


def test_a_restored_mixer_counts_each_frame_once(tmp_path: Path) -> None:
    frames, end = _peeler_frames(6)
    journal = opened(tmp_path)
    intake = _intake(journal)
    intake._take([*frames[:4], b"not sealed"])
    journal.close()  # killed
    journal = opened(tmp_path)
    intake = _intake(journal)
    intake.restore(journal)
    assembler = intake.assemblers[peeler_sender(0, 0)]
    assert (assembler.frames_received, assembler.messages_received) == (4, 12)
    assert intake.unsealable == 1
    # the broker delivers frames 2..3 again, a restarted peeler all six, then its END
    intake._take([*frames[2:4], *frames, end])
    assert assembler.rejected["duplicate-frame"] == 6
    assert journal.count == 18 and assembler.complete
    journal.close()
    journal = opened(tmp_path)
    intake = _intake(journal)
    intake.restore(journal)
    assembler = intake.assemblers[peeler_sender(0, 0)]
    assert assembler.complete and assembler.statement is not None
    assert assembler.statement.forwarded == journal.count == 18
    journal.close()
