"""A seccomp filter for agent programs, as classic BPF for bubblewrap's ``--seccomp FD``.

Agent code needs ordinary computing (files, threads, processes, pipes) and
nothing that administers a machine.  The filter refuses with EPERM the
system calls that change or inspect the host beyond the sandbox: mounting,
namespaces, module and kexec loading, keyrings, BPF and perf, ptrace and
cross-process memory access, clock and swap administration, io_uring,
handle-based opens, and ``clone`` with any namespace flag.  ``clone3`` answers
ENOSYS so that the C library falls back to ``clone``, whose flags a classic
filter can read.  A system call from another ABI (32-bit x86 on x86_64, x32)
kills the process: the numbers above would not mean the same calls there.

Only x86_64 and aarch64 have tables; elsewhere ``build_filter`` returns None
and the sandbox runs without a filter (and says so).
"""
from __future__ import annotations

import errno
import platform
import struct
from typing import Optional

# BPF instruction classes and fields
_LD_W_ABS = 0x20
_JEQ_K = 0x15
_JGE_K = 0x35
_JSET_K = 0x45
_RET_K = 0x06

_RET_KILL_PROCESS = 0x80000000
_RET_ERRNO = 0x00050000
_RET_ALLOW = 0x7FFF0000

# offsets in struct seccomp_data
_NR = 0
_ARCH = 4
_ARG0_LOW = 16  # little-endian: the low 32 bits of args[0]

_CLONE_NAMESPACES = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000 | 0x20000000 | 0x40000000

_REFUSED_NAMES = (
    "ptrace", "syslog", "acct", "settimeofday", "clock_settime", "clock_adjtime", "adjtimex",
    "mount", "umount2", "pivot_root", "chroot", "swapon", "swapoff", "reboot", "vhangup",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "quotactl", "lookup_dcookie", "add_key", "request_key", "keyctl", "unshare", "setns",
    "perf_event_open", "fanotify_init", "name_to_handle_at", "open_by_handle_at",
    "process_vm_readv", "process_vm_writev", "kcmp", "bpf", "userfaultfd",
    "open_tree", "move_mount", "fsopen", "fsconfig", "fsmount", "fspick",
    "io_uring_setup", "io_uring_enter", "io_uring_register", "iopl", "ioperm",
)

_TABLES = {
    # arch: (AUDIT_ARCH value, x32 bit or None, {name: number}, clone, clone3)
    "x86_64": (0xC000003E, 0x40000000, {
        "ptrace": 101, "syslog": 103, "acct": 163, "settimeofday": 164, "clock_settime": 227,
        "clock_adjtime": 305, "adjtimex": 159, "mount": 165, "umount2": 166, "pivot_root": 155,
        "chroot": 161, "swapon": 167, "swapoff": 168, "reboot": 169, "vhangup": 153,
        "init_module": 175, "finit_module": 313, "delete_module": 176, "kexec_load": 246,
        "kexec_file_load": 320, "quotactl": 179, "lookup_dcookie": 212, "add_key": 248,
        "request_key": 249, "keyctl": 250, "unshare": 272, "setns": 308, "perf_event_open": 298,
        "fanotify_init": 300, "name_to_handle_at": 303, "open_by_handle_at": 304,
        "process_vm_readv": 310, "process_vm_writev": 311, "kcmp": 312, "bpf": 321,
        "userfaultfd": 323, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427, "iopl": 172, "ioperm": 173,
    }, 56, 435),
    "aarch64": (0xC00000B7, None, {
        "ptrace": 117, "syslog": 116, "acct": 89, "settimeofday": 170, "clock_settime": 112,
        "clock_adjtime": 266, "adjtimex": 171, "mount": 40, "umount2": 39, "pivot_root": 41,
        "chroot": 51, "swapon": 224, "swapoff": 225, "reboot": 142, "vhangup": 58,
        "init_module": 105, "finit_module": 273, "delete_module": 106, "kexec_load": 104,
        "kexec_file_load": 294, "quotactl": 60, "lookup_dcookie": 18, "add_key": 217,
        "request_key": 218, "keyctl": 219, "unshare": 97, "setns": 268, "perf_event_open": 241,
        "fanotify_init": 262, "name_to_handle_at": 264, "open_by_handle_at": 265,
        "process_vm_readv": 270, "process_vm_writev": 271, "kcmp": 272, "bpf": 280,
        "userfaultfd": 282, "open_tree": 428, "move_mount": 429, "fsopen": 430, "fsconfig": 431,
        "fsmount": 432, "fspick": 433, "io_uring_setup": 425, "io_uring_enter": 426,
        "io_uring_register": 427,
    }, 220, 435),
}


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


def build_filter(machine: Optional[str] = None) -> Optional[bytes]:
    """The filter program (struct sock_filter[]) for this machine, or None without a table."""
    machine = machine or platform.machine()
    machine = {"amd64": "x86_64", "arm64": "aarch64"}.get(machine, machine)
    if machine not in _TABLES:
        return None
    audit_arch, x32_bit, numbers, clone_nr, clone3_nr = _TABLES[machine]
    refused = [numbers[name] for name in _REFUSED_NAMES if name in numbers]

    # Layout (indices): the refusals jump forward to a shared ERRNO(EPERM) return.
    prog: list[tuple] = []
    prog.append(("ld", _ARCH))
    prog.append(("jeq", audit_arch, 1, 0))
    prog.append(("ret", _RET_KILL_PROCESS))
    prog.append(("ld", _NR))
    if x32_bit is not None:
        prog.append(("jge", x32_bit, 0, 1))
        prog.append(("ret", _RET_KILL_PROCESS))
    prog.append(("jeq", clone3_nr, 0, 1))
    prog.append(("ret", _RET_ERRNO | errno.ENOSYS))
    prog.append(("jeq", clone_nr, 0, 3))
    prog.append(("ld", _ARG0_LOW))
    prog.append(("jset", _CLONE_NAMESPACES, "EPERM", 0))
    prog.append(("ret", _RET_ALLOW))
    for nr in refused:
        prog.append(("jeq", nr, "EPERM", 0))
    prog.append(("ret", _RET_ALLOW))
    eperm_at = len(prog)
    prog.append(("ret", _RET_ERRNO | errno.EPERM))

    out = bytearray()
    for i, item in enumerate(prog):
        op = item[0]
        if op == "ld":
            out += _insn(_LD_W_ABS, 0, 0, item[1])
        elif op == "ret":
            out += _insn(_RET_K, 0, 0, item[1])
        else:
            code = {"jeq": _JEQ_K, "jge": _JGE_K, "jset": _JSET_K}[op]
            jt, jf = (eperm_at - i - 1 if j == "EPERM" else j for j in item[2:4])
            if not (0 <= jt <= 255 and 0 <= jf <= 255):
                raise ValueError("seccomp filter: jump out of range")
            out += _insn(code, jt, jf, item[1])
    return bytes(out)
