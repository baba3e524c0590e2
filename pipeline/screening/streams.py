"""The random streams of a screening world, registered once with ``pipeline.streams``
(``world_kind="screening"``).  The names are hashed into the draws, so they are part
of every screening world: renaming one changes the worlds.  A block is 1,000 rows of
the library (``config.BLOCK_SIZE``), as a participant block is for a biobank world."""
from __future__ import annotations

from .. import streams

KIND = "screening"

ROUTE = streams.register("screening/route", "each row's synthesis route (one uniform per row)", "block",
                         world_kind=KIND)
SPACE = streams.register("screening/space/{route}", "the keys of a route's Feistel permutation over its building-block "
                         "space (which molecules the rows of that route are)", "world", world_kind=KIND)
CONFORMER = streams.register("screening/conformer", "each slot's fragment conformer (three uniforms per row)", "block",
                             world_kind=KIND)
POCKET = streams.register("screening/pocket/{pocket}", "a hidden pocket's frame, feature points and excluded volume "
                          "(the target and each off-target)", "world", world_kind=KIND)
HIDDEN = streams.register("screening/hidden", "the score's per-molecule term no structure model can predict", "block",
                          world_kind=KIND)
ASSEMBLE = streams.register("screening/assemble", "the key of the assembly kernel's torsion draws and clash retries "
                            "(seeds.block_key; per row inside the kernel)", "world", world_kind=KIND)
DOCK = streams.register("screening/dock", "the key of the docking kernel's starting orientations and moves "
                        "(seeds.block_key; per row inside the kernel)", "world", world_kind=KIND)
