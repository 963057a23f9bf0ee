"""The round's accounting (analyzer/delivery.py, Delivery in analyzer/records.py): known answers
from stage logs, where a loss is placed, and exact JSON round trips with every rule named."""

from __future__ import annotations

from typing import Any

import pytest

from shuffledp.analyzer.delivery import account_delivery
from shuffledp.analyzer.records import Delivery, DeliveryLeg
from shuffledp.errors import InvalidParameterError


def hop(accepted: int, forwarded: int, rejected: int = 0, **extra: Any) -> dict[str, Any]:
    return {"accepted": accepted, "forwarded": forwarded, "rejected": {"x": rejected}, **extra}


def test_a_clean_round_has_one_leg_per_stage_and_nothing_lost() -> None:
    stages = {f"hop-{i}": hop(100, 100) for i in range(3)}
    stages["hop-0"]["clients_sent"] = 100
    delivery = account_delivery(
        expected=100, stages=stages, n_hops=3, received=100, rejected=0, accept_loss=False
    )
    assert [(leg.source, leg.sink) for leg in delivery.legs] == [
        ("clients", "hop-0"),
        ("hop-0", "hop-1"),
        ("hop-1", "hop-2"),
        ("hop-2", "analyzer"),
    ]
    assert (delivery.lost, delivery.counted, delivery.message) == (0, 100, None)
    assert delivery.clients_sent == 100 and delivery.loss_accepted is False


def test_losses_are_placed_on_their_legs_and_screened_messages_are_not_lost() -> None:
    stages = {
        "hop-0": hop(18_387, 18_387, rejected=40, clients_sent=20_000),  # hop 0: junk rejected
        "hop-1": hop(18_380, 18_380, rejected=5),  # 2 lost, 5 screened out
        "hop-2": hop(18_380, 18_380),
    }
    delivery = account_delivery(
        expected=20_000, stages=stages, n_hops=3, received=18_370, rejected=4, accept_loss=False
    )
    assert [leg.lost for leg in delivery.legs] == [1_613, 2, 0, 6]
    assert delivery.lost == 1_621 and delivery.counted == 18_370
    assert delivery.message == (
        "lost 1,613 of 20,000 reports between clients and hop-0 (the client processes said "
        "they sent 20,000); lost 2 of 18,387 reports between hop-0 and hop-1; lost 6 of "
        "18,380 reports between hop-2 and analyzer"
    )


def test_rejections_after_hop_0_are_losses_named_by_reason() -> None:
    """Issue 23: hop 1 run with --expected 1500 for 2,000 reports said "1,500 received, lost 0"
    with 500 batch-full "rejections". Its input came in hop 0's signed frames: they are lost,
    and so are copies (an honest hop forwards each message once: a hop that padded a drop with
    copies must not hide it); what the analyzer refuses for a record's fields is screened."""
    stages = {
        "hop-0": {"accepted": 2_000, "forwarded": 2_000, "rejected": {"batch-full": 7}},
        "hop-1": {
            "accepted": 1_500,
            "forwarded": 1_500,
            "rejected": {"batch-full": 497, "duplicate": 3},
        },
        "hop-2": {"accepted": 1_498, "forwarded": 1_498, "rejected": {"decryption-failed": 2}},
        "analyzer": {"rejected": {"decryption-failed": 1, "wrong-round": 4}},
    }
    delivery = account_delivery(
        expected=2_000, stages=stages, n_hops=3, received=1_493, rejected=4, accept_loss=False
    )
    # hop 0's batch-full is no genuine report (clients over the enrolment); later ones are.
    assert [leg.lost for leg in delivery.legs] == [0, 500, 2, 1]
    assert [leg.rejected for leg in delivery.legs] == [0, 0, 0, 4]
    assert delivery.lost == 503
    assert delivery.message == (
        "lost 500 of 2,000 reports between hop-0 and hop-1 (duplicate 3, batch-full 497); "
        "lost 2 of 1,500 reports between hop-1 and hop-2 (decryption-failed 2); "
        "lost 1 of 1,498 reports between hop-2 and analyzer (decryption-failed 1)"
    )


def test_a_refusing_hop_ends_the_legs_and_a_silent_one_is_spanned() -> None:
    refused = {"hop-0": hop(150, 0, clients_sent=150)}
    delivery = account_delivery(
        expected=300, stages=refused, n_hops=3, received=0, rejected=0, accept_loss=False
    )
    assert [(leg.source, leg.sink, leg.sent, leg.counted) for leg in delivery.legs] == [
        ("clients", "hop-0", 300, 150)
    ]
    assert delivery.lost == 150 and delivery.counted == 150
    # No log at all (the last hop's END never came): one leg from the clients to the analyzer.
    silent = account_delivery(
        expected=300, stages={}, n_hops=3, received=0, rejected=0, accept_loss=True
    )
    assert [(leg.source, leg.sink, leg.sent) for leg in silent.legs] == [
        ("clients", "analyzer", 300)
    ]
    assert silent.lost == 300 and silent.loss_accepted is True
    # An unreadable log (not counts) is no evidence: it is spanned, not trusted.
    junk = account_delivery(
        expected=10,
        stages={"hop-0": {"accepted": "many"}, "hop-1": hop(10, 10)},
        n_hops=2,
        received=10,
        rejected=0,
        accept_loss=False,
    )
    assert [(leg.source, leg.sink) for leg in junk.legs] == [
        ("clients", "hop-1"),
        ("hop-1", "analyzer"),
    ]


def test_delivery_round_trips_and_names_its_rules() -> None:
    legs = (
        DeliveryLeg(source="clients", sink="hop-0", sent=10, counted=8),
        DeliveryLeg(source="hop-0", sink="analyzer", sent=8, counted=7, rejected=1),
    )
    delivery = Delivery(
        expected=10,
        counted=7,
        lost=2,
        legs=legs,
        clients_sent=10,
        loss_accepted=True,
        message="lost 2 of 10 reports between clients and hop-0",
    )
    assert Delivery.from_json(delivery.to_json()) == delivery
    clean = Delivery(
        expected=3, counted=3, lost=0, legs=(DeliveryLeg(source="a", sink="b", sent=3, counted=3),)
    )
    assert Delivery.from_json(clean.to_json()) == clean
    assert "message" not in clean.to_json() and "clients_sent" not in clean.to_json()
    with pytest.raises(InvalidParameterError, match=r"delivery\.lost must be the legs' losses"):
        Delivery(expected=10, counted=7, lost=3, legs=legs, message="x")
    with pytest.raises(InvalidParameterError, match=r"delivery\.message must be given exactly"):
        Delivery(expected=10, counted=7, lost=2, legs=legs)
    with pytest.raises(InvalidParameterError, match=r"delivery\.loss_accepted must be a bool"):
        Delivery(expected=3, counted=3, lost=0, legs=clean.legs, loss_accepted=True)
    with pytest.raises(InvalidParameterError, match=r"delivery\.legs\[\]\.counted"):
        DeliveryLeg(source="a", sink="b", sent=1, counted=-1)
    bad = delivery.to_json()
    bad["legs"][0]["extra"] = 1
    with pytest.raises(InvalidParameterError):
        Delivery.from_json(bad)
