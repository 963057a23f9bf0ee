"""`shuffledp hop --role peeler|mixer`: one process of a hop that is W peelers and a mixer
(docs/hop-workers.md; the manifest's ``hop_workers`` says W).

Each process logs in under its own broker account (Mosquitto takes the user name as the client
id): peeler P of hop I as ``hop-I-pP``, the mixer as ``hop-I``. All hold the hop's keys.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from typing import TYPE_CHECKING, Any

from shuffledp.cli.connection import broker_credentials, id_secret, session_options, will_topic
from shuffledp.cli.outcome import hop_exit_status, run_component
from shuffledp.protocol.client_auth import ClientRoster
from shuffledp.protocol.manifest import Manifest
from shuffledp.protocol.mqtt import MqttTransport
from shuffledp.randomness import default_source
from shuffledp.security.access import load_client_verifier

if TYPE_CHECKING:
    from shuffledp.shuffler.service import HopSettings

__all__ = ["run_hop_worker"]


def run_hop_worker(
    args: argparse.Namespace, manifest: Manifest, settings: HopSettings, key: Any
) -> int:
    """Run this peeler or mixer for one round; the exit status as ``shuffledp hop``'s."""
    # The shuffler is imported here, as by `shuffledp hop`, so that `shuffledp --help` and the
    # other commands do not load it.
    from shuffledp.shuffler.mixer import run_mixer
    from shuffledp.shuffler.workers import PeelerSettings, peeler_stage, run_peeler

    workers = manifest.hop_workers
    peeler = args.role == "peeler"
    identity = peeler_stage(args.index, args.worker) if peeler else settings.stage
    if peeler and args.index == 0:
        share = manifest.peeler_share(args.worker)  # the mixer checks the batch's minimum
        settings = replace(settings, expected_size=share, min_batch=min(share, settings.min_batch))
    verifier = (
        load_client_verifier(args.keys, args.round, roster=ClientRoster.exact(manifest.clients))
        if peeler and args.index == 0 and manifest.client_auth
        else None
    )
    username, password = broker_credentials(args, identity)
    rng = default_source(args.seed)

    # --state-dir: a journal, acknowledged manually over a persistent session (crash resume).
    state_dir = args.state_dir
    journaled = state_dir is not None

    async def main() -> int:
        async with MqttTransport(
            args.brokers[0],
            will_topic=will_topic(args, identity),
            username=username,
            password=password,
            tls_ca=args.tls_ca,
            exclusive=True,
            manual_ack=journaled,
            **session_options(
                args, identity, id_secret(username, password, key), persistent=journaled
            ),
        ) as t:
            if peeler:
                own = PeelerSettings(hop=settings, workers=workers, worker=args.worker)
                result = await run_peeler(t, own, key, verifier=verifier, state_dir=state_dir)
            else:
                result = await run_mixer(t, settings, workers, key, rng=rng, state_dir=state_dir)
        return hop_exit_status(result)

    return run_component(args, main())
