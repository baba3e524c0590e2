"""Where a build writes and reads: the checks of a location URL (``out=``, ``seeds=``), made
before any compute.  A URL's protocol must be one fsspec knows with its filesystem package
installed (this project's extra named where there is one); an output location must be
writable (not an archive or HTTP), outlive the command (not ``memory://``, which the Python
API keeps), be a folder that can be created and written, or, remote, a filesystem that
connects and answers within ``REMOTE_TIMEOUT`` seconds.

The config's validation (``pipeline.config``, a seed file's URL) and the machine checks
(``pipeline.preflight``) both use these; each problem is a
:class:`pipeline.config_schema.ConfigError`: one line naming the field, the value and what
is valid.
"""
from __future__ import annotations

import os

from .config_schema import ConfigError

REMOTE_TIMEOUT = 30.0  #: seconds to wait for a remote ``out=`` filesystem to connect and answer one query

#: fsspec protocols whose filesystem package is one of this project's extras
EXTRAS = {"s3": "s3", "s3a": "s3", "gs": "gcs", "gcs": "gcs"}
#: fsspec protocols that only read (archives, HTTP, Git hosts, reference sets): never an output location
READ_ONLY = ("http", "https", "github", "gist", "git", "dvc", "tar", "zip", "libarchive", "reference", "data")


def filesystem_class(url: str, field: str = "out"):
    """The fsspec filesystem class for ``url``, or a one-line error naming what
    to install (this project's extra where there is one)."""
    import fsspec
    from fsspec.core import split_protocol
    from fsspec.registry import known_implementations

    protocol = split_protocol(url)[0] or "file"
    try:
        return fsspec.get_filesystem_class(protocol)
    except ValueError:
        raise ConfigError(f"{field}: unknown protocol {protocol!r} in {url!r}; valid: a local path or an fsspec URL "
                          "(file://, s3:// with [s3], gs:// with [gcs], ...)") from None
    except ImportError as exc:
        extra = EXTRAS.get(protocol)
        how = (f"pip install 'drugtargetworld[{extra}]'" if extra
               else " ".join(str(known_implementations.get(protocol, {}).get("err", exc)).split()))
        raise ConfigError(f"{field}: {url!r} needs the filesystem package for {protocol}://, which is not installed; valid: {how}") from None


def local_path(url: str) -> str:
    from fsspec.implementations.local import LocalFileSystem

    return os.path.abspath(LocalFileSystem._strip_protocol(url))


def protocols_of(cls) -> tuple:
    return tuple(cls.protocol) if isinstance(cls.protocol, (tuple, list)) else (cls.protocol,)


def check_out_url(url: str, field: str = "out"):
    """The filesystem class of an output URL: a protocol fsspec knows, with its package
    installed, that can write (not an archive or HTTP); returns the class."""
    from fsspec.core import split_protocol

    protocol = split_protocol(url)[0] or "file"
    if protocol in READ_ONLY:
        raise ConfigError(f"{field}: {url!r} is on a read-only filesystem ({protocol}://); valid: a local folder or a "
                          "writable fsspec URL such as ./worlds, file://..., s3://bucket/worlds")
    return filesystem_class(url, field=field)


def check_out(url: str, world_id: str, cluster_kind: str = "local") -> None:
    cls = check_out_url(url)
    protocols = protocols_of(cls)
    if "memory" in protocols and cluster_kind == "address":
        raise ConfigError(f"out: {url!r} lives inside this process; valid: with cluster=address, a filesystem the workers share")
    if "memory" in protocols:
        return
    if not {"file", "local"} & set(protocols):
        check_remote(url)
        return
    root = local_path(url)
    world_dir = os.path.join(root, world_id)
    for path in (root, world_dir):
        if os.path.exists(path) and not os.path.isdir(path):
            raise ConfigError(f"out: {path} is a file; valid: a folder (created when missing)")
    existing = world_dir if os.path.isdir(world_dir) else root
    while not os.path.exists(existing):
        parent = os.path.dirname(existing)
        if parent == existing:
            break
        existing = parent
    if not os.path.isdir(existing):
        raise ConfigError(f"out: {root} cannot be created because {existing} is a file; valid: a folder path")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"out: {root} is not writable (no write permission on {existing}); valid: a folder you can write")


def check_remote(url: str, field: str = "out", timeout: float = REMOTE_TIMEOUT) -> None:
    """A remote output location answers: its filesystem connects (an FTP or SSH server, an
    object store's client with its credentials) and says whether the location exists,
    within ``timeout`` seconds; nothing is written.  What the store then allows (writing
    into the bucket) is the store's to say, as the build writes."""
    import threading

    import fsspec

    outcome: dict = {}

    def probe() -> None:
        try:
            fs, root = fsspec.core.url_to_fs(url)
            fs.exists(root)
            outcome["ok"] = True
        except BaseException as exc:  # noqa: BLE001 - any failure of a third-party client is the same answer
            outcome["error"] = exc

    thread = threading.Thread(target=probe, name="preflight-out", daemon=True)
    thread.start()
    thread.join(timeout)
    if "error" in outcome:
        exc = outcome["error"]
        reason = " ".join(str(exc).split())[:200] or "no message"
        raise ConfigError(f"{field}: {url!r} cannot be reached ({type(exc).__name__}: {reason}); valid: a local folder, or an "
                          "fsspec URL whose server answers (with its credentials set, for an object store)")
    if "ok" not in outcome:
        raise ConfigError(f"{field}: {url!r} did not answer within {timeout:g} s; valid: a local folder, or an fsspec URL "
                          "whose server answers")


def check_outlives_process(url: str, field: str = "out") -> None:
    """A command's output must outlive it: ``memory://`` is fsspec's in-process
    filesystem, so a world built there from the command line would vanish when the
    command exits.  (The Python API accepts it: ``pipeline.config.load`` and
    ``pipeline.build.build`` in one process, as the tests use it.)"""
    if "memory" in protocols_of(filesystem_class(url, field=field)):
        raise ConfigError(f"{field}: {url!r} is an in-memory filesystem, which does not outlive this process: the world would "
                          "vanish when the build exits; valid: a local folder or a persistent fsspec URL such as ./worlds "
                          "or s3://bucket/worlds (memory:// is for the Python API, within one process)")
