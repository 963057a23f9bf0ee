"""Launching the whole pipeline as processes: one round (`simulate`) or a stream of rounds."""
