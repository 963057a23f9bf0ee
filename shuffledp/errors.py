"""Every error shuffledp raises on purpose derives from :class:`ShuffledpError`.

The tree (what the command line does with each branch in brackets; tests/unit/test_error_tree.py
keeps it, and the copy in docs/architecture.md, equal to the class hierarchy)::

    ShuffledpError
    ├── InvalidParameterError       bad input: a flag, a parameter, a file  [exit 2]
    │   ├── security.keys.KeyDirectoryError
    │   │   └── security.access.AccessError
    │   ├── security.tls.TlsError
    │   ├── protocol.journal.JournalError
    │   ├── protocol.manifest.ManifestError
    │   ├── simulations.data.checkins.CheckInReadError
    │   └── simulations.data.fetch.DataMissingError   no check-in data: the line says how to get it
    ├── OutsideConditionsError      a bound asked outside the conditions it holds in  [exit 2]
    │   └── accountant.engines.gsum.TooLargeError
    ├── RejectedMessage             a message from the network refused by a stage; counted
    │                               by reason, never fatal (protocol.errors has one per reason)
    ├── simulations.pipeline.api.RunningEventLoopError   the sync API called inside a loop
    └── OperationalError            a run that failed: broker, round, lost reports  [exit 1]
        ├── BrokerError             unreachable, refused, or could not start
        │   ├── protocol.mqtt.MqttConnectionError
        │   │   └── protocol.mqtt.IdentityInUseError   another process runs as this stage
        │   └── brokers.ports.PortInUseError
        ├── protocol.runtime.NotReadyError
        ├── protocol.delivery.ReportsLostError   reports lost, no --accept-loss  [exit 5]
        ├── protocol.delivery.ReportExistsError  the round's report is already published  [exit 6]
        ├── shuffler.hop.BatchTooSmall, shuffler.hop.RoundClosedError
        ├── analyzer.estimators.IBUConvergenceError
        ├── simulations.pipeline.simulate.SimulationError
        │   └── RoundRefusedError
        │       └── RoundLossError (also a ReportsLostError)  [exit 5]
        ├── simulations.pipeline.stream.StreamError
        ├── simulations.pipeline.stream.runner.StreamRoundRefusedError
        ├── simulations.data.fetch.FetchError
        │   └── simulations.data.fetch.IntegrityError
        └── simulations.experiments.base.ExperimentError

Each class keeps the built-in base it had (``ValueError`` for bad input, ``RuntimeError`` for
failures), so ``except ValueError`` written against an older version still works. This module
imports nothing from the package: every layer may use it.
"""

from __future__ import annotations

from typing import ClassVar


class ShuffledpError(Exception):
    """Base of every error shuffledp raises on purpose; the CLI prints it as one line."""


class InvalidParameterError(ShuffledpError, ValueError):
    """A parameter, flag or input file breaks a stated rule (the message names rule and value,
    with the user's word for it: the flag, not the Python identifier)."""


class OutsideConditionsError(ShuffledpError, ValueError):
    """A bound was asked for outside the conditions under which it holds."""


class RejectedMessage(ShuffledpError, ValueError):  # noqa: N818 (subclasses name reasons)
    """A received message that the protocol refuses; ``reason`` names the rule it broke."""

    reason: ClassVar[str] = "rejected"


class OperationalError(ShuffledpError, RuntimeError):
    """A run that could not complete: a broker, a stage, a round or an experiment failed."""


class BrokerError(OperationalError):
    """A broker is unreachable, refused the connection, or could not be started."""
