"""One command-line style for every entry point that is not a Hydra app.

Every option can be given as ``key=value`` (as Hydra overrides are) or as ``--key value``
/ ``--key=value`` (as the SPEC's command forms are: ``pipeline.score --sealed … --work …``);
a boolean option also as ``--key`` (true) or ``--no-key`` (false); positional arguments
fill the command's positional options in order; dashes and underscores in a key are the
same.  Prefixed groups (``agent.<option>=``, ``limits.<name>=``) collect their own keys.
``--help`` prints the options (and those of the chosen agent where the command has one);
``--version`` prints the project's version.  A problem is one line on stderr naming the
option and what is valid, with exit status 2 (``UsageError``).

    spec = Command("pipeline.score", "The scorer ...", [
        Option("sealed", "the world's sealed/ folder", positional=True),
        Option("ledger", "the harness's ledger", required=False),
        Option("paper_compat", "S2.5's phenotype rule", kind=bool, default=False),
    ])
    args = spec.parse(argv)          # {"sealed": ..., "ledger": None, "paper_compat": False, ...}

A prefixed group's keys arrive as a dict under ``<prefix>_options`` (``agent_options``).
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")
_UNITS = {"": 1, "b": 1, "k": 1024, "kb": 1024, "kib": 1024, "m": 1024 ** 2, "mb": 1024 ** 2, "mib": 1024 ** 2,
          "g": 1024 ** 3, "gb": 1024 ** 3, "gib": 1024 ** 3, "t": 1024 ** 4, "tb": 1024 ** 4, "tib": 1024 ** 4}


class UsageError(ValueError):
    """A command line that cannot be run; the message is one line."""


class HelpRequested(Exception):
    """--help or --version: the text to print, exit status 0."""


def version() -> str:
    try:
        from importlib.metadata import version as found

        return found("drugtargetworld")
    except Exception:  # not installed (a source checkout on the path)
        return "unknown (not installed)"


def to_bool(key: str, text: Any) -> bool:
    if isinstance(text, bool):
        return text
    lowered = str(text).strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    raise UsageError(f"{key}={text}: invalid; valid: true or false")


def to_size(key: str, text: str) -> int:
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
    unit = match.group(2).lower() if match else None
    if match is None or unit not in _UNITS:
        raise UsageError(f"{key}={text}: invalid; valid: a size such as 16GiB, 512MiB or bytes")
    return int(float(match.group(1)) * _UNITS[unit])


def scalar(text: str) -> Any:
    """A prefixed group's value: JSON scalars (numbers, true/false/null) as such, anything else as text."""
    import json

    try:
        value = json.loads(text)
    except ValueError:
        return text
    return value if isinstance(value, (int, float, bool)) or value is None else text


@dataclass
class Option:
    name: str
    help: str
    kind: Any = str  # str, int, float, bool, "size", or a callable (key, text) -> value
    default: Any = None
    required: bool = False
    positional: bool = False
    choices: Optional[tuple] = None
    flag: bool = False  # may be given as --key (true) / --no-key (false) though not a plain bool

    @property
    def is_flag(self) -> bool:
        return self.kind is bool or self.flag

    def convert(self, text: Any) -> Any:
        key = self.name
        if self.kind is bool:
            value = to_bool(key, text)
        elif self.kind == "size":
            value = to_size(key, text)
        elif self.kind is int:
            try:
                value = int(str(text))
            except ValueError:
                raise UsageError(f"{key}={text}: invalid; valid: an integer") from None
        elif self.kind is float:
            try:
                value = float(str(text))
            except ValueError:
                raise UsageError(f"{key}={text}: invalid; valid: a number") from None
        elif callable(self.kind) and self.kind is not str:
            value = self.kind(key, text)
        else:
            value = str(text)
        if self.choices is not None and value not in self.choices:
            raise UsageError(f"{key}={text}: invalid; valid: {', '.join(map(str, self.choices))}")
        return value


@dataclass
class Command:
    prog: str
    description: str
    options: list
    groups: dict = field(default_factory=dict)  # prefix -> help ("agent" -> "agent.<option>=<value>: ...")
    epilog: str = ""
    #: extra help appended by the caller once some options are known (the chosen agent's options)
    help_hook: Optional[Callable[[dict], str]] = None

    def _lookup(self, key: str) -> Optional[Option]:
        key = key.replace("-", "_")
        return next((o for o in self.options if o.name == key), None)

    def usage(self, partial: Optional[dict] = None) -> str:
        positional = " ".join(f"<{o.name}>" for o in self.options if o.positional)
        lines = [f"usage: python -m {self.prog} {positional} [key=value | --key value ...]".replace("  ", " "), "",
                 self.description.strip(), "", "options (key=value or --key value):"]
        for o in self.options:
            flag = "" if not o.is_flag else " (also --{0} / --no-{0})".format(o.name.replace("_", "-"))
            need = " (required)" if o.required else ("" if o.default is None else f" (default {o.default})")
            choice = f" [{'|'.join(map(str, o.choices))}]" if o.choices else ""
            lines.append(f"  {o.name}{choice}{need}{flag}: {o.help}")
        for prefix, text in self.groups.items():
            lines.append(f"  {prefix}.<name>=<value>: {text}")
        lines += ["  --help: this text; --version: the project's version"]
        if self.help_hook is not None and partial:
            extra = self.help_hook(partial)
            if extra:
                lines += ["", extra]
        if self.epilog:
            lines += ["", self.epilog.strip()]
        return "\n".join(lines)

    def parse(self, argv: list[str]) -> dict:
        """The options as a dict (defaults filled, prefixed groups as dicts); raises UsageError or HelpRequested."""
        args: dict = {}
        groups: dict = {prefix: {} for prefix in self.groups}
        positional = [o for o in self.options if o.positional]
        wants_help = False
        items = list(argv)
        i = 0
        while i < len(items):
            item = items[i]
            i += 1
            if item in ("-h", "--help"):
                wants_help = True
                continue
            if item == "--version":
                raise HelpRequested(f"drugtargetworld {version()}")
            if item.startswith("--"):
                body = item[2:]
                key, sep, value = body.partition("=")
                option = self._lookup(key)
                if option is None and key.startswith("no-") and self._lookup(key[3:]) is not None \
                        and self._lookup(key[3:]).is_flag:
                    option, value, sep = self._lookup(key[3:]), "false", "="
                if option is None and key.split(".", 1)[0] in groups:
                    if not sep:
                        if i >= len(items):
                            raise UsageError(f"--{key}: a value is needed")
                        value, i = items[i], i + 1
                    self._group(groups, key, value)
                    continue
                if option is None:
                    raise UsageError(f"--{key}: unknown option; valid: {self._valid()}")
                if not sep:
                    if option.is_flag:
                        value = "true"
                    elif i < len(items):
                        value, i = items[i], i + 1
                    else:
                        raise UsageError(f"--{key}: a value is needed")
                self._set(args, option, value)
                continue
            if "=" in item and not item.startswith("="):
                key, value = item.split("=", 1)
                key = key.lstrip("+")
                if key.split(".", 1)[0] in groups and "." in key:
                    self._group(groups, key, value)
                    continue
                option = self._lookup(key)
                if option is None:
                    raise UsageError(f"{key}: unknown option; valid: {self._valid()}")
                self._set(args, option, value)
                continue
            free = [o for o in positional if o.name not in args]
            if not free:
                raise UsageError(f"{item}: unexpected argument; expected key=value; valid: {self._valid()}")
            self._set(args, free[0], item)
        if wants_help:
            raise HelpRequested(self.usage(args))
        for o in self.options:
            if o.name not in args:
                if o.required:
                    raise UsageError(f"missing {o.name}=; {o.help}" + (
                        f"; usage: python -m {self.prog} " + " ".join(
                            f"{p.name}=<{p.name}>" for p in self.options if p.required)))
                args[o.name] = o.default
        for prefix, values in groups.items():
            args[f"{prefix}_options"] = values
        return args

    def _set(self, args: dict, option: Option, value: Any) -> None:
        if option.name in args:
            raise UsageError(f"{option.name}: given twice")
        args[option.name] = option.convert(value)

    def _group(self, groups: dict, key: str, value: str) -> None:
        prefix, _, name = key.partition(".")
        if not name:
            raise UsageError(f"{key}: valid: {prefix}.<name>=<value>")
        if name in groups[prefix]:
            raise UsageError(f"{key}: given twice")
        groups[prefix][name] = value

    def _valid(self) -> str:
        names = [o.name for o in self.options] + [f"{p}.<name>" for p in self.groups]
        return ", ".join(names)

    def main(self, argv: Optional[list], run: Callable[[dict], int]) -> int:
        """Parse ``argv`` and call ``run(args)``; usage problems are one line, exit status 2."""
        argv = sys.argv[1:] if argv is None else list(argv)
        try:
            args = self.parse(argv)
        except HelpRequested as shown:
            print(str(shown))
            return 0
        except UsageError as error:
            print(f"{self.prog}: error: {error}", file=sys.stderr)
            return 2
        return run(args)
