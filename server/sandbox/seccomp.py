"""The sandbox's seccomp filter: system calls a compile job never needs, refused with EPERM.

In: nothing but the host's libseccomp (the `libseccomp2` Debian package, through ctypes:
the library's own compiler from rules to a BPF program, for the running architecture).
Out: the compiled BPF program as bytes, which bubblewrap loads with `--seccomp FD` just
before it starts the worker, so the rules hold for the worker and everything it starts.

Refused: new namespaces (`unshare`, `setns`, and `clone` with a namespace flag; `clone3`
answers ENOSYS so the C library falls back to `clone`, whose flags the filter can read),
mounting (`mount`, the new mount API, `pivot_root`, `chroot`), tracing other processes
(`ptrace`, `process_vm_*`), the kernel keyring, `bpf`, `perf_event_open`, `userfaultfd`,
`io_uring`, module loading, `kexec`, `reboot`, swap, `acct`, `quotactl`, and
file-handle opens (`open_by_handle_at` can walk out of a bind mount).

Sockets: only the families in `SOCKET_FAMILIES` may be opened (`socket`, `socketpair`).
The network namespace isolates IP and netlink, but not AF_VSOCK: a snippet would share the
VM host's vsock port space. Every other family (vsock, packet, bluetooth, alg, ...)
answers EPERM.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import tempfile

DENIED = (
    "unshare", "setns", "mount", "umount", "umount2", "pivot_root", "chroot",
    "fsopen", "fsconfig", "fsmount", "fspick", "move_mount", "open_tree", "mount_setattr",
    "ptrace", "process_vm_readv", "process_vm_writev",
    "keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd",
    "io_uring_setup", "io_uring_enter", "io_uring_register",
    "init_module", "finit_module", "delete_module", "kexec_load", "kexec_file_load",
    "reboot", "swapon", "swapoff", "acct", "quotactl", "open_by_handle_at",
    "name_to_handle_at", "lookup_dcookie", "syslog", "uselib", "iopl", "ioperm",
)
NAMESPACE_FLAGS = (
    0x00020000,  # CLONE_NEWNS
    0x02000000,  # CLONE_NEWCGROUP
    0x04000000,  # CLONE_NEWUTS
    0x08000000,  # CLONE_NEWIPC
    0x10000000,  # CLONE_NEWUSER
    0x20000000,  # CLONE_NEWPID
    0x40000000,  # CLONE_NEWNET
    0x00000080,  # CLONE_NEWTIME
)
SCMP_ACT_ALLOW = 0x7FFF0000
SCMP_CMP_GE = 5
SCMP_CMP_MASKED_EQ = 7
AF_MAX = 64  # above every family Linux defines (46 in 6.x)
# AF_UNIX (1), AF_INET (2), AF_INET6 (10): loopback only, in the job's own network
# namespace; AF_NETLINK (16): the C library asks it for interfaces, namespaced too.
SOCKET_FAMILIES = frozenset({1, 2, 10, 16})


def _errno_action(code: int) -> int:
    return 0x00050000 | (code & 0xFFFF)  # SCMP_ACT_ERRNO(code)


class _ArgCmp(ctypes.Structure):
    _fields_ = [
        ("arg", ctypes.c_uint),
        ("op", ctypes.c_int),
        ("datum_a", ctypes.c_uint64),
        ("datum_b", ctypes.c_uint64),
    ]


def _library() -> ctypes.CDLL:
    name = ctypes.util.find_library("seccomp") or "libseccomp.so.2"
    lib = ctypes.CDLL(name, use_errno=True)
    lib.seccomp_init.restype = ctypes.c_void_p
    lib.seccomp_init.argtypes = [ctypes.c_uint32]
    lib.seccomp_release.argtypes = [ctypes.c_void_p]
    lib.seccomp_syscall_resolve_name.argtypes = [ctypes.c_char_p]
    lib.seccomp_rule_add_array.argtypes = [
        ctypes.c_void_p, ctypes.c_uint32, ctypes.c_int, ctypes.c_uint, ctypes.POINTER(_ArgCmp)
    ]
    lib.seccomp_export_bpf.argtypes = [ctypes.c_void_p, ctypes.c_int]
    return lib


def build_filter() -> bytes:
    """The BPF program for bubblewrap's --seccomp; OSError when libseccomp is unusable."""
    lib = _library()
    ctx = lib.seccomp_init(SCMP_ACT_ALLOW)
    if not ctx:
        raise OSError("seccomp_init failed")
    try:
        deny = _errno_action(errno.EPERM)

        def rule(action: int, name: str, *cmps: _ArgCmp) -> None:
            nr = lib.seccomp_syscall_resolve_name(name.encode())
            if nr < 0:  # not a system call on this architecture
                return
            array = (_ArgCmp * max(1, len(cmps)))(*cmps)
            rc = lib.seccomp_rule_add_array(ctx, action, nr, len(cmps), array)
            if rc < 0:
                raise OSError(-rc, f"seccomp rule for {name}: {os.strerror(-rc)}")

        for name in DENIED:
            rule(deny, name)
        for flag in NAMESPACE_FLAGS:
            rule(deny, "clone", _ArgCmp(0, SCMP_CMP_MASKED_EQ, flag, flag))
        rule(_errno_action(errno.ENOSYS), "clone3")
        for call in ("socket", "socketpair"):
            for family in range(AF_MAX):
                if family not in SOCKET_FAMILIES:
                    rule(deny, call, _ArgCmp(0, SCMP_CMP_MASKED_EQ, 0xFFFFFFFF, family))
            rule(deny, call, _ArgCmp(0, SCMP_CMP_GE, AF_MAX, 0))
        with tempfile.TemporaryFile() as out:
            rc = lib.seccomp_export_bpf(ctx, out.fileno())
            if rc < 0:
                raise OSError(-rc, f"seccomp_export_bpf: {os.strerror(-rc)}")
            out.seek(0)
            return out.read()
    finally:
        lib.seccomp_release(ctx)


def filter_fd(program: bytes) -> int:
    """A pipe's read end holding `program` (for --seccomp FD); the caller closes it."""
    read, write = os.pipe()
    try:
        os.write(write, program)  # a few hundred bytes: far below the pipe's buffer
    finally:
        os.close(write)
    return read
