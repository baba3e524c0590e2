"""Participant-level generation: pure functions of the world, a participant
block (or the population's small per-participant vectors) and named streams."""
