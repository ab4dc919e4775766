"""The syscall filter of a sandboxed run: a classic BPF program bubblewrap installs (`--seccomp`)
just before it starts the run's first process, inherited by every process of the run and never
lifted (the kernel refuses to remove a filter; `no_new_privs` is set with it).

A deny-list, as container runtimes' default profiles are: a run may do what a program on the
machine does (threads, processes, files, pipes, its own loopback), and is refused, with EPERM, what
only serves to reach the kernel's less-trodden code or the host:

- new namespaces of any kind (`unshare`, `setns`, `clone` with a namespace flag): no nested user
  namespace, whose capabilities open the kernel's mount, network and netfilter code to the run;
  `clone3` answers ENOSYS (its flags sit in memory a filter cannot read), so the C library falls
  back to `clone`, whose flags it can;
- mounts and the new mount API, `pivot_root`, `chroot`;
- keyrings, `bpf`, `perf_event_open`, `userfaultfd`, `io_uring`, `open_by_handle_at`;
- modules, `kexec`, `reboot`, swap, process accounting, quotas, the clock, the kernel's log,
  port I/O.

A syscall of another ABI than the worker's (x32, or a 32-bit call on x86-64) ends the process: the
numbers below are the worker's ABI's. Kept as numbers (x86-64 and aarch64, from the kernel's
headers) so that no library is needed to build it.
"""

from __future__ import annotations

import os
import platform
import struct

# name: (x86-64, aarch64); None where the architecture has no such call
DENIED = {
    "unshare": (272, 97),
    "setns": (308, 268),
    "mount": (165, 40),
    "umount2": (166, 39),
    "pivot_root": (155, 41),
    "chroot": (161, 51),
    "open_tree": (428, 428),
    "move_mount": (429, 429),
    "fsopen": (430, 430),
    "fsconfig": (431, 431),
    "fsmount": (432, 432),
    "fspick": (433, 433),
    "mount_setattr": (442, 442),
    "keyctl": (250, 219),
    "add_key": (248, 217),
    "request_key": (249, 218),
    "bpf": (321, 280),
    "perf_event_open": (298, 241),
    "userfaultfd": (323, 282),
    "io_uring_setup": (425, 425),
    "io_uring_enter": (426, 426),
    "io_uring_register": (427, 427),
    "open_by_handle_at": (304, 265),
    "kexec_load": (246, 104),
    "kexec_file_load": (320, 294),
    "init_module": (175, 105),
    "finit_module": (313, 273),
    "delete_module": (176, 106),
    "reboot": (169, 142),
    "swapon": (167, 224),
    "swapoff": (168, 225),
    "acct": (163, 89),
    "quotactl": (179, 60),
    "syslog": (103, 116),
    "settimeofday": (164, 170),
    "clock_settime": (227, 112),
    "clock_adjtime": (305, 266),
    "adjtimex": (159, 171),
    "lookup_dcookie": (212, 18),
    "iopl": (172, None),
    "ioperm": (173, None),
}
CLONE = (56, 220)
CLONE3 = (435, 435)
# CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER | NEWPID | NEWNET
NAMESPACE_FLAGS = 0x00020000 | 0x02000000 | 0x04000000 | 0x08000000 | 0x10000000
NAMESPACE_FLAGS |= 0x20000000 | 0x40000000
X32_BIT = 0x40000000

ARCHES = {"x86_64": (0, 0xC000003E), "aarch64": (1, 0xC00000B7), "arm64": (1, 0xC00000B7)}

# classic BPF
LD_W_ABS, JEQ, JGE, JSET, RET = 0x20, 0x15, 0x35, 0x45, 0x06
ALLOW, KILL_PROCESS = 0x7FFF0000, 0x80000000
EPERM, ENOSYS = 1, 38


def _errno(e: int) -> int:
    return 0x00050000 | e  # SECCOMP_RET_ERRNO


def supported() -> bool:
    return platform.machine() in ARCHES


def program() -> bytes:
    """The filter for this machine's architecture, as bubblewrap's `--seccomp` reads it (struct
    sock_filter, native byte order). Raises RuntimeError on an architecture it does not know."""
    arch = ARCHES.get(platform.machine())
    if arch is None:
        raise RuntimeError(f"no syscall filter for the architecture {platform.machine()}")
    col, audit = arch
    denied = sorted({nrs[col] for nrs in DENIED.values() if nrs[col] is not None})
    # instructions as (code, jump-if-true label, jump-if-false label, k); labels resolved below
    ins: list[tuple] = [
        (LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        (JEQ, 1, 0, audit),
        (RET, 0, 0, KILL_PROCESS),
        (LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if col == 0:  # x86-64: the x32 ABI's numbers carry this bit
        ins.append((JGE, "kill", 0, X32_BIT))
    for nr in denied:
        ins.append((JEQ, "deny", 0, nr))
    ins += [
        (JEQ, "clone", 0, CLONE[col]),
        (JEQ, "nosys", 0, CLONE3[col]),
        (RET, 0, 0, ALLOW),
    ]
    labels = {"clone": len(ins)}
    ins += [
        (LD_W_ABS, 0, 0, 16),  # the low 32 bits of args[0] (little-endian): clone's flags
        (JSET, "deny", 0, NAMESPACE_FLAGS),
        (RET, 0, 0, ALLOW),
    ]
    labels["deny"] = len(ins)
    ins.append((RET, 0, 0, _errno(EPERM)))
    labels["nosys"] = len(ins)
    ins.append((RET, 0, 0, _errno(ENOSYS)))
    labels["kill"] = len(ins)
    ins.append((RET, 0, 0, KILL_PROCESS))
    out = bytearray()
    for i, (code, jt, jf, k) in enumerate(ins):
        jt = labels[jt] - i - 1 if isinstance(jt, str) else jt
        jf = labels[jf] - i - 1 if isinstance(jf, str) else jf
        assert 0 <= jt < 256 and 0 <= jf < 256
        out += struct.pack("=HBBI", code, jt, jf, k)
    return bytes(out)


def program_fd() -> int:
    """A descriptor holding the program, at its start (a memory file: nothing on disk)."""
    fd = os.memfd_create("palimpsest-seccomp", 0)
    os.write(fd, program())
    os.lseek(fd, 0, os.SEEK_SET)
    return fd
