"""Broker accounts and topic ACLs (shuffledp.security.access): the files and the rules (on the
brokers themselves: tests/integration/test_access_brokers.py)."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from shuffledp.security.access import (
    access_rules,
    init_access,
    load_password,
    parse_acl_file,
    topic_matches,
)

PREFIX = "acl-test"


def test_topic_matching_rules() -> None:
    assert topic_matches("p/round/7/hop/0", "p/round/+/hop/0")
    assert not topic_matches("p/round/7/hop/1", "p/round/+/hop/0")
    assert not topic_matches("p/round/7/hop/0/x", "p/round/+/hop/0")
    assert topic_matches("p/round/7/status/+", "p/round/+/status/+")
    assert not topic_matches("p/round/7/status/#", "p/round/+/status/+")  # wider than allowed
    assert not topic_matches("p/round/+/hop/+", "p/round/+/hop/0")
    assert topic_matches("p/a/b", "p/#")


def test_init_access_files_and_rules(tmp_path: Path) -> None:
    names = init_access(tmp_path, hops=2, client_processes=2, prefix=PREFIX)
    assert names == ("hop-0", "hop-1", "analyzer", "monitor", "clients-0", "clients-1")
    root = tmp_path / "access"
    passwords = {name: load_password(tmp_path, name) for name in names}
    assert len(set(passwords.values())) == len(names)
    for name in [*(f"{n}.password" for n in names), "passwd", "acl"]:
        assert stat.S_IMODE((root / name).stat().st_mode) == 0o600
    rules = parse_acl_file(root / "acl")
    assert rules == {rule.identity: rule for rule in access_rules(PREFIX, 2, 2)}
    client = rules["clients-0"]
    ingress = f"{PREFIX}/round/5/hop/0"
    assert any(topic_matches(ingress, t) for t in client.write)
    for forbidden in (f"{PREFIX}/round/5/hop/1", f"{PREFIX}/round/5/analyzer"):
        assert not any(topic_matches(forbidden, t) for t in client.write)
    assert not any(topic_matches(ingress, t) for t in client.read)
    assert not any(topic_matches(f"{PREFIX}/round/5/status/hop-0", t) for t in client.write)
    # The monitor writes nothing; the analyzer is the only identity that may write a report.
    assert rules["monitor"].write == ()
    report = f"{PREFIX}/round/5/report"
    writers = {
        name for name, rule in rules.items() if any(topic_matches(report, t) for t in rule.write)
    }
    assert writers == {"analyzer"}
    with pytest.raises(Exception, match="already holds files"):
        init_access(tmp_path, hops=2, client_processes=2, prefix=PREFIX)


def test_generated_mosquitto_config_binds_ids_and_bounds_resources(tmp_path: Path) -> None:
    """keys init's mosquitto.conf: client ids tied to accounts, bounded queues and packets,
    persistence in the access directory (enforced on Mosquitto itself: integration tests)."""
    from shuffledp.security.broker_limits import (
        QUEUED_BYTES,
        QUEUED_MESSAGES,
        STAGE_PACKET_BYTES,
        client_payload_bytes,
    )

    init_access(tmp_path, hops=3, client_processes=1, prefix=PREFIX)
    lines = (tmp_path / "access" / "mosquitto.conf").read_text().splitlines()
    settings = {line.split()[0]: line.split()[1:] for line in lines if line and line[0] != "#"}
    assert settings["use_username_as_clientid"] == ["true"]
    # A listener setting: before the first listener it would open a default listener on port
    # 1883 of every interface.
    listener = lines.index("listener 1883 127.0.0.1")
    assert lines.index("use_username_as_clientid true") > listener
    assert settings["allow_anonymous"] == ["false"]
    assert settings["max_queued_messages"] == [str(QUEUED_MESSAGES)]
    assert settings["max_queued_bytes"] == [str(QUEUED_BYTES)]
    assert settings["max_packet_size"] == [str(STAGE_PACKET_BYTES)]
    assert settings["persistence"] == ["true"]
    assert settings["persistence_location"] == [f"{tmp_path / 'access'}/"]
    # A client's report (3 hops: 296 bytes) fits its bound, which is far below a stage's.
    assert 296 <= client_payload_bytes(3) < STAGE_PACKET_BYTES // 100


def test_hop_workers_accounts_reach_only_their_topics() -> None:
    from shuffledp.security.access import access_rules, identities, topic_matches

    names = identities(2, 2, hop_workers=2)
    assert names[:6] == ("hop-0", "hop-1", "hop-0-p0", "hop-0-p1", "hop-1-p0", "hop-1-p1")
    rules = {r.identity: r for r in access_rules("p", 2, 2, hop_workers=2)}

    def may(identity: str, how: str, topic: str) -> bool:
        return any(topic_matches(topic, f) for f in getattr(rules[identity], how))

    r = "p/round/9"
    assert may("clients-1", "write", f"{r}/hop/0/w/1")
    assert not may("clients-1", "write", f"{r}/hop/0/w/0")  # only its own peeler
    assert may("hop-0-p1", "read", f"{r}/hop/0/w/1") and not may(
        "hop-0-p1", "read", f"{r}/hop/0/w/0"
    )
    assert may("hop-0-p1", "write", f"{r}/hop/0/mix") and not may(
        "hop-0-p1", "read", f"{r}/hop/0/mix"
    )
    assert may("hop-0", "read", f"{r}/hop/0/mix") and may("hop-0", "write", f"{r}/hop/1")
    assert may("hop-1-p0", "read", f"{r}/hop/1/w/0") and not may(
        "hop-1-p0", "read", f"{r}/hop/1/w/1"
    )
    assert may("hop-0", "write", f"{r}/hop/1/w/1") and not may("hop-1-p0", "write", f"{r}/analyzer")
    assert not may("hop-1-p0", "write", f"{r}/status/hop-1")  # a peeler cannot speak as the hop
    assert may("hop-1", "write", f"{r}/status/hop-1-mix")
