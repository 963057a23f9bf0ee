"""The evaluation: ``shuffledp experiment NAME --out DIR`` (see :mod:`.registry`)."""

from .base import ExperimentContext, ExperimentOutput, Repeater
from .registry import EXPERIMENTS, load_experiment

__all__ = ["EXPERIMENTS", "ExperimentContext", "ExperimentOutput", "Repeater", "load_experiment"]
