"""The exact bytes of the files `keys init` writes that depend on its parameters only (no
randomness): the broker ACL, access.json and the layout of public.json. Known answers, written
out here, so that a refactoring of the writers cannot change a byte unnoticed (the permissions
these files grant: test_access_control.py, the brokers: tests/integration)."""

from __future__ import annotations

from pathlib import Path

from shuffledp.protocol.onion import public_key_to_bytes
from shuffledp.security.access import init_access
from shuffledp.security.keys import init_key_directory
from shuffledp.security.mosquitto_bounds import STAGE_ACCOUNTS, build_bounds_plugin

ACL_TWO_HOPS_ONE_CLIENT_PROCESS = """\
# shuffledp broker ACL (made by `shuffledp keys init`): anything not listed is denied

user hop-0
topic read kat/round/+/hop/0
topic read kat/round/+/status/hop-1
topic read kat/round/+/claim/+
topic write kat/round/+/hop/1
topic write kat/round/+/status/hop-0
topic write kat/round/+/progress/hop-0
topic write kat/round/+/receipt/+

user hop-1
topic read kat/round/+/hop/1
topic read kat/round/+/status/analyzer
topic write kat/round/+/analyzer
topic write kat/round/+/status/hop-1
topic write kat/round/+/progress/hop-1

user analyzer
topic read kat/round/+/analyzer
topic read kat/round/+/report
topic write kat/round/+/report
topic write kat/round/+/status/analyzer
topic write kat/round/+/progress/analyzer

user monitor
topic read kat/round/+/status/+
topic read kat/round/+/progress/+
topic read kat/round/+/report

user clients-0
topic read kat/round/+/status/hop-0
topic read kat/round/+/receipt/clients-0
topic write kat/round/+/hop/0
topic write kat/round/+/status/clients-0
topic write kat/round/+/progress/clients-0
topic write kat/round/+/claim/clients-0
"""

ACCESS_JSON = """\
{
  "format": "shuffledp-access",
  "version": 1,
  "prefix": "kat",
  "n_hops": 2,
  "client_processes": 1,
  "clients_per_process": 7,
  "identities": [
    "hop-0",
    "hop-1",
    "analyzer",
    "monitor",
    "clients-0"
  ]
}
"""

PUBLIC_JSON = """\
{{
  "format": "shuffledp-keys",
  "version": 2,
  "n_hops": 2,
  "hops": [
    "{hop0}",
    "{hop1}"
  ],
  "analyzer": "{analyzer}",
  "signing": {{
    "hop-0": "{sign_hop0}",
    "hop-1": "{sign_hop1}",
    "analyzer": "{sign_analyzer}",
    "coordinator": "{sign_coordinator}"
  }}
}}
"""


def test_access_files_are_the_known_answers(tmp_path: Path) -> None:
    init_access(tmp_path, hops=2, client_processes=1, prefix="kat", clients_per_process=7)
    root = tmp_path / "access"
    assert (root / "acl").read_bytes() == ACL_TWO_HOPS_ONE_CLIENT_PROCESS.encode()
    assert (root / "access.json").read_bytes() == ACCESS_JSON.encode()
    conf = (root / "mosquitto.conf").read_text()
    directives = [line for line in conf.splitlines() if line and not line.startswith("#")]
    # The bounds plugin (security/mosquitto_bounds.py), where it can be built here.
    plugin = [
        f"plugin {root / 'mosquitto_bounds.so'}",
        "plugin_opt_client_payload_bytes 16384",
        f"plugin_opt_stage_accounts {STAGE_ACCOUNTS}",
    ]
    built = build_bounds_plugin().path is not None
    assert directives[: 5 + 3 * built] == [
        "per_listener_settings false",
        "allow_anonymous false",
        f"password_file {root / 'passwd'}",
        f"acl_file {root / 'acl'}",
        *(plugin if built else []),
        "max_queued_messages 2000000",
    ]
    assert directives[-5:] == [
        "persistence true",
        f"persistence_location {root}/",
        "autosave_interval 300",
        "listener 1883 127.0.0.1",
        "use_username_as_clientid true",
    ]


def test_public_json_is_the_known_layout(tmp_path: Path) -> None:
    published = init_key_directory(tmp_path, hops=2)
    hop0, hop1 = (public_key_to_bytes(key).hex() for key in published.hop_keys)
    analyzer = public_key_to_bytes(published.analyzer_key).hex()
    signing = {
        f"sign_{name.replace('-', '')}": key.hex() for name, key in published.verify_keys.items()
    }
    expected = PUBLIC_JSON.format(hop0=hop0, hop1=hop1, analyzer=analyzer, **signing)
    assert (tmp_path / "public.json").read_bytes() == expected.encode("ascii")
