"""Agents from the user's own package run in a sandbox of their own, not in the harness.

An agent loaded by ``agent=<module>:<factory>`` or from the entry-point group
``drugtargetworld.agents`` is code the project has never seen.  Run inside the
harness's process it could read anything the harness can — the sealed truth, the
world's folder, the episode object itself — so it runs instead in a separate process
under bubblewrap, as agent programs do, but with a different view:

* read-only: the system folders and the environment's own folders (where the agent's
  package is installed, or the ``PYTHONPATH`` folders it came from), with the project's
  package and configuration masked; in its place a copy of the agent API v1 modules
  (``pipeline.agents.base``, ``pipeline.agents.tools``), which is all an agent may import
  of the project;
* no release, no WORK, no sealed bundle, no episode folder: a policy acts only through
  the code and tool calls it returns, which the harness runs in the episode's own
  sandbox;
* the network of the host when ``network`` is on (the default: a policy usually calls
  its model's endpoint), nothing else of the host (its own pid, IPC and UTS namespaces,
  the seccomp filter, no capabilities, an unprivileged uid for a root harness, the
  programs' rlimits).

The harness talks to it over a pipe, one JSON object per line: ``{"op": "reset",
"info": ...}`` and ``{"op": "act", "observation": ...}``, answered with ``{"ok": ...}``
or ``{"error": ...}``.  What the policy prints goes to the transcript's events, capped.
A policy that does not answer within ``act_timeout`` seconds, dies or answers garbage is
a ``policy_error`` of the episode, never a harness crash.
"""
from __future__ import annotations

import dataclasses
import json
import os
import select
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any, Optional

from ..agents.base import Agent, EpisodeInfo, Observation
from ..agents.tools import Reply, ToolCall, ToolSpec
from . import bwrap
from .limits import Limits

_HERE = Path(__file__).resolve().parent
_AGENTS = _HERE.parent / "agents"
RUNNER = _HERE / "policy_runner.py"
#: Bytes of one answer line accepted from a policy.
MAX_ANSWER = 64 * 1024 * 1024
#: Bytes of an agent's own module copied into its sandbox (when it lives outside the environment).
MAX_MODULE_BYTES = 200 * 1024 * 1024
#: Characters of a policy's own output kept per call (in the Reply's events).
LOG_CAP = 8_000
#: Files under /etc a networked policy needs (name resolution, TLS roots).
NETWORK_ETC = ("/etc/resolv.conf", "/etc/hosts", "/etc/ssl", "/etc/ca-certificates", "/etc/pki", "/etc/gai.conf")


class PolicyError(RuntimeError):
    """The policy process failed (died, timed out, answered garbage)."""


def write_shim(lib: Path) -> None:
    """The agent API v1 as a package of its own (all an external agent may import of the project)
    and the policy runner, in ``lib``."""
    agents = lib / "pipeline" / "agents"
    agents.mkdir(parents=True)
    (lib / "pipeline" / "__init__.py").write_text('"""The agent API v1 only (a policy sandbox)."""\n')
    (agents / "__init__.py").write_text(
        '"""The agent API v1 (a policy sandbox: the rest of the project is not here)."""\n'
        "from .base import Agent, AgentSpec, EpisodeInfo, Observation, ScriptedAgent, fenced, literal\n"
        "from .tools import API_VERSION, Reply, ToolCall, ToolSpec\n")
    for name in ("base.py", "tools.py"):
        shutil.copyfile(_AGENTS / name, agents / name)
    shutil.copyfile(RUNNER, lib / "dtw_policy_runner.py")
    for path in lib.rglob("*"):
        os.chmod(path, 0o755 if path.is_dir() else 0o644)
    os.chmod(lib, 0o755)


def _jsonable(value: Any) -> Any:
    if isinstance(value, ToolSpec):
        return dataclasses.asdict(value)
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _jsonable(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if isinstance(value, dict):
        return {str(k): _jsonable(v) for k, v in value.items()}
    return value


class SandboxedPolicy(Agent):
    """A proxy for an agent made by ``factory`` (``module:attr`` or an entry-point name) in its own sandbox."""

    def __init__(self, factory: str, options: Optional[dict] = None, *, entry_point: bool = False,
                 network: bool = True, isolation: str = "require", act_timeout: float = 3600.0,
                 limits: Optional[Limits] = None):
        self.name = factory
        if entry_point:  # resolved here: the sandbox sees the module, not the installed metadata
            from importlib.metadata import entry_points

            found = [ep for ep in entry_points(group="drugtargetworld.agents") if ep.name == factory]
            if not found:
                raise PolicyError(f"agent={factory}: no installed drugtargetworld.agents entry point of that name")
            factory = found[0].value.replace(" ", "")
        self.factory, self.options = factory, dict(options or {})
        self.network, self.act_timeout = network, float(act_timeout)
        self.limits = (limits or Limits()).validate().resolved(act_timeout)
        self.proc: Optional[subprocess.Popen] = None
        self.state = Path(tempfile.mkdtemp(prefix="dtw-policy-"))
        os.chmod(self.state, 0o711)
        self.lib = self.state / "lib"
        write_shim(self.lib)
        self.layout = None
        self._copy_module()
        self.isolated, self.reason = False, ""
        if isolation != "off":
            try:
                layout, problem = bwrap.layout(bwrap.project_paths())
            except bwrap.SandboxUnavailable as error:
                layout, problem = None, str(error)
            if problem is None:
                problem = bwrap.probe(layout, self.limits)
            if problem is None:
                self.layout, self.isolated = layout, True
                self.reason = "the policy runs in a sandbox of its own (no release, no WORK, no sealed bundle" + \
                              (", host network" if network else ", no network") + ")"
            else:
                self.reason = f"the policy cannot be isolated here: {problem}"
        if isolation == "require" and not self.isolated:
            self.close()
            raise bwrap.SandboxUnavailable(f"isolation=require but the policy cannot be isolated: {self.reason}")
        # The agent is made now, inside its sandbox: an unimportable module, a factory that raises
        # or returns no agent, and unknown options fail here, before the episode starts.
        try:
            self.description = self._ask_first(timeout=min(self.act_timeout, 300.0))
        except PolicyError:
            self.close()
            raise

    # -- the process

    def _copy_module(self) -> None:
        """The agent's top-level module or package, copied beside the API shim when it lives outside
        the environment's folders (a source checkout, an editable install, a --target folder): the
        program's uid may not read the user's own folders, and nothing else of them is needed."""
        import importlib.util

        top = self.factory.partition(":")[0].split(".")[0]
        try:
            spec = importlib.util.find_spec(top) if top else None
        except (ImportError, ValueError):
            spec = None
        if spec is None:
            return  # the sandbox says it cannot import the module, in one line
        where = list(spec.submodule_search_locations or []) or ([spec.origin] if spec.origin else [])
        where = [Path(p) for p in where if p and os.path.exists(p)]
        import sys

        environment = [Path(sys.prefix), Path(sys.base_prefix), *map(Path, bwrap.site_dirs())]
        if not where or any(bwrap.contains(d.resolve(), p.resolve()) for p in where for d in environment):
            return
        if any(bwrap.contains(q, p) or bwrap.contains(p, q) for p in where for q in bwrap.project_paths()):
            return  # the project's own package is never copied in (the API shim stands for it)
        site = self.lib / "agent_site"
        site.mkdir(exist_ok=True)
        size = 0
        for path in where:
            if path.is_dir():
                shutil.copytree(path, site / path.name, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                                symlinks=False, dirs_exist_ok=True)
            else:
                shutil.copyfile(path, site / path.name)
        for path in site.rglob("*"):
            if path.is_file():
                size += path.stat().st_size
            os.chmod(path, 0o755 if path.is_dir() else 0o644)
        os.chmod(site, 0o755)
        if size > MAX_MODULE_BYTES:
            raise PolicyError(f"agent={self.name}: its module {top} holds {size:,} bytes outside the environment "
                              f"(at most {MAX_MODULE_BYTES:,} are copied into its sandbox); install it instead")

    def _command(self) -> tuple[list, dict, Any]:
        env = bwrap.base_env()
        extra_paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and os.path.isdir(p)]
        if not self.isolated:
            env["DTW_POLICY_PATH"] = os.pathsep.join([str(self.lib), str(self.lib / "agent_site"), *extra_paths])
            command = [*bwrap.exec_chain(None, self.limits), bwrap.python_executable(), "-I", "-B",
                       str(self.lib / "dtw_policy_runner.py")]
            return command, env, None
        lib = "/opt/dtw-policy"
        env["DTW_POLICY_PATH"] = os.pathsep.join([lib, f"{lib}/agent_site", *extra_paths])
        args = bwrap.base_args(self.layout, self.limits)
        if self.network:
            args = [a for a in args if a != "--unshare-net"]
            for path in NETWORK_ETC:
                args += ["--ro-bind-try", path, path]
        for key, value in env.items():
            args += ["--setenv", key, value]
        made: set = set()
        # PYTHONPATH folders (the agent's dependencies, when installed with --target) as given.
        binds = [Path(p) for p in extra_paths if not any(bwrap.contains(d, Path(p)) for d in self.layout.python_dirs)]
        args += bwrap.parents_args([Path(lib), *binds], made)
        args += ["--ro-bind", str(self.lib), lib]
        for path in binds:
            args += ["--ro-bind", str(path), str(path)]
        for protected in bwrap.project_paths():  # the project's package and config, wherever bound
            if protected.exists() and any(bwrap.contains(b, protected) for b in binds):
                args += (["--perms", "0555", "--tmpfs", str(protected)] if protected.is_dir()
                         else ["--ro-bind", "/dev/null", str(protected)])
        args += ["--chdir", "/tmp"]
        command = [*bwrap.exec_chain(self.layout, self.limits), bwrap.python_executable(), "-I", "-B",
                   f"{lib}/dtw_policy_runner.py"]
        call = bwrap.BwrapCall(args, command, self.layout.seccomp)
        return call.argv, bwrap.base_env(), call

    def _start(self) -> None:
        cmd, env, call = self._command()
        try:
            self.proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                         env=env, start_new_session=True, pass_fds=tuple(call.fds) if call else ())
        finally:
            if call is not None:
                call.close()
        os.set_blocking(self.proc.stdout.fileno(), False)
        os.set_blocking(self.proc.stderr.fileno(), False)
        self._buffers = {"out": bytearray(), "err": bytearray()}

    def _ask_first(self, timeout: float) -> Any:
        """Start the process and make the agent (the request goes on the pipe, never the command line)."""
        self._start()
        return self._ask({"factory": self.factory, "options": self.options}, timeout)

    def _ask(self, message: dict, timeout: float) -> Any:
        line = (json.dumps(_jsonable(message), allow_nan=False) + "\n").encode()
        try:
            self.proc.stdin.write(line)
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError):
            raise PolicyError(f"the policy process is gone{self._tail()}") from None
        return self._answer(timeout)

    def _answer(self, timeout: float) -> Any:
        deadline = time.monotonic() + timeout
        out = self._buffers["out"]
        while b"\n" not in out:
            left = deadline - time.monotonic()
            if left <= 0:
                self._kill()
                raise PolicyError(f"the policy did not answer within {timeout:g} s")
            if not self._read(min(left, 1.0)):
                if self.proc.poll() is not None and b"\n" not in out:
                    raise PolicyError(f"the policy process exited ({self.proc.returncode}){self._tail()}")
            if len(out) > MAX_ANSWER:
                self._kill()
                raise PolicyError(f"the policy's answer passed {MAX_ANSWER} bytes")
        raw, _, rest = bytes(out).partition(b"\n")
        out[:] = rest
        try:
            answer = json.loads(raw.decode("utf-8"))
        except (ValueError, UnicodeDecodeError):
            raise PolicyError("the policy answered something that is not JSON") from None
        if not isinstance(answer, dict):
            raise PolicyError("the policy's answer is not a JSON object")
        if "error" in answer:
            raise PolicyError(str(answer["error"])[:4000])
        return answer.get("ok")

    def _read(self, wait: float) -> bool:
        got = False
        ready, _, _ = select.select([self.proc.stdout, self.proc.stderr], [], [], wait)
        for stream in ready:
            try:
                chunk = os.read(stream.fileno(), 1 << 20)
            except BlockingIOError:
                continue
            if chunk:
                got = True
                key = "out" if stream is self.proc.stdout else "err"
                self._buffers[key] += chunk
                if key == "err" and len(self._buffers["err"]) > LOG_CAP * 4:
                    del self._buffers["err"][: len(self._buffers["err"]) - LOG_CAP * 2]
        return got

    def _logs(self) -> list:
        text = bytes(self._buffers["err"]).decode("utf-8", "replace") if self.proc else ""
        if self.proc:
            self._buffers["err"].clear()
        return [f"policy output: {text[-LOG_CAP:]}"] if text.strip() else []

    def _tail(self) -> str:
        if self.proc is None:
            return ""
        self._read(0.2)
        text = bytes(self._buffers["err"]).decode("utf-8", "replace").strip().splitlines()
        return f": {text[-1][:300]}" if text else ""

    def _kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, 9)
            except (ProcessLookupError, PermissionError):
                pass
            self.proc.wait()

    # -- the Agent interface

    def reset(self, info: EpisodeInfo) -> None:
        super().reset(info)
        self._ask({"op": "reset", "info": info}, timeout=min(self.act_timeout, 600.0))

    def act(self, observation: Observation):
        answer = self._ask({"op": "act", "observation": observation}, timeout=self.act_timeout)
        logs = self._logs()
        if isinstance(answer, str):
            return Reply(text=answer, events=tuple(logs)) if logs else answer
        if not isinstance(answer, dict):
            raise PolicyError("the policy's reply is neither text nor a reply object")
        calls = tuple(ToolCall(str(c.get("name")), c.get("arguments"), c.get("id"))
                      for c in answer.get("tool_calls") or () if isinstance(c, dict))
        usage = answer.get("usage") if isinstance(answer.get("usage"), dict) else None
        cost = answer.get("cost_usd") if isinstance(answer.get("cost_usd"), (int, float)) else None
        latency = answer.get("latency_s") if isinstance(answer.get("latency_s"), (int, float)) else None
        events = tuple(str(e)[:2000] for e in answer.get("events") or ()) + tuple(logs)
        text = answer.get("text")
        return Reply(text=text if isinstance(text, str) else None, tool_calls=calls, usage=usage, cost_usd=cost,
                     latency_s=latency, events=events)

    def close(self) -> None:
        if self.proc is not None:
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self._kill()
        shutil.rmtree(self.state, ignore_errors=True)

    def __del__(self):  # a proxy dropped without close() still ends its process
        try:
            self.close()
        except Exception:
            pass
