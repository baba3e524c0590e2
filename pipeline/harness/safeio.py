"""Every harness operation on a folder that agent code can write (WORK, the channel).

Agent code owns WORK: between two turns it can leave a symbolic link, a
dangling link, a FIFO, a folder or a tree thousands of levels deep at any
name the harness is about to use.  The harness runs as root (or as the
operator), so a write that follows such a link, a read that blocks on a FIFO
or a walk that recurses once per level would be the agent's lever.  This
module is the one place those operations live, for every kind of world:

``write_file``
    creates ``<root>/<rel>`` afresh: every folder on the way is opened with
    ``O_NOFOLLOW | O_DIRECTORY`` relative to its parent's descriptor (a link or
    a non-folder there is removed and replaced by a real folder), the data go to
    a new file with an unpredictable name created with ``O_CREAT | O_EXCL |
    O_NOFOLLOW`` in that folder, and ``rename`` puts it in place, which replaces
    a link, a FIFO or a file at the target name without following it (a folder
    there is removed first).
``read_file``
    opens without following links and without blocking (``O_NONBLOCK``), takes
    only a regular file and reads at most ``cap`` bytes.
``walk``
    an iterative walk (no recursion, links never followed, at most
    ``MAX_DEPTH`` levels: one descriptor per level is open at a time).
``remove_tree``
    removes a folder's content and the folder without following links and
    without recursion, whatever its depth (folders deeper than ``MAX_DEPTH``
    are first moved up, so the descriptors in use stay bounded).
``copy_tree``
    copies regular files, folders and links (as links) and skips everything
    else, without following links.
``printable``
    the one text sanitiser: what agent code or a model wrote, made safe to show
    (no control characters or lone surrogates) and bounded.

None of these raises on anything an agent can plant, except ``OSError`` where
the host itself fails (a full disk); callers turn that into an observation.
"""
from __future__ import annotations

import errno
import hashlib
import os
import secrets
import stat
from pathlib import Path
from typing import Iterator, Optional

#: Deepest folder level the harness descends to (WORK deeper than this is over its limit).
MAX_DEPTH = 128
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
_CREATE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


class Refused(OSError):
    """What is at a path is not what the harness may use there (a link, a FIFO, a folder)."""


def _parts(rel: str | os.PathLike) -> list[str]:
    parts = [p for p in Path(rel).parts if p not in ("", ".")]
    for p in parts:
        if p in ("..", "/") or "/" in p or "\0" in p:
            raise ValueError(f"{rel!r}: not a relative path inside the folder")
    return parts


def open_root(root: str | os.PathLike) -> int:
    """A descriptor of ``root`` itself (a harness-made folder; a link there is refused)."""
    return os.open(os.fspath(root), _DIR_FLAGS)


def _remove_entry(dir_fd: int, name: str) -> None:
    """Remove whatever is at ``name`` in ``dir_fd`` (a folder with its content), never following links."""
    try:
        st = os.lstat(name, dir_fd=dir_fd)
    except FileNotFoundError:
        return
    if stat.S_ISDIR(st.st_mode):
        _remove_dir_at(dir_fd, name)
    else:
        try:
            os.unlink(name, dir_fd=dir_fd)
        except FileNotFoundError:
            pass


def open_dir(root_fd: int, parts: list[str], *, create: bool, owner: Optional[int] = None) -> int:
    """A descriptor of ``root/<parts>``; with ``create``, what is not a real folder on the way becomes one.

    Without ``create`` a missing or non-folder component raises ``Refused``
    (or ``FileNotFoundError``).  ``owner`` (a uid) is given each folder made.
    """
    fd = os.dup(root_fd)
    try:
        for part in parts:
            try:
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except FileNotFoundError:
                if not create:
                    raise
                os.mkdir(part, 0o755, dir_fd=fd)
                if owner is not None:
                    os.chown(part, owner, owner, dir_fd=fd, follow_symlinks=False)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            except OSError as error:
                # ELOOP (a link), ENOTDIR (a file, a FIFO): not a folder the harness may enter.
                if error.errno not in (errno.ELOOP, errno.ENOTDIR) or not create:
                    raise Refused(error.errno, f"{part}: not a folder (a link or a file)") from None
                _remove_entry(fd, part)
                os.mkdir(part, 0o755, dir_fd=fd)
                if owner is not None:
                    os.chown(part, owner, owner, dir_fd=fd, follow_symlinks=False)
                nxt = os.open(part, _DIR_FLAGS, dir_fd=fd)
            os.close(fd)
            fd = nxt
        return fd
    except BaseException:
        os.close(fd)
        raise


def write_file(root: str | os.PathLike, rel: str | os.PathLike, data: bytes | str, *, mode: int = 0o644,
               owner: Optional[int] = None) -> None:
    """Create ``root/rel`` holding ``data``, replacing whatever was there, following no link.

    ``root`` is a folder the harness made (WORK's mount source); everything
    below it may have been planted.  ``owner`` (a uid) gets the file and any
    folder made on the way, so that agent code may replace them later.
    """
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    parts = _parts(rel)
    if not parts:
        raise ValueError("write_file: an empty path")
    root_fd = open_root(root)
    try:
        dir_fd = open_dir(root_fd, parts[:-1], create=True, owner=owner)
    finally:
        os.close(root_fd)
    try:
        _write_at(dir_fd, parts[-1], data, mode, owner)
    finally:
        os.close(dir_fd)


def _write_at(dir_fd: int, name: str, data: bytes, mode: int, owner: Optional[int]) -> None:
    for _ in range(8):
        tmp = f".dtw-harness-{secrets.token_hex(8)}"
        try:
            fd = os.open(tmp, _CREATE_FLAGS, mode, dir_fd=dir_fd)
        except FileExistsError:
            continue
        break
    else:  # pragma: no cover - eight collisions of 64 random bits
        raise OSError(errno.EEXIST, "no free temporary name")
    try:
        view = memoryview(data)
        while view:
            written = os.write(fd, view)
            view = view[written:]
        if owner is not None:
            os.fchown(fd, owner, owner)
        os.fchmod(fd, mode)
    except BaseException:
        os.close(fd)
        _remove_entry(dir_fd, tmp)
        raise
    os.close(fd)
    try:
        try:
            os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
        except (IsADirectoryError, OSError) as error:
            if isinstance(error, IsADirectoryError) or error.errno in (errno.EISDIR, errno.ENOTEMPTY, errno.EEXIST):
                _remove_entry(dir_fd, name)
                os.rename(tmp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
            else:
                raise
    except BaseException:
        _remove_entry(dir_fd, tmp)
        raise


def make_dir(root: str | os.PathLike, rel: str | os.PathLike, *, owner: Optional[int] = None) -> None:
    """Make ``root/rel`` a real folder (what else is there is removed), following no link."""
    root_fd = open_root(root)
    try:
        os.close(open_dir(root_fd, _parts(rel), create=True, owner=owner))
    finally:
        os.close(root_fd)


def read_file(root: str | os.PathLike, rel: str | os.PathLike, cap: int) -> tuple[Optional[bytes], str]:
    """(bytes, status) of ``root/rel``: a regular file reached without links, at most ``cap`` bytes.

    ``status`` is "ok", "absent", "not a regular file in WORK", "larger than
    <cap> bytes" or "unreadable (<error>)"; the bytes are None unless "ok".
    """
    parts = _parts(rel)
    try:
        root_fd = open_root(root)
    except OSError as error:
        return None, f"unreadable ({type(error).__name__})"
    try:
        try:
            dir_fd = open_dir(root_fd, parts[:-1], create=False)
        except FileNotFoundError:
            return None, "absent"
        except OSError:
            return None, "not a regular file in WORK"
        try:
            try:
                st = os.lstat(parts[-1], dir_fd=dir_fd)
            except FileNotFoundError:
                return None, "absent"
            if not stat.S_ISREG(st.st_mode):
                return None, "not a regular file in WORK"
            try:
                fd = os.open(parts[-1], _READ_FLAGS, dir_fd=dir_fd)
            except OSError as error:
                if error.errno == errno.ELOOP:
                    return None, "not a regular file in WORK"
                return None, f"unreadable ({type(error).__name__})"
            try:
                if not stat.S_ISREG(os.fstat(fd).st_mode):
                    return None, "not a regular file in WORK"
                chunks, total = [], 0
                while total <= cap:
                    chunk = os.read(fd, min(1 << 20, cap + 1 - total))
                    if not chunk:
                        break
                    chunks.append(chunk)
                    total += len(chunk)
                if total > cap:
                    return None, f"larger than {cap} bytes"
                return b"".join(chunks), "ok"
            finally:
                os.close(fd)
        finally:
            os.close(dir_fd)
    except OSError as error:
        return None, f"unreadable ({type(error).__name__})"
    finally:
        os.close(root_fd)


# ----------------------------------------------------------------------------- walking


class Entry:
    """One entry met by ``walk``: its path relative to the root, its lstat, its depth (1 = in the root)."""

    __slots__ = ("rel", "stat", "depth")

    def __init__(self, rel: str, st: os.stat_result, depth: int):
        self.rel, self.stat, self.depth = rel, st, depth

    @property
    def is_dir(self) -> bool:
        return stat.S_ISDIR(self.stat.st_mode)


def walk(root: str | os.PathLike, *, max_depth: int = MAX_DEPTH, too_deep: Optional[list] = None) -> Iterator[Entry]:
    """Every entry under ``root``, depth first in name order, links not followed, without recursion.

    Folders at ``max_depth`` are yielded but not entered; their paths go to
    ``too_deep`` when a list is given.  Entries that vanish or cannot be
    read are skipped.
    """
    try:
        root_fd = open_root(root)
    except OSError:
        return
    # Stack of (descriptor, relative path, depth, remaining names); one descriptor per level.
    stack: list = []
    try:
        stack.append((root_fd, "", 0, _names(root_fd)))
        while stack:
            fd, rel, depth, names = stack[-1]
            if not names:
                os.close(fd)
                stack.pop()
                continue
            name = names.pop()
            try:
                st = os.lstat(name, dir_fd=fd)
            except OSError:
                continue
            path = f"{rel}/{name}" if rel else name
            yield Entry(path, st, depth + 1)
            if stat.S_ISDIR(st.st_mode):
                if depth + 1 >= max_depth:
                    if too_deep is not None:
                        too_deep.append(path)
                    continue
                try:
                    child = os.open(name, _DIR_FLAGS, dir_fd=fd)
                except OSError:
                    continue
                stack.append((child, path, depth + 1, _names(child)))
    finally:
        _close_all(stack)


def _close_all(stack: list) -> None:
    for fd, *_ in stack:
        try:
            os.close(fd)
        except OSError:
            pass


def _names(fd: int) -> list:
    """The names in a folder, in reverse order (popped from the end: name order)."""
    try:
        names = os.listdir(fd)
    except OSError:
        return []
    names.sort(reverse=True)
    return names


def tree_usage(root: str | os.PathLike, *, max_entries: int = 10_000_000) -> tuple[int, int, int]:
    """(bytes allocated, entries, deepest level) under ``root``; sparse and fallocated space count what they hold."""
    total = entries = deepest = 0
    for entry in walk(root, max_depth=MAX_DEPTH + 1):
        entries += 1
        total += entry.stat.st_blocks * 512
        deepest = max(deepest, entry.depth)
        if entries > max_entries:
            break
    return total, entries, deepest


def chown_tree(root: str | os.PathLike, uid: int) -> None:
    """Give ``root`` and everything under it to ``uid`` (links themselves, never their targets)."""
    os.chown(os.fspath(root), uid, uid, follow_symlinks=False)
    base = os.fspath(root)
    for entry in walk(root):
        try:
            # The path is inside a harness-made root; no component can be a link, since the walk
            # only descends into real folders, but lchown on the entry itself is what matters.
            os.chown(os.path.join(base, entry.rel), uid, uid, follow_symlinks=False)
        except OSError:
            pass


# ----------------------------------------------------------------------------- removing and copying


def _remove_dir_at(parent_fd: int, name: str) -> None:
    """Remove the folder ``name`` of ``parent_fd`` with everything in it; iterative, bounded descriptors.

    Folders deeper than ``MAX_DEPTH`` below it are moved up beside it (into
    ``parent_fd`` under a random name) and removed afterwards from there.
    """
    pending = [name]
    while pending:
        _remove_bounded(parent_fd, pending.pop(), pending)


def _remove_bounded(base_fd: int, name: str, pending: list) -> None:
    try:
        top = os.open(name, _DIR_FLAGS, dir_fd=base_fd)
    except FileNotFoundError:
        return
    except OSError as error:
        if error.errno in (errno.ELOOP, errno.ENOTDIR):
            os.unlink(name, dir_fd=base_fd)
            return
        raise
    # One level per entry: [descriptor, its name in the parent, the parent's descriptor, names left].
    stack = [[top, name, base_fd, _names(top)]]
    try:
        while stack:
            fd, own_name, parent, names = stack[-1]
            if names:
                child = names.pop()
                try:
                    st = os.lstat(child, dir_fd=fd)
                except FileNotFoundError:
                    continue
                if not stat.S_ISDIR(st.st_mode):
                    try:
                        os.unlink(child, dir_fd=fd)
                    except FileNotFoundError:
                        pass
                elif len(stack) >= MAX_DEPTH:
                    moved = f".dtw-remove-{secrets.token_hex(8)}"
                    os.rename(child, moved, src_dir_fd=fd, dst_dir_fd=base_fd)
                    pending.append(moved)
                else:
                    child_fd = os.open(child, _DIR_FLAGS, dir_fd=fd)
                    stack.append([child_fd, child, fd, _names(child_fd)])
                continue
            try:
                os.rmdir(own_name, dir_fd=parent)
            except FileNotFoundError:
                pass
            except OSError as error:
                if error.errno != errno.ENOTEMPTY or stack[-1][3] is None:
                    raise
                stack[-1][3] = _names(fd) or None  # something appeared meanwhile: one more pass
                continue
            os.close(fd)
            stack.pop()
    finally:
        _close_all(stack)


def remove_tree(path: str | os.PathLike) -> None:
    """Remove ``path`` (a folder, a file or a link) without following links; absent is fine."""
    path = os.path.abspath(os.fspath(path))
    parent, name = os.path.split(path)
    try:
        parent_fd = os.open(parent, _DIR_FLAGS & ~os.O_NOFOLLOW)
    except FileNotFoundError:
        return
    try:
        _remove_entry(parent_fd, name)
    finally:
        os.close(parent_fd)


def remove_entries(root: str | os.PathLike, rels: list[str]) -> list[str]:
    """Remove each ``root/rel`` (folders with their content); returns those removed."""
    removed = []
    root_fd = open_root(root)
    try:
        for rel in rels:
            parts = _parts(rel)
            try:
                dir_fd = open_dir(root_fd, parts[:-1], create=False)
            except OSError:
                continue
            try:
                _remove_entry(dir_fd, parts[-1])
                removed.append(rel)
            except OSError:
                pass
            finally:
                os.close(dir_fd)
    finally:
        os.close(root_fd)
    return removed


def copy_tree(source: str | os.PathLike, target: str | os.PathLike) -> list[str]:
    """Copy ``source`` into the new folder ``target``: folders, regular files, links as links,
    with their permission bits (set-id bits dropped) and, when the harness is root, their owners.

    FIFOs, sockets and devices are skipped and listed in the return value, as
    is anything deeper than ``MAX_DEPTH``.
    """
    as_root = os.geteuid() == 0
    skipped: list[str] = []
    target = os.fspath(target)
    os.mkdir(target, 0o755)
    too_deep: list = []
    src_root = open_root(source)
    dst_root = open_root(target)
    try:
        root_st = os.fstat(src_root)
        os.chmod(target, stat.S_IMODE(root_st.st_mode) & 0o777)
        if as_root:
            os.chown(target, root_st.st_uid, root_st.st_gid)
        for entry in walk(source, too_deep=too_deep):
            parts = _parts(entry.rel)
            mode = entry.stat.st_mode
            try:
                src_dir = open_dir(src_root, parts[:-1], create=False)
            except OSError:
                skipped.append(entry.rel)
                continue
            try:
                dst_dir = open_dir(dst_root, parts[:-1], create=True)
            except OSError:
                os.close(src_dir)
                skipped.append(entry.rel)
                continue
            try:
                name = parts[-1]
                if stat.S_ISDIR(mode):
                    os.mkdir(name, 0o755, dir_fd=dst_dir)
                elif stat.S_ISLNK(mode):
                    os.symlink(os.readlink(name, dir_fd=src_dir), name, dir_fd=dst_dir)
                elif stat.S_ISREG(mode):
                    _copy_file_at(src_dir, dst_dir, name)
                else:
                    skipped.append(entry.rel)
                    continue
                if not stat.S_ISLNK(mode):
                    os.chmod(name, stat.S_IMODE(mode) & 0o777, dir_fd=dst_dir, follow_symlinks=True)
                if as_root:
                    os.chown(name, entry.stat.st_uid, entry.stat.st_gid, dir_fd=dst_dir, follow_symlinks=False)
            except OSError:
                skipped.append(entry.rel)
            finally:
                os.close(src_dir)
                os.close(dst_dir)
    finally:
        os.close(src_root)
        os.close(dst_root)
    return skipped + [f"{p}/ (deeper than {MAX_DEPTH} levels)" for p in too_deep]


def _copy_file_at(src_dir: int, dst_dir: int, name: str) -> None:
    src = os.open(name, _READ_FLAGS, dir_fd=src_dir)
    try:
        if not stat.S_ISREG(os.fstat(src).st_mode):
            raise Refused(errno.EINVAL, f"{name}: not a regular file")
        dst = os.open(name, _CREATE_FLAGS, 0o644, dir_fd=dst_dir)
        try:
            while True:
                chunk = os.read(src, 1 << 20)
                if not chunk:
                    break
                view = memoryview(chunk)
                while view:
                    view = view[os.write(dst, view):]
        finally:
            os.close(dst)
    finally:
        os.close(src)


# ----------------------------------------------------------------------------- text


def printable(text: object, cap: Optional[int] = None) -> str:
    """``text`` safe to show and to store: lone surrogates replaced, control characters but
    newline and tab escaped, at most ``cap`` characters (with a note of what was cut)."""
    if not isinstance(text, str):
        text = repr(text)
    text = text.encode("utf-8", "replace").decode("utf-8")
    if cap is not None and len(text) > cap:
        text = text[:cap] + f"\n[... {len(text) - cap} more characters not shown]"
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() or ch in "\n\t" else _escape(ch) for ch in text)


def printable_name(name: str) -> str:
    """A file name on one line: every non-printable character (newline included) escaped."""
    name = name.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
    if name.isprintable():
        return name
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in name)


def _escape(ch: str) -> str:
    code = ord(ch)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def bounded_text(text: object, cap: int) -> dict:
    """A reply or output for the transcript: the printable prefix (``cap`` characters), and
    when cut, the whole text's length and SHA-256."""
    raw = text if isinstance(text, str) else repr(text)
    encoded = raw.encode("utf-8", "surrogatepass")
    out = {"text": printable(raw[:cap])}
    if len(raw) > cap:
        out.update(truncated=True, chars=len(raw), sha256=hashlib.sha256(encoded).hexdigest())
    return out


def clean_code(text: str) -> str:
    """Program text that can be written as UTF-8 (lone surrogates become U+FFFD)."""
    return text.encode("utf-8", "replace").decode("utf-8")
