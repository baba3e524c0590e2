"""Runs one turn's agent program: the part of the prelude every kind of world shares.

The sandbox copies this file, unchanged, beside the kind's prelude as
``dtw_runner.py``; the prelude's ``__main__`` hands it the program path and
the namespace the program runs in.  It must stay importable with the standard
library alone (the project's own package is never visible inside the sandbox).

What it does, in order: puts WORK on ``sys.path`` (agents may keep helper
modules there between turns), tells the harness through the channel folder
that the prelude reached the agent's code (an episode where no turn gets that
far has a broken sandbox), runs the program, and turns its end into an exit
code: ``SystemExit`` keeps its code (a message is printed, code 1), any other
exception prints its traceback without the prelude's or this file's frames
(code 1).
"""
import os
import sys
import traceback

READY_NAME = "ready"


def run_program(program_path: str, namespace: dict, work: str, channel: str = "", prelude: str = "") -> int:
    sys.path.append(work)
    sys.argv = [program_path]
    with open(program_path, encoding="utf-8") as handle:
        source = handle.read()
    if channel:
        with open(os.path.join(channel, READY_NAME), "w", encoding="utf-8") as handle:
            handle.write("ready\n")
    hidden = {__file__, prelude}
    try:
        exec(compile(source, program_path, "exec"), namespace)
    except SystemExit as stop:
        code = stop.code
        if code is None or code == 0:
            return 0
        if not isinstance(code, int):
            print(code, file=sys.stderr)
            return 1
        return code
    except BaseException as error:  # the agent's error, without the harness's frames
        tb = error.__traceback__
        while tb is not None and tb.tb_frame.f_code.co_filename in hidden:
            tb = tb.tb_next
        traceback.print_exception(type(error), error, tb)
        return 1
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
    return 0
