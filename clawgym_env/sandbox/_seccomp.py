"""Seccomp rules for sealed (grading) sandboxes: no process may reach into another.

A grader often runs the agent's code as a child, under the same uid. Without these rules that
code could ``ptrace`` the grader (or copy its descriptors with ``pidfd_getfd``, or write its
memory with ``process_vm_writev``) and print a verdict in its name. Refusing this family of
syscalls closes the door whatever uid things run as; no grader needs them.

``bpf_program()`` is a classic BPF filter for ``bwrap --seccomp FD`` (x86_64 and aarch64;
x32 and any other ABI are refused outright); ``docker_profile()`` is the same rule set as a
docker seccomp profile (JSON), layered as an allow-list exception on "allow everything else".
"""

from __future__ import annotations

import errno
import functools
import json
import platform
import struct

__all__ = ["DENIED", "bpf_program", "docker_profile"]

DENIED = ("ptrace", "process_vm_readv", "process_vm_writev", "pidfd_getfd", "kcmp", "userfaultfd",
          "perf_event_open", "bpf", "keyctl", "add_key", "request_key", "open_by_handle_at")  # fmt: skip
"""Syscalls a sealed sandbox refuses with EPERM."""

_NR = {
    "x86_64": {"ptrace": 101, "process_vm_readv": 310, "process_vm_writev": 311, "pidfd_getfd": 438, "kcmp": 312,
               "userfaultfd": 323, "perf_event_open": 298, "bpf": 321, "keyctl": 250, "add_key": 248,
               "request_key": 249, "open_by_handle_at": 304},
    "aarch64": {"ptrace": 117, "process_vm_readv": 270, "process_vm_writev": 271, "pidfd_getfd": 438, "kcmp": 272,
                "userfaultfd": 282, "perf_event_open": 241, "bpf": 280, "keyctl": 219, "add_key": 217,
                "request_key": 218, "open_by_handle_at": 265},
}  # fmt: skip
_AUDIT_ARCH = {"x86_64": 0xC000003E, "aarch64": 0xC00000B7}
_X32_BIT = 0x40000000
# classic BPF opcodes
_LD_W_ABS, _JEQ_K, _JGE_K, _RET_K = 0x20, 0x15, 0x35, 0x06
_ALLOW, _KILL = 0x7FFF0000, 0x80000000
_ERRNO = 0x00050000 | errno.EPERM


def _insn(code: int, jt: int, jf: int, k: int) -> bytes:
    return struct.pack("=HBBI", code, jt, jf, k)


@functools.cache
def bpf_program(machine: str | None = None) -> bytes:
    """The filter as raw ``struct sock_filter`` records; b"" on an architecture we have no table for."""
    arch = machine or platform.machine()
    if arch not in _NR:
        return b""
    nrs = [_NR[arch][name] for name in DENIED]
    prog = [
        _insn(_LD_W_ABS, 0, 0, 4),  # seccomp_data.arch
        _insn(_JEQ_K, 1, 0, _AUDIT_ARCH[arch]),
        _insn(_RET_K, 0, 0, _KILL),  # another ABI (e.g. i386 on x86_64): kill
        _insn(_LD_W_ABS, 0, 0, 0),  # seccomp_data.nr
    ]
    if arch == "x86_64":
        prog.append(_insn(_JGE_K, len(nrs) + 1, 0, _X32_BIT))  # x32 syscalls -> errno
    for i, nr in enumerate(nrs):
        prog.append(_insn(_JEQ_K, len(nrs) - i, 0, nr))
    prog += [_insn(_RET_K, 0, 0, _ALLOW), _insn(_RET_K, 0, 0, _ERRNO)]
    return b"".join(prog)


@functools.cache
def docker_profile() -> str:
    """A docker seccomp profile (JSON text for ``security_opt=["seccomp=..."]``) refusing ``DENIED``
    plus namespace creation (``unshare``, ``setns``, ``clone`` with CLONE_NEWUSER) and mounts."""
    clone_newuser = 0x10000000
    rules = [
        {"names": [*DENIED, "unshare", "setns", "mount", "umount2", "pivot_root"],
         "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM},
        # clone3 cannot be filtered by flags: ENOSYS makes libc fall back to clone, which is
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.ENOSYS},
        {"names": ["clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": errno.EPERM,
         "args": [{"index": 0, "value": clone_newuser, "valueTwo": clone_newuser, "op": "SCMP_CMP_MASKED_EQ"}]},
    ]  # fmt: skip
    return json.dumps({"defaultAction": "SCMP_ACT_ALLOW", "syscalls": rules})
