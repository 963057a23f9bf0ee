"""`shuffledp stream`: replay check-ins over time as epochs, one pipeline round per epoch, with
each user's privacy composed over the rounds it took part in (docs/data-and-streams.md).

One concept per module:

* :mod:`.events`: the input, check-ins inside the region as time-ordered events;
* :mod:`.epochs`: UTC-aligned epochs and the grouping of events into them (late events);
* :mod:`.ledger`: each user's rounds and composed guarantee (dp-accounting PLDs, memoised);
* :mod:`.budget`: ``--budget EPS,DELTA`` and who may report in a round under it;
* :mod:`.records`: the typed records the stream emits (``shuffledp/stream/1``);
* :mod:`.runner`: the runner, one round per epoch through a round runner.

The names below are re-exported here, the stream's public entry.
"""

from __future__ import annotations

from shuffledp.simulations.pipeline.stream.budget import Budget, parse_budget
from shuffledp.simulations.pipeline.stream.epochs import (
    EPOCH_ORIGIN,
    EmptyEpochs,
    Epoch,
    EpochAssembler,
    epoch_number,
    parse_epoch_length,
)
from shuffledp.simulations.pipeline.stream.events import (
    InputCounts,
    StreamError,
    StreamEvent,
    events_from_arrays,
    events_from_checkins,
    sorted_events,
)
from shuffledp.simulations.pipeline.stream.ledger import STREAM_DISCRETIZATION, UserLedger
from shuffledp.simulations.pipeline.stream.records import (
    STREAM_SCHEMA,
    EmptyEpochsRecord,
    EpochRecord,
    StreamRecord,
    StreamSummary,
    read_stream_record,
)
from shuffledp.simulations.pipeline.stream.runner import (
    StreamRoundRefusedError,
    StreamRunner,
    StreamSettings,
)

__all__ = [
    "EPOCH_ORIGIN",
    "STREAM_DISCRETIZATION",
    "STREAM_SCHEMA",
    "Budget",
    "EmptyEpochs",
    "EmptyEpochsRecord",
    "Epoch",
    "EpochAssembler",
    "EpochRecord",
    "InputCounts",
    "StreamError",
    "StreamEvent",
    "StreamRecord",
    "StreamRoundRefusedError",
    "StreamRunner",
    "StreamSettings",
    "StreamSummary",
    "UserLedger",
    "epoch_number",
    "events_from_arrays",
    "events_from_checkins",
    "parse_budget",
    "parse_epoch_length",
    "read_stream_record",
    "sorted_events",
]
