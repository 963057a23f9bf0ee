"""The fault bench's pure parts (simulations/faults): the row record's JSON round trip and
checks, the verdict on known cases, the accounting of a report (where reports went missing, and
the counted + lost == sent invariant failing when a report contradicts itself), the journal
bit flip, the broker configurations, the round's split over client processes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from shuffledp.errors import BrokerError, InvalidParameterError
from shuffledp.protocol.journal import KIND_HEADER, KIND_INPUTS, RECORD_HEAD, encode_record
from shuffledp.simulations.faults.brokers import keys_init_config, plain_config
from shuffledp.simulations.faults.harness import RoundSpec
from shuffledp.simulations.faults.records import FaultRow, judge, names_the_loss
from shuffledp.simulations.faults.runner import account
from shuffledp.simulations.faults.scenarios import SCENARIOS, flip_length_bit


def row(**changes: Any) -> FaultRow:
    fields: dict[str, Any] = {
        "scenario": "kill-client",
        "n": 2000,
        "sent": 2000,
        "counted": 1500,
        "duplicates": 3,
        "lost_at": {"before hop-0": 480, "hop-0->hop-1": 20},
        "exit_status": 1,
        "other_exits": {"hop-0": 3},
        "wall_seconds": 12.5,
        "verdict": "OK",
        "why": "loud loss where nothing can repair it",
        "message": "500 reports lost before hop-0",
        "notes": {"peak_rss_mib": {"mosquitto": 9.5}, "injected": True},
    }
    fields.update(changes)
    return FaultRow(**fields)


def test_row_json_round_trip_and_lost_is_the_sum_of_its_places() -> None:
    original = row()
    data = original.to_json()
    assert data["lost"] == 500 and original.lost == 500
    assert FaultRow.from_json(data) == original
    assert FaultRow.from_json(FaultRow.from_json(data).to_json()) == original
    no_report = row(exit_status=None, lost_at={"no report": 2000}, counted=0)
    assert FaultRow.from_json(no_report.to_json()) == no_report


@pytest.mark.parametrize(
    ("change", "rule"),
    [
        ({"verdict": "MAYBE"}, "verdict must be one of"),
        ({"counted": -1}, "counted must be >= 0"),
        ({"wall_seconds": -1.0}, "wall_seconds must be >= 0"),
        ({"notes": {"x": float("nan")}}, "notes.x"),
    ],
)
def test_row_refuses_bad_fields_naming_the_rule(change: dict[str, Any], rule: str) -> None:
    with pytest.raises(InvalidParameterError, match=rule):
        row(**change)


def test_row_from_json_refuses_a_lost_that_is_not_the_sum_and_unknown_keys() -> None:
    data = row().to_json()
    with pytest.raises(InvalidParameterError, match="lost must be the sum of lost_at = 500"):
        FaultRow.from_json({**data, "lost": 499})
    with pytest.raises(InvalidParameterError, match="unknown key"):
        FaultRow.from_json({**data, "extra": 1})


@pytest.mark.parametrize(
    ("case", "expected"),
    [
        ({"counted": 2000, "exit_status": 0}, ("OK", "every report counted once")),
        ({"counted": 1900, "exit_status": 0}, ("FAIL", "silent loss")),
        ({"counted": 2001, "exit_status": 0}, ("FAIL", "counted twice (1 more than sent)")),
        (
            {"counted": 1900, "exit_status": 1, "message": "100 reports lost at hop-0"},
            ("FAIL", "loud loss, but repairable"),
        ),
        (
            {
                "counted": 1900,
                "exit_status": 1,
                "message": "100 reports lost",
                "unrepairable": True,
            },
            ("OK", "loud loss where nothing can repair it"),
        ),
        (
            {
                "counted": 0,
                "exit_status": None,
                "other_exits": {"hop-0": 1},
                "unrepairable": True,
                "message": "Traceback: MqttCodeError: lost connection",
            },
            ("FAIL", "crash"),
        ),
        ({"counted": 0, "exit_status": None}, ("FAIL", "no report")),
        (
            {"counted": 1900, "exit_status": 3, "message": "something odd", "unrepairable": True},
            ("FAIL", "exit 3 without naming a loss"),
        ),
        (
            {
                "counted": 1000,
                "exit_status": 0,
                "other_exits": {"hop-0": 1},
                "message": "journal corrupt at byte 90: refused",
                "unrepairable": True,
            },
            ("OK", "loud loss where nothing can repair it"),
        ),
    ],
)
def test_verdicts_on_known_cases(case: dict[str, Any], expected: tuple[str, str]) -> None:
    arguments: dict[str, Any] = {
        "sent": 2000,
        "other_exits": {},
        "message": "",
        "unrepairable": False,
        **case,
    }
    assert judge(**arguments) == expected


def test_names_the_loss() -> None:
    assert names_the_loss("shuffledp hop: round refused: 900 < --min-batch 1000")
    assert names_the_loss("412 reports lost between clients-1 and hop-0")
    assert not names_the_loss("")
    assert not names_the_loss("analyzer did not announce ready within 60 s")
    assert not names_the_loss("Traceback: MqttCodeError: connection lost")


def report(hops: list[tuple[int, int]], n_received: int, histogram: list[int]) -> dict[str, Any]:
    stages = {f"hop-{i}": {"accepted": a, "forwarded": f} for i, (a, f) in enumerate(hops)}
    return {"stages": stages, "n_received": n_received, "histogram": histogram, "rejected": {}}


def test_account_places_each_missing_report_and_the_invariant_holds() -> None:
    published = report([(1900, 1900), (1900, 1890), (1880, 1880)], 1880, [1000, 880])
    published["rejected"] = {"duplicate": 4, "duplicate-frame": 1, "batch-full": 7}
    counted, lost, duplicates = account(published, sent=2000, hops=3)
    assert counted == 1880 and duplicates == 5
    assert lost == {"before hop-0": 100, "hop-1": 10, "hop-1->hop-2": 10}
    assert counted + sum(lost.values()) == 2000


def test_account_subtracts_the_attackers_reports_and_sees_a_report_that_contradicts_itself() -> (
    None
):
    # hop 0 accepted 2000 of which 1500 came from the attacker: 1500 genuine ones are missing.
    full = report([(2000, 2000), (2000, 2000)], 2000, [1200, 800])
    counted, lost, _ = account(full, sent=2000, hops=2, attacker=1500)
    assert counted == 500 and lost == {"before hop-0": 1500}
    # A histogram summing to less than n_received breaks counted + lost == sent.
    odd = report([(2000, 2000), (2000, 2000)], 2000, [1000, 900])
    counted, lost, _ = account(odd, sent=2000, hops=2)
    assert counted + sum(lost.values()) == 1900
    assert account(None, sent=2000, hops=3) == (0, {"no report": 2000}, 0)


def test_flip_length_bit_changes_one_bit_of_the_middle_records_length(tmp_path: Path) -> None:
    records = [encode_record(KIND_HEADER, b"{}")]
    records += [encode_record(KIND_INPUTS, bytes([i]) * (10 + i)) for i in range(5)]
    path = tmp_path / "hop-0.journal"
    path.write_bytes(b"".join(records) + records[1][:7])  # and a torn tail
    before = path.read_bytes()
    notes = flip_length_bit(path)
    after = path.read_bytes()
    chosen = sum(len(r) for r in records[:3])  # records 1..5 after the header: the third
    assert notes["injected"] is True and notes["records"] == 6
    assert notes["flipped_record_at_byte"] == chosen
    assert [i for i in range(len(before)) if before[i] != after[i]] == [chosen + 3]
    length = RECORD_HEAD.unpack_from(after, chosen)[0]
    assert length == RECORD_HEAD.unpack_from(before, chosen)[0] + 2**32


def test_flip_length_bit_skips_a_magic_line(tmp_path: Path) -> None:
    magic = b"shuffledp-hop-journal/9\n"
    records = [encode_record(KIND_HEADER, b"{}")]
    records += [encode_record(KIND_INPUTS, bytes([i]) * 20) for i in range(3)]
    path = tmp_path / "hop-0.journal"
    path.write_bytes(magic + b"".join(records))
    notes = flip_length_bit(path)
    chosen = len(magic) + sum(len(r) for r in records[:2])
    assert notes["records"] == 4 and notes["flipped_record_at_byte"] == chosen
    assert path.read_bytes()[chosen + 3] == records[2][3] ^ 0x01


def test_flip_length_bit_needs_records_to_flip(tmp_path: Path) -> None:
    path = tmp_path / "short.journal"
    path.write_bytes(encode_record(KIND_HEADER, b"{}"))
    assert flip_length_bit(path)["injected"] is False
    assert path.read_bytes() == encode_record(KIND_HEADER, b"{}")


def test_broker_configurations(tmp_path: Path) -> None:
    assert plain_config(1234) == "listener 1234 127.0.0.1\nallow_anonymous true\n"
    access = tmp_path / "keys" / "access"
    access.mkdir(parents=True)
    (access / "mosquitto.conf").write_text("allow_anonymous false\nlistener 1883 127.0.0.1\n")
    text = keys_init_config(tmp_path / "keys", 4321)
    assert text.startswith("allow_anonymous false\nlistener 4321 127.0.0.1\n")
    assert "1883" not in text
    (access / "mosquitto.conf").write_text("allow_anonymous false\n")
    with pytest.raises(BrokerError, match="expected one listener line, got 0"):
        keys_init_config(tmp_path / "keys", 4321)


@pytest.mark.parametrize(("n", "processes"), [(2000, 2), (7, 3), (10, 10), (2, 1)])
def test_round_spec_splits_n_like_simulate(n: int, processes: int) -> None:
    counts = RoundSpec(n=n, deadline=10, client_processes=processes).counts()
    assert sum(counts) == n and len(counts) == processes and max(counts) - min(counts) <= 1
    with pytest.raises(InvalidParameterError, match="--deadline must be > 0, got -1"):
        RoundSpec(n=n, deadline=-1)


def test_every_scenario_of_the_issue_is_there() -> None:
    assert list(SCENARIOS) == [
        "plain",
        "pause-hop0",
        "stall-hop0",
        "broker-restart",
        "journal-bitflip",
        "takeover",
        "junk",
        "fill-round",
        "kill-hop",
        "kill-analyzer",
        "kill-client",
        "wrong-flags",
        "forged-frames",
        "extra-report",
        "analyzer-rerun",
        "monitor-forge",
        "broker-kill9",
        "second-stage",
    ]
    assert {s.name for s in SCENARIOS.values() if s.unrepairable} == {
        "journal-bitflip",
        "kill-client",
        "broker-kill9",
    }
