"""Serve one episode to an MCP client over stdio: an agentic CLI plays the world (SPEC section 10).

    python -m pipeline.mcp world_dir=<dir> [budget=<0|450000|2000000>] [out=<dir>] [turns=N] [timeout=S]
        [isolation=require|auto|off] [overwrite=false] [quiet=false] [agent_name=mcp]
        [paper_compat=false]                          (a biobank world)
        [mode=limited|unrestricted] [clock_hours=H]   (a screening world)
        [limits.memory=16GiB] [limits.processes=256] ...

The options are those of ``pipeline.episode`` (the same parser: ``key=value`` or ``--key
value``, ``--help``, ``--version``) less ``agent``: the MCP client is the agent.  The server
plays exactly one episode (``pipeline.harness.core.Session``) with the official MCP Python
SDK's low-level server on stdin/stdout:

* the server's instructions are the task prompt (the kind's system prompt, the opening
  message and the note on tools); the same text is the resource ``episode://instructions``
  and the prompt ``task``;
* its tools are the episode's own (``Session.tools()``: ``run_python`` first, then the kind's),
  with their descriptions and JSON Schemas; every call goes to ``Session.call``, so the sandbox,
  the ledger, the turn accounting (a turn is one program run; at most 16 calls that run no
  program between two runs) and the scorer are those of every episode.  Arguments are not
  checked against the schemas by the SDK: the episode refuses malformed calls itself, and a
  refusal counts towards the per-turn cap, so a client looping on bad calls still ends;
* the episode is finished (scored from WORK, ``score.json`` and the transcript written) when
  a call ends it (``submit()``, ``finish()``, the turn limit, a kind's own rule), when the clock
  of a time-limited world runs out, or when the client disconnects (stdin closed, or SIGTERM,
  SIGINT or SIGHUP): then a program still running is stopped and the exit reason is
  ``client_disconnected``.  After the end every call answers that the episode has ended.

stdout carries MCP frames only: the frames go to a private copy of the original stdout, and
file descriptor 1 (and ``sys.stdout``) point at stderr from the start, so nothing the harness,
a library or a child process prints can reach the client; stdin is likewise kept for the
frames, and children read ``/dev/null``.  Every log line goes to stderr, the score never does
(an agent must not learn it).

Trust model: the server runs every program of the client in the episode's sandbox, but an
agentic CLI's own shell and file tools run wherever the CLI runs.  Run such a CLI where it
cannot read the world's ``sealed/`` (nor the episode folder, whose ledger and score are the
harness's): another user or a container.  At start the server warns on stderr when
``sealed/`` is readable by the user of the process that started it (the CLI, or whatever
launched the server for it) or by every user of the machine (read from the permission bits;
ACLs are not read).

Exit status: 0 once the episode is scored (whatever its exit path), 1 when the runner crashed
or the sandbox never ran a program, 2 for bad arguments or a refusal to start (one line on
stderr, before the server starts and before anything is made).
"""
from __future__ import annotations

import io
import logging
import os
import signal
import sys
import threading
import time
import traceback
from pathlib import Path
from typing import Any, Optional

from .commandline import Command, Option, UsageError, version
from .episode import COMMAND as EPISODE_COMMAND, LIMIT_KEYS, _limits
from .harness.exposure import can_read_folder, sealed_exposure

PROG = "pipeline.mcp"
SERVER_NAME = "drugtargetworld"
INSTRUCTIONS_URI = "episode://instructions"
PROMPT_NAME = "task"
#: Seconds between progress notifications while a program runs (for a client that asked for them).
PROGRESS_EVERY_S = 10.0
#: JSON-RPC error code of an unknown resource (MCP specification).
RESOURCE_NOT_FOUND = -32002

COMMAND = Command(
    PROG,
    "Serve one harness episode (any kind of world) to an MCP client over stdio: the client is the agent. The "
    "server's instructions are the task prompt; its tools are the episode's (run_python, then the kind's).",
    [o for o in EPISODE_COMMAND.options if o.name != "agent"] + [
        Option("agent_name", "a name for the player, kept in score.json and the default folder name", default="mcp"),
    ],
    groups={"limits": f"a per-turn limit of agent programs: {', '.join(LIMIT_KEYS)} (sizes as 16GiB, 512MiB)"},
    epilog="isolation defaults to require. stdout carries MCP frames only; logs go to stderr. The episode is scored "
           "when submit()/finish() or the turn limit ends it, or when the client disconnects. Run the CLI where it "
           "cannot read the world's sealed/ folder (docs/mcp.md).",
)


def log(line: str) -> None:
    print(f"{PROG}: {line}", file=sys.stderr, flush=True)


def task_prompt(info) -> str:
    """The task as one text: the kind's system prompt, the opening message, the note on tools."""
    return "\n\n".join(part.strip() for part in (info.system_prompt, info.opening, info.tool_note) if part)


# ----------------------------------------------------------------------------- the trust check
# (who can read a folder: pipeline.harness.exposure)

def warn_if_sealed_readable(sealed: Path) -> Optional[str]:
    exposure = sealed_exposure(sealed)
    if exposure is not None:
        log(f"warning: the world's sealed/ folder (the hidden truth the episode is scored against) is readable by "
            f"{exposure}: an agentic CLI running as such a user can read it with its own shell and file tools, which "
            "run outside the sandbox. Run the CLI as another user or in a container that cannot read sealed/ "
            "(docs/mcp.md).")
    return exposure


# ----------------------------------------------------------------------------- the episode server


class EpisodeServer:
    """One started ``Session`` behind an MCP server (see the module docstring).

    ``serve(read_stream, write_stream)`` runs the MCP session on a pair of SDK message streams
    (stdio's, or in-memory ones in tests) until the client leaves, then finishes the episode.
    Calls are played one at a time, in the order they arrive, in a worker thread (so the
    server keeps reading while a program runs and sees the client leave).
    """

    def __init__(self, session, *, handle_signals: bool = False):
        import anyio

        self.session = session
        self.info = session.start() if session.info is None else session.info
        self.prompt = task_prompt(self.info)
        self.handle_signals = handle_signals
        self.order = anyio.Lock()  # calls in arrival order, one at a time
        self.state = threading.Lock()  # the session, between a call's thread and the closing path
        self.running_since: Optional[float] = None  # monotonic start of the call in progress
        self.closing = False
        self._children_before = self._children()
        self.server = self._build()

    # -- the MCP side

    def _build(self):
        from mcp import types
        from mcp.server.lowlevel import Server
        from mcp.server.lowlevel.helper_types import ReadResourceContents
        from mcp.shared.exceptions import McpError

        server = Server(SERVER_NAME, version=version(), instructions=self.prompt)
        tools = [types.Tool(name=t.name, description=t.description, inputSchema=dict(t.parameters))
                 for t in self.session.tools()]

        @server.list_tools()
        async def list_tools() -> list:
            self._note_client(server)
            return list(tools)

        @server.call_tool(validate_input=False)
        async def call_tool(name: str, arguments: dict) -> Any:
            self._note_client(server)
            ctx = server.request_context
            token = getattr(ctx.meta, "progressToken", None) if ctx.meta is not None else None
            text, is_error = await self._play(name, arguments, str(ctx.request_id), ctx.session, token)
            return types.CallToolResult(content=[types.TextContent(type="text", text=text)], isError=is_error)

        @server.list_resources()
        async def list_resources() -> list:
            return [types.Resource(uri=INSTRUCTIONS_URI, name="instructions", title="The task",
                                   description="The episode's task prompt (also the server's instructions)",
                                   mimeType="text/plain", size=len(self.prompt.encode("utf-8")))]

        @server.read_resource()
        async def read_resource(uri) -> list:
            if str(uri) != INSTRUCTIONS_URI:
                raise McpError(types.ErrorData(code=RESOURCE_NOT_FOUND, message=f"unknown resource {str(uri)[:200]}; "
                                                                                 f"valid: {INSTRUCTIONS_URI}"))
            return [ReadResourceContents(content=self.prompt, mime_type="text/plain")]

        @server.list_prompts()
        async def list_prompts() -> list:
            return [types.Prompt(name=PROMPT_NAME, title="Play the episode",
                                 description="The episode's task prompt, to start the agent on it")]

        @server.get_prompt()
        async def get_prompt(name: str, arguments: Optional[dict]) -> Any:
            if name != PROMPT_NAME:
                raise McpError(types.ErrorData(code=types.INVALID_PARAMS,
                                               message=f"unknown prompt {name[:200]}; valid: {PROMPT_NAME}"))
            return types.GetPromptResult(description="The episode's task", messages=[
                types.PromptMessage(role="user", content=types.TextContent(type="text", text=self.prompt))])

        return server

    def _note_client(self, server) -> None:
        """Keep the client's name and version in the transcript header (once)."""
        if "mcp_client" in self.session.header:
            return
        try:
            params = server.request_context.session.client_params
            client = params.clientInfo if params is not None else None
        except LookupError:
            return
        if client is not None:
            from .harness import safeio

            self.session.header["mcp_client"] = {"name": safeio.printable(str(client.name), 200),
                                                 "version": safeio.printable(str(client.version), 200),
                                                 "protocol": safeio.printable(str(params.protocolVersion), 40)}

    async def _play(self, name: str, arguments: Any, call_id: str, mcp_session, token) -> tuple[str, bool]:
        import anyio

        async with self.order:
            async with anyio.create_task_group() as group:
                if token is not None:
                    group.start_soon(self._tick, mcp_session, token)
                text, is_error = await anyio.to_thread.run_sync(self._call, name, arguments, call_id)
                group.cancel_scope.cancel()
        return text, is_error

    async def _tick(self, mcp_session, token) -> None:
        import anyio

        started = time.monotonic()
        while True:
            await anyio.sleep(PROGRESS_EVERY_S)
            try:
                await mcp_session.send_progress_notification(token, progress=time.monotonic() - started,
                                                             message="the call is still running")
            except Exception:
                return

    # -- the episode side (in a worker thread)

    def _ended_text(self) -> str:
        return (f"The episode has ended ({self.session.exit_reason}); no more calls are accepted. "
                "It has been scored; you may stop.")

    def _call(self, name: str, arguments: Any, call_id: str) -> tuple[str, bool]:
        from .agents.tools import ToolCall

        with self.state:
            session = self.session
            if self.closing and not session.done:
                session.end("client_disconnected")
            if session.done:
                self._finish()
                return self._ended_text(), True
            self.running_since = time.monotonic()
            try:
                text, _ = session.call(ToolCall(name, arguments, call_id))
            except Exception:
                text = self._harness_error()
            finally:
                self.running_since = None
            is_error = text.startswith("Refused:") or text.startswith("The episode has ended")
            if session.done:
                self._finish()
                text += "\n" + self._ended_text()
            return text, is_error

    def _harness_error(self) -> str:
        """The harness failed during a call (never the client's code): recorded, the episode ends scored from WORK."""
        session = self.session
        detail = session.harness_failed(traceback.format_exc())
        log(f"error: the harness failed during a call; the episode ends: {detail}")
        return f"The episode has ended ({session.exit_reason})."

    def _finish(self, reason: Optional[str] = None) -> dict:
        """Score the episode (once) and say so on stderr (never the score itself)."""
        first = self.session.result is None
        result = self.session.finish(reason)
        if first:
            episode = result.get("episode", {})
            log(f"the episode ended ({episode.get('exit_reason')}) after {episode.get('turns_used')} turn(s); "
                f"score.json is in {episode.get('episode_dir')}")
        return result

    # -- leaving

    @staticmethod
    def _children() -> set:
        try:
            import psutil

            return {p.pid for p in psutil.Process().children(recursive=True)}
        except Exception:
            return set()

    def stop_programs(self) -> None:
        """Kill the program a call is running (the processes this server started since it began serving).

        The sandbox's own clean-up then removes what is left of its tree, and the call returns
        its turn (the program failed: killed) at once instead of at the program's timeout.
        """
        import psutil

        deadline = time.monotonic() + 30.0
        while self.running_since is not None and time.monotonic() < deadline:
            try:
                children = psutil.Process().children(recursive=True)
            except psutil.Error:
                children = []
            for child in children:
                if child.pid in self._children_before:
                    continue
                try:
                    child.kill()
                except psutil.Error:
                    pass
            time.sleep(0.1)

    def disconnect(self) -> None:
        """The client left: no further call runs, a running program is stopped."""
        if self.closing:
            return
        self.closing = True
        if self.running_since is not None:
            log("the client disconnected while a program ran: stopping it")
            self.stop_programs()

    def close(self) -> dict:
        """Finish the episode (once): ``client_disconnected`` unless it had ended, or its clock ran out."""
        self.closing = True
        with self.state:
            session = self.session
            if not session.done and session.clock_left() == 0.0:
                session.end("time_limit")
            return self._finish("client_disconnected")

    async def _clock(self) -> None:
        """A time-limited world: finish the episode when its clock runs out, calls or not."""
        import anyio

        while True:
            left = self.session.clock_left()
            if left is None or self.session.done:
                return
            if left > 0:
                await anyio.sleep(min(left, 60.0))
                continue
            async with self.order:
                await anyio.to_thread.run_sync(self._expire)
            return

    def _expire(self) -> None:
        with self.state:
            if not self.session.done:
                self.session.end("time_limit")
                self._finish()

    async def _signals(self, serving) -> None:
        """SIGTERM, SIGINT, SIGHUP: the client is gone (the first one); later ones wait for the score."""
        import anyio

        with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as received:
            async for signum in received:
                name = signal.Signals(signum).name
                if self.closing:
                    log(f"{name}: the episode is being scored; the server exits when it is done")
                    continue
                log(f"{name}: the client is gone; ending the episode")
                await anyio.to_thread.run_sync(self.disconnect)
                serving.cancel()

    async def serve(self, read_stream, write_stream) -> dict:
        """Serve until the client leaves (its stream ends) or a signal says so; returns the score."""
        import anyio

        inner_send, inner_receive = anyio.create_memory_object_stream(0)

        async def pump() -> None:
            # Between the transport and the server: the end of the client's stream is seen here
            # first, so a running program is stopped before the server waits for its call.
            async with inner_send:
                async for message in read_stream:
                    await inner_send.send(message)
            await anyio.to_thread.run_sync(self.disconnect)

        async with anyio.create_task_group() as guard:
            serving = anyio.CancelScope()
            if self.handle_signals:  # for the whole life of the server, scoring included
                guard.start_soon(self._signals, serving)
            try:
                with serving:
                    async with anyio.create_task_group() as group:
                        group.start_soon(pump)
                        group.start_soon(self._clock)
                        await self.server.run(inner_receive, write_stream, self.server.create_initialization_options())
                        group.cancel_scope.cancel()
            finally:
                with anyio.CancelScope(shield=True):
                    await anyio.to_thread.run_sync(self.disconnect)
                    result = await anyio.to_thread.run_sync(self.close)
                guard.cancel_scope.cancel()
        return result


# ----------------------------------------------------------------------------- the command


class _Lines:
    """The client's frames as an async iterator of lines, for the SDK's stdio transport.

    A daemon thread reads the file descriptor and hands each line to the event loop, so a
    read that blocks never holds up the server's exit (the SDK's own reader, a worker thread
    blocked in readline, can neither be cancelled nor abandoned at exit).  asyncio only.
    """

    def __init__(self, fd: int):
        self.fd = fd
        self.queue = None

    def __aiter__(self):
        import asyncio

        loop = asyncio.get_running_loop()
        self.queue = asyncio.Queue()

        def read() -> None:
            try:
                with io.TextIOWrapper(io.FileIO(self.fd, "rb", closefd=True), encoding="utf-8", errors="replace",
                                      newline="\n") as handle:
                    for line in handle:
                        loop.call_soon_threadsafe(self.queue.put_nowait, line)
            except (OSError, ValueError):
                pass
            finally:
                try:
                    loop.call_soon_threadsafe(self.queue.put_nowait, None)
                except RuntimeError:  # the loop has closed: nobody is reading
                    pass

        threading.Thread(target=read, name="mcp-stdin", daemon=True).start()
        return self

    async def __anext__(self) -> str:
        line = await self.queue.get()
        if line is None:
            raise StopAsyncIteration
        return line


class _Streams:
    """stdin and stdout kept for the MCP frames; fd 0 reads /dev/null, fd 1 and sys.stdout write to stderr."""

    def __init__(self):
        sys.stdout.flush()
        self.frames_in = os.dup(0)
        self.frames_out = os.dup(1)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.close(null)
        os.dup2(2, 1)
        sys.stdout = sys.stderr
        sys.stdin = open(os.devnull)  # noqa: SIM115 (for the life of the process)

    def files(self):
        import anyio

        stdout = io.TextIOWrapper(io.FileIO(self.frames_out, "wb", closefd=True), encoding="utf-8", newline="\n")
        return _Lines(self.frames_in), anyio.wrap_file(stdout)


def make_session(args: dict):
    """The episode's Session from parsed options (the checks of ``pipeline.episode``); raises UsageError."""
    from .harness.core import Session
    from .harness.kind import EpisodeError

    kind_options = {k: args[k] for k in ("paper_compat", "mode", "clock_hours") if args.get(k) is not None}
    budget = args.get("budget")
    if budget is not None and float(budget).is_integer():
        budget = int(budget)
    progress = None if args["quiet"] else (lambda line: log(line))
    try:
        return Session(args["world_dir"], budget=budget, agent_name=args["agent_name"], out=args["out"],
                       max_turns=args["turns"], timeout=args["timeout"], isolation=args.get("isolation") or "require",
                       overwrite=args["overwrite"], limits=_limits(args["limits_options"]), progress=progress,
                       **kind_options)
    except EpisodeError as error:
        raise UsageError(str(error)) from None


def run(args: dict) -> int:
    import anyio

    from .harness.kind import EpisodeError
    from .harness.sandbox import SandboxUnavailable

    streams = _Streams()  # from here on nothing but frames reaches the client's stdout
    logging.basicConfig(stream=sys.stderr, level=logging.WARNING, format=f"{PROG}: %(name)s: %(message)s")
    try:
        from mcp.server.stdio import stdio_server
    except ImportError as error:
        log(f"error: the MCP SDK is not installed ({error}); install the extra: pip install 'drugtargetworld[mcp]'")
        return 2
    try:
        session = make_session(args)
    except (UsageError, EpisodeError, SandboxUnavailable, ValueError, OSError) as error:
        log(f"error: {error}")
        return 2
    try:
        episode = EpisodeServer(session, handle_signals=True)
    except Exception as error:
        result = session.finish("runner_crash", f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
        log(f"error: runner_crash: the episode could not start ({type(error).__name__}: {error}); "
            f"see {result['episode']['episode_dir']}")
        return 1
    warn_if_sealed_readable(session.sealed)
    log(f"serving one {session.kind.kind} episode over stdio ({len(session.tools())} tools); episode folder "
        f"{session.dir}")

    async def main() -> dict:
        stdin, stdout = streams.files()
        done: dict = {}
        with anyio.CancelScope() as scope:
            async with stdio_server(stdin, stdout) as (read_stream, write_stream):
                done["result"] = await episode.serve(read_stream, write_stream)
                scope.cancel()  # the transport's reader and writer: the episode is over
        return done["result"]

    try:
        result = anyio.run(main, backend="asyncio")
    except BaseException as error:  # the transport failed (e.g. a closed pipe): still scored
        if not isinstance(error, (KeyboardInterrupt, SystemExit)):
            log(f"warning: the transport ended with {type(error).__name__}: {str(error)[:300]}")
        result = episode.close()
    reason = result["episode"]["exit_reason"]
    if reason in ("runner_crash", "sandbox_failure"):
        detail = (result["episode"].get("exit_detail") or "").strip().splitlines()
        log(f"error: {reason}: {detail[-1] if detail else 'no detail'}")
        return 1
    return 0


def main(argv: Optional[list] = None) -> int:
    return COMMAND.main(argv, run)


__all__ = ["COMMAND", "INSTRUCTIONS_URI", "PROG", "PROGRESS_EVERY_S", "PROMPT_NAME", "RESOURCE_NOT_FOUND", "SERVER_NAME",
           "EpisodeServer", "can_read_folder", "log", "main", "make_session", "run", "sealed_exposure", "task_prompt",
           "warn_if_sealed_readable"]


if __name__ == "__main__":
    sys.exit(main())
