"""pipeline.mcp: one episode served over MCP, played by the SDK's own client, on each kind of world.

Over a real stdio subprocess (``mcp.client.stdio``) for the end-to-end episode of each kind,
whose score must equal that of the same tool calls played through the harness
(``run_episode`` with a policy replaying them); in process (the SDK's memory streams) for
the rest: the tool list, the instructions, the end of an episode, a client that leaves.
The raw-pipe test reads the server's stdout byte for byte: JSON-RPC frames only.
"""
from __future__ import annotations

import json
import os
import queue
import re
import signal
import subprocess
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path

import anyio
import pytest
from mcp import ClientSession, StdioServerParameters, types
from mcp.client.stdio import stdio_client
from mcp.shared.memory import create_client_server_memory_streams

from pipeline import mcp as mcp_server
from pipeline.agents.base import Agent
from pipeline.agents.tools import Reply, ToolCall
from pipeline.harness import run_episode
from pipeline.harness.core import Session

#: Seconds any one client wait may take (a program run on a tiny world takes a few).
WAIT = 120
#: Seconds a whole MCP conversation may take.
EPISODE_WAIT = 600
#: Keys of a score that describe the run rather than the play (folder, timings, tokens, isolation).
RUN_KEYS = ("episode", "usage", "isolated", "isolation")

PHENOTYPE = """\
import pandas as pd
ecg = pd.read_parquet(os.path.join(RELEASE, "ecg_features.parquet"))
ecg["qt"].rename("phenotype").reset_index().to_csv(os.path.join(WORK, "phenotype.csv"), index=False)
print("phenotype rows:", len(ecg))
"""
LOOK = """\
for name in sorted(os.listdir(WORK)):
    print(name)
"""


def paired_driver(world) -> dict:
    """A driver that is the causal member of a planted pair (an experiment on it earns causal confidence)."""
    truth = json.loads((Path(world) / "sealed" / "truth.json").read_text())
    causal = {pair["causal"] for pair in truth["pairs"]}
    return next(d for d in truth["drivers"] if d["protein"] in causal)


def biobank_calls(world) -> list:
    driver = paired_driver(world)
    protein = driver["protein"]
    submission = {"nominated": [protein], "directions": {protein: driver["direction"]},
                  "outcome_alignment": {protein: "aligned"}, "rejected": [], "abstentions": [], "confidence": 0.7}
    return [("run_python", {"code": PHENOTYPE}),
            ("request_experiment", {"kind": "knockdown", "protein": protein}),
            ("budget", {}),
            ("run_python", {"code": LOOK}),
            ("submit", {"submission": submission})]


def screening_calls(world) -> list:
    ids = [f"C{i:06d}" for i in range(1000)]
    return [("run_python", {"code": "import pandas as pd\nprint(len(pd.read_parquet(os.path.join(RELEASE, "
                                    "'library.parquet'))))\n"}),
            ("request_labels", {"ids": ids[:60]}),
            ("run_python", {"code": "print(open(os.path.join(WORK, 'labels.csv')).read()[:200])\n"}),
            ("submit", {"ids": ids[100:400]}),
            ("run_python", {"code": LOOK}),
            ("budget", {}),
            ("finish", {})]


class Replay(Agent):
    """A policy answering each observation with the next of a fixed list of tool calls."""

    name = "replay"

    def __init__(self, calls):
        self.calls = list(calls)

    def act(self, observation):
        if not self.calls:
            return Reply(text="nothing left to do")
        name, arguments = self.calls.pop(0)
        return Reply(tool_calls=(ToolCall(name, arguments, id=f"call-{len(self.calls)}"),))


def play_of(result: dict, folder=None) -> dict:
    """The score without what describes the run; the episode's own folder, where named, as <episode>."""
    kept = {k: v for k, v in result.items() if k not in RUN_KEYS}
    if folder is None:
        return kept
    return json.loads(json.dumps(kept).replace(str(folder), "<episode>"))


def kind_args(kind: str) -> list:
    return ["budget=450000"] if kind == "biobank" else ["mode=unrestricted"]


def kind_options(kind: str) -> dict:
    return {"budget": 450_000} if kind == "biobank" else {"mode": "unrestricted"}


def server_env() -> dict:
    env = dict(os.environ)
    env.pop("PYTHONSTARTUP", None)
    return env


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(c.text for c in result.content if isinstance(c, types.TextContent))


# ----------------------------------------------------------------------------- in process


def serve_in_process(session: Session, body, *, leave: bool = True):
    """Run ``body(client, initialize_result)`` against ``session`` served over memory streams.

    Returns (the episode's score as ``serve`` returned it, ``body``'s value).  The client
    leaves at the end (its stream to the server closed), as a CLI does when it exits.
    """
    episode = mcp_server.EpisodeServer(session)
    out: dict = {}

    async def main():
        with anyio.fail_after(EPISODE_WAIT):
            async with create_client_server_memory_streams() as (client_streams, server_streams):
                async with anyio.create_task_group() as group:
                    async def server():
                        out["score"] = await episode.serve(*server_streams)

                    group.start_soon(server)
                    async with ClientSession(*client_streams, read_timeout_seconds=timedelta(seconds=WAIT)) as client:
                        init = await client.initialize()
                        out["body"] = await body(client, init)
                    await client_streams[1].aclose()  # the client leaves

    anyio.run(main)
    return out["score"], out.get("body")


def test_tools_instructions_resource_and_prompt(kind_world, tmp_path):
    kind, world = kind_world
    session = Session(world, out=tmp_path / "ep", isolation="auto", **kind_options(kind))
    expected = session.tools()

    async def body(client, init):
        prompt = mcp_server.task_prompt(session.info)
        assert init.instructions == prompt
        assert session.info.system_prompt.strip() in prompt and session.info.tool_note in prompt
        assert session.info.opening.strip() in prompt
        assert init.serverInfo.name == "drugtargetworld"
        listed = (await client.list_tools()).tools
        assert [t.name for t in listed] == [t.name for t in expected] and listed[0].name == "run_python"
        for got, spec in zip(listed, expected):
            assert got.description == spec.description and got.inputSchema == spec.parameters
        resources = (await client.list_resources()).resources
        assert [str(r.uri) for r in resources] == [mcp_server.INSTRUCTIONS_URI]
        contents = (await client.read_resource(mcp_server.INSTRUCTIONS_URI)).contents
        assert [c.text for c in contents] == [prompt] and contents[0].mimeType == "text/plain"
        with pytest.raises(Exception, match="unknown resource"):
            await client.read_resource("episode://truth")
        got = await client.get_prompt(mcp_server.PROMPT_NAME)
        assert got.messages[0].content.text == prompt
        return True

    score, ok = serve_in_process(session, body)
    assert ok
    # Nothing was played: the episode is scored as a client that left at once.
    assert score["episode"]["exit_reason"] == "client_disconnected" and score["episode"]["turns_used"] == 0
    transcript = json.loads((tmp_path / "ep" / "transcript.json").read_text())
    assert transcript["mcp_client"]["name"] == "mcp"  # the SDK client's own name, kept as provenance


def test_client_disconnect_mid_episode_is_scored(tiny_world_noimaging, tmp_path):
    session = Session(tiny_world_noimaging, budget=0, out=tmp_path / "ep", isolation="auto", timeout=60)

    async def body(client, init):
        result = await client.call_tool("run_python", {"code": PHENOTYPE})
        assert not result.isError and "Turn 1 of 30" in text_of(result)
        budget = await client.call_tool("budget", {})
        assert not budget.isError
        assert not (tmp_path / "ep" / "score.json").exists()  # still playing

    score, _ = serve_in_process(session, body)
    written = json.loads((tmp_path / "ep" / "score.json").read_text())
    assert written["episode"]["exit_reason"] == score["episode"]["exit_reason"] == "client_disconnected"
    assert written["episode"]["turns_used"] == 1
    # Scored from WORK: the phenotype the one turn wrote is there and was read by the scorer.
    assert (tmp_path / "ep" / "work" / "phenotype.csv").is_file()
    assert written["total"] == play_of(score)["total"]


def test_turn_limit_ends_and_later_calls_say_so(tiny_world_noimaging, tmp_path):
    session = Session(tiny_world_noimaging, budget=0, out=tmp_path / "ep", isolation="auto", timeout=60, max_turns=2)

    async def body(client, init):
        both: list = []

        async def run(word):
            both.append(text_of(await client.call_tool("run_python", {"code": f"print({word!r})"})))

        async with anyio.create_task_group() as group:  # two calls at once: played one after the other
            group.start_soon(run, "one")
            group.start_soon(run, "two")
        first, second = sorted(both, key=lambda text: "Turn 2 of 2" in text)
        assert first.startswith("Turn 1 of 2") and "episode has ended" not in first
        assert second.startswith("Turn 2 of 2") and "episode has ended (turn_limit)" in second
        # Scored at the limit, not when the client leaves.
        written = json.loads((tmp_path / "ep" / "score.json").read_text())
        assert written["episode"]["exit_reason"] == "turn_limit"
        later = [await client.call_tool(name, args) for name, args in
                 (("run_python", {"code": "print('three')"}), ("budget", {}), ("nonsense", {}))]
        return later

    score, later = serve_in_process(session, body)
    for result in later:
        assert result.isError and text_of(result).startswith("The episode has ended (turn_limit)")
    assert score["episode"]["exit_reason"] == "turn_limit" and score["episode"]["turns_used"] == 2


def test_refused_calls_count_towards_the_turn(tiny_world_noimaging, tmp_path):
    """The SDK does not check arguments: the episode refuses them, and a client looping on refusals still ends."""
    from pipeline.agents.tools import MAX_CALLS_PER_TURN

    session = Session(tiny_world_noimaging, budget=0, out=tmp_path / "ep", isolation="auto", timeout=60, max_turns=1)

    async def body(client, init):
        results = []
        for _ in range(MAX_CALLS_PER_TURN + 1):
            results.append(await client.call_tool("request_experiment", {"kind": "telepathy", "protein": 3}))
        return results

    score, results = serve_in_process(session, body)
    assert all(r.isError for r in results) and text_of(results[0]).startswith("Refused:")
    assert "the turn is used" in text_of(results[-1])
    assert score["episode"]["exit_reason"] == "turn_limit" and score["episode"]["turns_used"] == 1


def test_the_clock_ends_an_idle_episode(tiny_screening, tmp_path):
    session = Session(tiny_screening, out=tmp_path / "ep", isolation="auto", mode="limited", clock_hours=0.5 / 3600)

    async def body(client, init):
        with anyio.fail_after(WAIT):
            while not (tmp_path / "ep" / "score.json").exists():
                await anyio.sleep(0.2)
        return await client.call_tool("budget", {})

    score, late = serve_in_process(session, body)
    assert late.isError and "The episode has ended (time_limit)" in text_of(late)
    assert score["episode"]["exit_reason"] == "time_limit"


# ----------------------------------------------------------------------------- over stdio


def stdio_episode(args: list, calls: list, errlog_path: Path, cwd: Path) -> tuple:
    """Play ``calls`` against ``python -m pipeline.mcp <args>`` through the SDK's stdio client."""
    params = StdioServerParameters(command=sys.executable, args=["-m", "pipeline.mcp", *args], env=server_env(),
                                   cwd=str(cwd))
    results: list = []
    out: dict = {}

    async def main():
        with anyio.fail_after(EPISODE_WAIT), open(errlog_path, "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=WAIT)) as client:
                    out["init"] = await client.initialize()
                    out["tools"] = [t.name for t in (await client.list_tools()).tools]
                    for name, arguments in calls:
                        results.append(await client.call_tool(name, arguments))

    anyio.run(main)
    return out, results


@pytest.mark.parametrize("kind", ["biobank", "screening"])
def test_an_episode_over_stdio_scores_as_the_same_calls_through_the_harness(kind, request, tmp_path):
    world = request.getfixturevalue("tiny_world_noimaging" if kind == "biobank" else "tiny_screening")
    calls = biobank_calls(world) if kind == "biobank" else screening_calls(world)
    out = tmp_path / "mcp"
    got, results = stdio_episode([f"world_dir={world}", f"out={out}", "isolation=auto", "timeout=120",
                                  *kind_args(kind)], calls, tmp_path / "stderr.txt", tmp_path)
    stderr = (tmp_path / "stderr.txt").read_text()
    session = Session(world, out=tmp_path / "probe", isolation="auto", timeout=120, **kind_options(kind))
    assert got["tools"] == [t.name for t in session.tools()]
    # The WORK limit is at most half the disk's free space (Limits.fit_disk), read as each session
    # starts: whatever else writes to the disk in between (another test worker) moves that figure.
    work_limit = re.compile(r"WORK up to [0-9.]+ (GiB|MiB|B),")
    served, expected = got["init"].instructions, mcp_server.task_prompt(session.start())
    assert work_limit.sub("WORK up to <limit>,", served) == work_limit.sub("WORK up to <limit>,", expected)
    session.finish()
    assert not any(r.isError for r in results), [text_of(r) for r in results]
    assert "episode has ended" in text_of(results[-1])
    assert "score" not in text_of(results[-1]).lower().replace("scored", "")  # submit() never returns the score
    mcp_score = json.loads((out / "score.json").read_text())
    ended = "submitted" if kind == "biobank" else "finished"
    assert mcp_score["episode"]["exit_reason"] == ended, stderr
    assert "sealed/ folder" in stderr and "readable" in stderr  # the trust warning (same user as this test)

    harness = run_episode(world, Replay(calls), out=tmp_path / "harness", isolation="auto", timeout=120,
                          **kind_options(kind))
    assert harness["episode"]["exit_reason"] == ended
    assert play_of(mcp_score, out) == play_of(harness, tmp_path / "harness")
    assert mcp_score["episode"]["turns_used"] == harness["episode"]["turns_used"]
    if kind == "biobank":  # the experiment went through the ledger and earned its credit on both paths
        assert mcp_score["causal_confidence"] > 0 and mcp_score["target_identification"] > 0
        ledger = [json.loads(line) for line in (out / "ledger.jsonl").read_text().splitlines()]
        assert [(row["kind"], row["status"]) for row in ledger] == [("knockdown", "delivered")], ledger
    else:
        assert mcp_score["best_submission"] is not None and len(mcp_score["submissions"]) == 1
    transcript = json.loads((out / "transcript.json").read_text())
    assert [c["name"] for t in transcript["turns"] for c in t.get("tool_calls", [])] == [name for name, _ in calls]


def test_disconnect_while_a_program_runs_stops_it_and_scores(tiny_world_noimaging, tmp_path):
    out = tmp_path / "ep"
    params = StdioServerParameters(command=sys.executable, env=server_env(), cwd=str(tmp_path), args=[
        "-m", "pipeline.mcp", f"world_dir={tiny_world_noimaging}", "budget=0", f"out={out}", "isolation=auto",
        "timeout=600"])
    started = time.monotonic()

    async def main():
        with anyio.fail_after(EPISODE_WAIT), open(tmp_path / "stderr.txt", "w") as errlog:
            async with stdio_client(params, errlog=errlog) as (read, write):
                async with ClientSession(read, write, read_timeout_seconds=timedelta(seconds=WAIT)) as client:
                    await client.initialize()
                    first = await client.call_tool("run_python", {"code": PHENOTYPE})
                    assert not first.isError
                    async with anyio.create_task_group() as group:
                        group.start_soon(client.call_tool, "run_python", {
                            "code": "open(os.path.join(WORK, 'started'), 'w').close()\nimport time\ntime.sleep(600)\n"})
                        with anyio.fail_after(WAIT):
                            while not (out / "work" / "started").exists():
                                await anyio.sleep(0.2)
                        group.cancel_scope.cancel()  # the CLI quits mid-call
            # stdio_client closed the server's stdin (and would SIGTERM it after 2 s)

    anyio.run(main)
    deadline = time.monotonic() + WAIT
    while not (out / "score.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    score = json.loads((out / "score.json").read_text())
    assert score["episode"]["exit_reason"] == "client_disconnected"
    assert score["episode"]["turns_used"] == 2
    assert time.monotonic() - started < 300  # the 600 s program was stopped, not waited for
    transcript = json.loads((out / "transcript.json").read_text())
    assert transcript["turns"][1]["status"] == "failed" and "time.sleep(600)" in transcript["turns"][1]["code"]
    assert (out / "work" / "phenotype.csv").is_file()
    assert "stopping it" in (tmp_path / "stderr.txt").read_text()


# ----------------------------------------------------------------------------- raw pipes


NOISY_SERVER = """\
import os, subprocess, sys
import pipeline.harness.core as core

played = core.Session.call


def noisy(self, call):
    print("NOISE: print")
    os.write(1, b"NOISE: file descriptor 1\\n")
    subprocess.run(["echo", "NOISE: a child process"])
    return played(self, call)


core.Session.call = noisy
from pipeline.mcp import main
sys.exit(main())
"""


class Frames:
    """Reads a process's stdout line by line in a thread; every line is kept."""

    def __init__(self, stream):
        self.lines: list = []
        self.queue: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self.thread.start()

    def _read(self, stream):
        for line in stream:
            self.lines.append(line)
            self.queue.put(line)
        self.queue.put(None)

    def response(self, request_id: int, wait: float = WAIT) -> dict:
        deadline = time.monotonic() + wait
        while True:
            line = self.queue.get(timeout=max(0.1, deadline - time.monotonic()))
            assert line is not None, "the server closed stdout before answering"
            message = json.loads(line)
            if message.get("id") == request_id:
                return message


def test_stdout_holds_only_frames_and_sigterm_still_scores(tiny_world_noimaging, tmp_path):
    script = tmp_path / "noisy_server.py"
    script.write_text(NOISY_SERVER)
    out = tmp_path / "ep"
    err = open(tmp_path / "stderr.txt", "wb")
    proc = subprocess.Popen([sys.executable, str(script), f"world_dir={tiny_world_noimaging}", "budget=0",
                             f"out={out}", "isolation=auto", "timeout=600"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=err, cwd=tmp_path, env=server_env())
    try:
        frames = Frames(proc.stdout)

        def send(message: dict) -> None:
            proc.stdin.write((json.dumps(message) + "\n").encode())
            proc.stdin.flush()

        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": types.LATEST_PROTOCOL_VERSION, "capabilities": {},
            "clientInfo": {"name": "raw-pipes", "version": "0"}}})
        assert frames.response(1)["result"]["instructions"]
        send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
            "name": "run_python", "arguments": {"code": "print('from the program')\nimport sys\n"
                                                        "print('to stderr', file=sys.stderr)\n"}}})
        first = frames.response(2)["result"]
        assert not first["isError"] and "from the program" in first["content"][0]["text"]
        send({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {
            "name": "run_python", "arguments": {
                "code": "open(os.path.join(WORK, 'started'), 'w').close()\nimport time\ntime.sleep(600)\n"}}})
        deadline = time.monotonic() + WAIT
        while not (out / "work" / "started").exists():
            assert time.monotonic() < deadline and proc.poll() is None
            time.sleep(0.2)
        proc.send_signal(signal.SIGTERM)  # as a CLI stops its servers
        time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)  # again, impatient: the episode is still scored
        assert proc.wait(timeout=WAIT) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        err.close()
    frames.thread.join(timeout=WAIT)
    assert frames.lines, "no frame at all"
    for line in frames.lines:
        message = json.loads(line)  # every line of stdout is one JSON-RPC message
        assert message["jsonrpc"] == "2.0" and ("id" in message or "method" in message), line
    stderr = (tmp_path / "stderr.txt").read_text()
    for noise in ("NOISE: print", "NOISE: file descriptor 1", "NOISE: a child process"):
        assert noise in stderr  # it went to the log, not to the client
    assert "SIGTERM: the client is gone" in stderr and "SIGTERM: the episode is being scored" in stderr
    score = json.loads((out / "score.json").read_text())
    assert score["episode"]["exit_reason"] == "client_disconnected" and score["episode"]["turns_used"] == 2
    assert json.loads((out / "transcript.json").read_text())["mcp_client"]["name"] == "raw-pipes"


# ----------------------------------------------------------------------------- the command line


@pytest.mark.parametrize("case", ["unknown key", "budget on a screening world", "no budget on a biobank world",
                                  "a budget outside the benchmark", "bad isolation", "not a world"])
def test_bad_options_are_one_line_errors_before_the_server_starts(case, tiny_world_noimaging, tiny_screening,
                                                                   tmp_path):
    out = tmp_path / "ep"
    args, expected = {
        "unknown key": ([f"world_dir={tiny_world_noimaging}", "budget=0", "colour=blue"], "colour: unknown option"),
        "budget on a screening world": ([f"world_dir={tiny_screening}", "budget=0"],
                                        "not an option of a screening world"),
        "no budget on a biobank world": ([f"world_dir={tiny_world_noimaging}"], "budget: required"),
        "a budget outside the benchmark": ([f"world_dir={tiny_world_noimaging}", "budget=12"], "budget=12: invalid"),
        "bad isolation": ([f"world_dir={tiny_world_noimaging}", "budget=0", "isolation=maybe"], "isolation=maybe"),
        "not a world": ([f"world_dir={tmp_path}", "budget=0"], "no release/ folder"),
    }[case]
    done = subprocess.run([sys.executable, "-m", "pipeline.mcp", *args, f"out={out}"], capture_output=True,
                          stdin=subprocess.DEVNULL, timeout=WAIT, cwd=tmp_path, env=server_env())
    assert done.returncode == 2, done.stderr
    assert done.stdout == b""  # no frame, no text: the server never started
    lines = done.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("pipeline.mcp: error:") and expected in lines[0], lines
    assert not out.exists()


def test_help_and_version(capsys):
    assert mcp_server.main(["--help"]) == 0
    shown = capsys.readouterr().out
    assert "world_dir" in shown and "budget" in shown and "limits.<name>" in shown and "agent=" not in shown
    assert mcp_server.main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("drugtargetworld ")


def test_sealed_exposure_reads_the_permission_bits():
    folder = Path(tempfile.mkdtemp(prefix="dtw-mcp-sealed-", dir="/tmp"))  # /tmp: every user may pass through
    try:
        (folder / "truth.json").write_text("{}")
        os.chmod(folder / "truth.json", 0o600)
        os.chmod(folder, 0o700)
        owner = os.stat(folder).st_uid
        stranger = (65534 if owner != 65534 else 65533, {65534 if owner != 65534 else 65533})
        assert mcp_server.sealed_exposure(folder, launcher=stranger) is None
        assert ("root" if owner == 0 else f"uid {owner}") in mcp_server.sealed_exposure(folder, launcher=(owner, set()))
        assert "root" in mcp_server.sealed_exposure(folder, launcher=(0, {0}))
        os.chmod(folder, 0o755)  # listable by all, but its file is the owner's only
        assert mcp_server.sealed_exposure(folder, launcher=stranger) is None
        os.chmod(folder / "truth.json", 0o644)
        assert "every user" in mcp_server.sealed_exposure(folder, launcher=stranger)
    finally:
        for child in folder.iterdir():
            child.unlink()
        folder.rmdir()
