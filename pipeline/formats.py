"""The version every persisted file carries, checked when it is read back.

Each file the project writes and reads again names its format (a ``format`` string such
as ``"drugtargetworld-transcript/2"``, or a bundle's ``format_version``).  A reader calls
:func:`check_format` with what it found: the version it writes is read, so is a known
older one the reader still understands (``older``), and anything else stops with one
line naming the file, the version found and the one expected.

The files and their versions (written by / read by):

==============================  =======================================  ==========================================
file                            version                                  read back by
==============================  =======================================  ==========================================
release/, sealed/ MANIFEST.json ``format_version`` (pipeline.bundle)     every bundle reader (bundle.check_format_version)
build-record.json               ``format_version`` (pipeline.bundle)     pipeline.buildrecord.read
.build/state.json               ``drugtargetworld-build-state/1``        pipeline.outputs.resume_or_reset
transcript.json                 ``drugtargetworld-transcript/2``         pipeline.evaluate.from_score
screening ledger.jsonl          ``screening-ledger/1`` (its open row)    pipeline.screening.oracle (resume), its scorer
evaluation.json                 ``drugtargetworld-evaluate/1``           pipeline.evaluate.store.read_evaluation
episodes.jsonl records          ``record_format`` of each record         pipeline.evaluate.checks.validate_record
tell scan cache (*.pkl)         ``drugtargetworld-tells-cache/1``        pipeline.tells.scan.analyse_all
validity panel store (*.pkl)    ``drugtargetworld-validity-analysis/1``  scripts/validity_panel.py
fragment table                  ``FRAGMENTS_VERSION`` (its .json)        pipeline.screening.fragments
==============================  =======================================  ==========================================

Numba's on-disk kernel cache is versioned by numba itself (its index records numba's
version and each kernel's bytecode; a stale entry is recompiled, never loaded).
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Union


class FormatError(ValueError):
    """A persisted file in a format this version of the project does not read."""


def check_format(found: Any, expected: str, where: Union[str, os.PathLike], *, older: Iterable = (),
                 what: str = "format", error: type = FormatError) -> Any:
    """Return ``found`` when it is ``expected`` or one of the ``older`` versions this reader
    still reads; otherwise raise ``error`` (default :class:`FormatError`) naming ``where``
    (the file), the version found and the one expected."""
    older = tuple(older)
    if found == expected or (found is not None and found in older):
        return found
    reads = repr(expected) + (f" (or the older {', '.join(map(repr, older))})" if older else "")
    shown = "none" if found is None else repr(found)
    raise error(f"{where}: {what} {shown}, but this version of drugtargetworld reads {reads}; valid: a file written "
                "by this version (write it again), or read it with the version that wrote it")
