"""cgroup v2 for the datapath: the one path resolver, program attachment (``bpftool cgroup``) and the
registry that keeps a removed VM's name and tenant for its usage records."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from paccp.datapath.core import env
from paccp.errors import UserError


def _same_type(bpftool_type: str, attach_type: str) -> bool:
    return bpftool_type in (attach_type, f"cgroup_{attach_type}")


def attached_cgroups(progs: tuple[tuple[str, str], ...]) -> list[tuple[str, str, str]]:
    """(cgroup path, attach type, program name) of every attachment of ``progs`` (``bpftool cgroup tree``)."""
    root = env.cgroup2_root()
    res = subprocess.run(["bpftool", "-j", "cgroup", "tree", str(root)], capture_output=True, text=True)
    if res.returncode != 0 or not res.stdout.strip():
        return []
    out: set[tuple[str, str, str]] = set()
    for entry in json.loads(res.stdout):
        for prog in entry.get("programs", []):
            for at, name in progs:
                if _same_type(prog.get("attach_type", ""), at) and prog.get("name") == name:
                    out.add((entry["cgroup"], at, name))
    return sorted(out)


def attach_cgroup_prog(path: Path, attach_type: str, pinned: Path) -> None:
    """Attach a pinned cgroup program (idempotent, multi-attach)."""
    res = subprocess.run(["bpftool", "-j", "cgroup", "show", str(path)], capture_output=True, text=True)
    if res.returncode == 0 and res.stdout.strip():
        for prog in json.loads(res.stdout):
            if _same_type(prog.get("attach_type", ""), attach_type) and prog.get("name") == pinned.name[:15]:
                return
    env.run(
        ["bpftool", "cgroup", "attach", str(path), attach_type, "pinned", str(pinned), "multi"],
        f"attaching {pinned.name} to {path}",
    )


def detach_cgroup_prog(path: Path | str, attach_type: str, pinned: Path) -> None:
    subprocess.run(
        ["bpftool", "cgroup", "detach", str(path), attach_type, "pinned", str(pinned)], capture_output=True
    )


@dataclass(frozen=True)
class CgroupRef:
    """A cgroup v2 directory: absolute path, path relative to the v2 root, and id (inode)."""

    path: Path
    rel: str
    cgid: int


def cgroup_path_in(path: str, root: Path, *, host_wide: bool = False, option: str = "--cgroup") -> Path:
    """The one cgroup-path resolver: ``path`` (absolute under ``root``, or relative to it) as a directory
    inside the cgroup v2 mount ``root``.

    Pure (reads the file system only): no ``..`` component, no NUL or control character, and after
    resolving symbolic links the directory must still be inside ``root``; ``root`` itself (the whole host)
    only with ``host_wide``. Errors are one line naming ``option``.
    """
    if not path:
        raise UserError(f"{option} is required")
    shown = repr(path) if len(path) <= 80 else repr(path[:80]) + "..."
    if any(ord(c) < 32 or c == "\x7f" for c in path) or len(path) > 4096:
        raise UserError(f"{option} {shown}: not a cgroup path (control characters or too long)")
    if ".." in Path(path).parts:
        raise UserError(f"{option} {shown}: '..' is not allowed (the cgroup must be inside {root})")
    root_r = root.resolve()
    p = Path(path)
    if p.is_absolute() and (p in (root, root_r) or root in p.parents or root_r in p.parents):
        cand = p
    else:
        cand = root / str(path).lstrip("/")
    try:
        real = cand.resolve(strict=True)
    except (OSError, RuntimeError):
        raise UserError(f"{option} {shown}: no such cgroup v2 directory (cgroup v2 root is {root})") from None
    if real != root_r and root_r not in real.parents:
        raise UserError(f"{option} {shown}: resolves outside the cgroup v2 tree {root}")
    if not real.is_dir() or not (real / "cgroup.procs").exists():
        raise UserError(f"{option} {shown}: no such cgroup v2 directory (cgroup v2 root is {root})")
    if real == root_r and not host_wide:
        raise UserError(
            f"{option} {shown}: is the cgroup v2 root, i.e. every process on the host; "
            "give --host-wide to mean that"
        )
    return real


def resolve_cgroup(path: str, *, host_wide: bool = False, option: str = "--cgroup") -> CgroupRef:
    """A cgroup given as an absolute path or relative to the cgroup v2 root (:func:`cgroup_path_in`)."""
    if not path:
        raise UserError(f"{option} is required")
    root = env.cgroup2_root()
    cand = cgroup_path_in(path, root, host_wide=host_wide, option=option)
    rel = "/" + str(cand.relative_to(root.resolve())).strip(".").strip("/")
    return CgroupRef(cand, rel, os.stat(cand).st_ino)


NAMES_FILE = Path(os.environ.get("PACCP_STATE_DIR", "/run/paccp")) / "vm-names.json"


@dataclass(frozen=True)
class Known:
    """What is remembered of a VM or rule owner (kept after its cgroup is gone, for usage records)."""

    path: str
    tenant: str | None = None


def remember(cg: CgroupRef, tenant: str | None) -> None:
    """Keep cgroup id -> path (and tenant) after the cgroup is gone, so usage records name the VM stably."""
    known = known_cgroups()
    old = known.get(cg.cgid)
    known[cg.cgid] = Known(cg.rel, tenant or (old.tenant if old else None))
    NAMES_FILE.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    tmp = NAMES_FILE.with_suffix(".tmp")
    tmp.write_text(json.dumps({str(k): {"path": v.path, "tenant": v.tenant} for k, v in known.items()}))
    tmp.replace(NAMES_FILE)


def known_cgroups() -> dict[int, Known]:
    """The registry of VMs and rule owners (older files held a bare path per id)."""
    try:
        raw = json.loads(NAMES_FILE.read_text())
    except (OSError, ValueError):
        return {}
    out: dict[int, Known] = {}
    for k, v in raw.items():
        if isinstance(v, dict):
            out[int(k)] = Known(str(v.get("path")), v.get("tenant"))
        else:
            out[int(k)] = Known(str(v))
    return out


def live_cgroups() -> dict[int, str]:
    """Map cgroup id -> path relative to the v2 root, for the cgroups that exist now (walks the tree)."""
    root = env.cgroup2_root()
    out = {os.stat(root).st_ino: "/"}
    for dirpath, _dirs, _files in os.walk(root):
        try:
            out[os.stat(dirpath).st_ino] = "/" + str(Path(dirpath).relative_to(root)).strip(".").strip("/")
        except OSError:
            continue
    return out


def cgroup_paths() -> dict[int, str]:
    """Map cgroup id -> path: existing cgroups, plus remembered names of removed VMs and owners."""
    out = {k: v.path for k, v in known_cgroups().items()}
    out.update(live_cgroups())
    return out
