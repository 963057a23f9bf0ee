"""`--broker URL[,URL...]` (shuffledp/cli/broker_urls.py): parsing and who connects where."""

from __future__ import annotations

from pathlib import Path

import pytest

from shuffledp.cli.broker_urls import MAX_BROKERS, broker_urls, client_broker, hop_connection
from shuffledp.errors import InvalidParameterError
from shuffledp.protocol.fanin import FanInTransport
from shuffledp.protocol.mqtt import MqttTransport

A, B, C = "mqtt://10.77.0.2:1883", "mqtt://10.77.0.3:1883", "mqtt://10.77.0.4"


def test_one_url_or_several() -> None:
    assert broker_urls(A) == (A,)
    assert broker_urls(f"{A},{B},{C}") == (A, B, C)


@pytest.mark.parametrize(
    ("text", "rule"),
    [
        (f"{A},", "without empty entries"),
        (f"{A},{A}", "must not list a URL twice"),
        (f"{A},mqtts://h:8883", "only mqtt:// or only mqtts://"),
        (f"{A},tcp://h:1", "must start with mqtt:// or mqtts://"),
        (",".join(f"mqtt://h:{p}" for p in range(1, MAX_BROKERS + 2)), "at most 64 URLs, got 65"),
    ],
)
def test_a_bad_list_is_refused_naming_the_rule(text: str, rule: str) -> None:
    with pytest.raises(InvalidParameterError, match="--broker") as caught:
        broker_urls(text)
    assert rule in str(caught.value)


def test_client_process_j_takes_broker_j_mod_b() -> None:
    urls = (A, B, C)
    assert [client_broker(urls, j) for j in range(7)] == [A, B, C, A, B, C, A]
    assert client_broker((A,), 5) == A


@pytest.mark.asyncio  # aiomqtt's client needs a running loop
async def test_hop_0_connects_to_every_broker_and_later_hops_to_the_first() -> None:
    def connect(url: str) -> MqttTransport:
        return MqttTransport(url, client_id="hop-test")

    fan = hop_connection((A, B), 0, "p/round/1/hop/1", connect)
    assert isinstance(fan, FanInTransport)
    assert [m.url for m in fan.members] == [A, B]  # type: ignore[attr-defined]
    later = hop_connection((A, B), 1, "p/round/1/analyzer", connect)
    assert isinstance(later, MqttTransport) and later.url == A
    single = hop_connection((A,), 0, "p/round/1/hop/1", connect)
    assert isinstance(single, MqttTransport) and single.url == A


@pytest.mark.parametrize("command", ["hop", "analyzer", "clients"])
def test_the_command_refuses_a_bad_list_in_one_line_before_anything_else(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from shuffledp.cli.main import main

    extra = {
        "hop": ["--index", "0"],
        "analyzer": [],
        "clients": ["--name", "clients-0", "--values", "synthetic"],
    }[command]
    missing = str(tmp_path / "absent")  # never read: the list is checked first
    code = main([command, "--keys", missing, "--manifest", missing, "--broker", f"{A},{A}", *extra])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and "--broker must not list a URL twice" in err, err
