"""The evaluation: ``shuffledp experiment NAME --out DIR`` (see :mod:`.registry`)."""

from shuffledp.simulations.experiments.base import ExperimentContext, ExperimentOutput, Repeater
from shuffledp.simulations.experiments.registry import EXPERIMENTS, load_experiment

__all__ = ["EXPERIMENTS", "ExperimentContext", "ExperimentOutput", "Repeater", "load_experiment"]
