"""A tiny ``bpf(2)`` wrapper (ctypes): open pinned maps and read/update/delete/iterate their elements.

Only what the datapath needs. Keys and values are raw ``bytes`` laid out as in ``bpf/paccp.bpf.c``
(see :mod:`paccp.datapath.paccp.maps`). Errors are raised as :class:`OSError` with the kernel's errno.
"""

from __future__ import annotations

import ctypes
import os
import platform
from collections.abc import Iterator

_SYS_BPF = {"x86_64": 321, "aarch64": 280}.get(platform.machine(), 321)
_SYS_PIDFD_OPEN = 434
_SYS_PIDFD_GETFD = 438

BPF_MAP_LOOKUP_ELEM = 1
BPF_MAP_UPDATE_ELEM = 2
BPF_MAP_DELETE_ELEM = 3
BPF_MAP_GET_NEXT_KEY = 4
BPF_OBJ_GET = 7

BPF_ANY = 0
BPF_NOEXIST = 1
BPF_EXIST = 2

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _bpf(cmd: int, attr: ctypes.Array[ctypes.c_char]) -> int:
    ret = int(_libc.syscall(_SYS_BPF, cmd, attr, len(attr)))
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return ret


def obj_get(path: str, read_only: bool = False) -> int:
    """Open a pinned BPF object; return a new file descriptor (close it with ``os.close``)."""
    p = ctypes.create_string_buffer(path.encode())
    attr = ctypes.create_string_buffer(128)
    ctypes.c_uint64.from_buffer(attr, 0).value = ctypes.addressof(p)
    ctypes.c_uint32.from_buffer(attr, 12).value = 1 if read_only else 0  # BPF_F_RDONLY
    try:
        return _bpf(BPF_OBJ_GET, attr)
    except OSError as exc:
        raise OSError(exc.errno, f"{path}: {exc.strerror}") from None


def _elem_attr(fd: int, key: bytes, val: ctypes.Array[ctypes.c_char] | None, flags: int = 0) -> tuple:
    kbuf = ctypes.create_string_buffer(key, len(key))
    attr = ctypes.create_string_buffer(128)
    ctypes.c_uint32.from_buffer(attr, 0).value = fd
    ctypes.c_uint64.from_buffer(attr, 8).value = ctypes.addressof(kbuf)
    if val is not None:
        ctypes.c_uint64.from_buffer(attr, 16).value = ctypes.addressof(val)
    ctypes.c_uint64.from_buffer(attr, 24).value = flags
    return attr, kbuf


def lookup(fd: int, key: bytes, value_size: int) -> bytes | None:
    """Return the value for ``key`` or None when absent."""
    val = ctypes.create_string_buffer(value_size)
    attr, _k = _elem_attr(fd, key, val)
    try:
        _bpf(BPF_MAP_LOOKUP_ELEM, attr)
    except OSError as exc:
        if exc.errno == 2:
            return None
        raise
    return val.raw


def update(fd: int, key: bytes, value: bytes, flags: int = BPF_ANY) -> None:
    """Create or replace one element."""
    val = ctypes.create_string_buffer(value, len(value))
    attr, _k = _elem_attr(fd, key, val, flags)
    _bpf(BPF_MAP_UPDATE_ELEM, attr)


def delete(fd: int, key: bytes) -> bool:
    """Delete one element; return False when it did not exist."""
    attr, _k = _elem_attr(fd, key, None)
    try:
        _bpf(BPF_MAP_DELETE_ELEM, attr)
    except OSError as exc:
        if exc.errno == 2:
            return False
        raise
    return True


def keys(fd: int, key_size: int) -> Iterator[bytes]:
    """Iterate over the keys of a hash/array map (not valid for sk_storage maps)."""
    cur: bytes | None = None
    while True:
        nxt = ctypes.create_string_buffer(key_size)
        kbuf = ctypes.create_string_buffer(cur, key_size) if cur is not None else None
        attr = ctypes.create_string_buffer(128)
        ctypes.c_uint32.from_buffer(attr, 0).value = fd
        if kbuf is not None:
            ctypes.c_uint64.from_buffer(attr, 8).value = ctypes.addressof(kbuf)
        ctypes.c_uint64.from_buffer(attr, 16).value = ctypes.addressof(nxt)
        try:
            _bpf(BPF_MAP_GET_NEXT_KEY, attr)
        except OSError as exc:
            if exc.errno == 2:
                return
            raise
        cur = nxt.raw
        yield cur


def items(fd: int, key_size: int, value_size: int) -> Iterator[tuple[bytes, bytes]]:
    """Iterate over (key, value) pairs, skipping elements deleted meanwhile."""
    for k in list(keys(fd, key_size)):
        v = lookup(fd, k, value_size)
        if v is not None:
            yield k, v


def pidfd_getfd(pid: int, target_fd: int) -> int:
    """Duplicate file descriptor ``target_fd`` of process ``pid`` into this process (needs ptrace rights)."""
    pidfd = int(_libc.syscall(_SYS_PIDFD_OPEN, pid, 0))
    if pidfd < 0:
        err = ctypes.get_errno()
        raise OSError(err, f"pidfd_open({pid}): {os.strerror(err)}")
    try:
        fd = int(_libc.syscall(_SYS_PIDFD_GETFD, pidfd, target_fd, 0))
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"pidfd_getfd({pid}, {target_fd}): {os.strerror(err)}")
        return fd
    finally:
        os.close(pidfd)
