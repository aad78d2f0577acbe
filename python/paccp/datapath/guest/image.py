"""The guest's boot files: a Debian kernel and an initramfs built here (busybox + iperf3 + virtio modules).

The kernel is Debian's cloud kernel (``linux-image-cloud-amd64``, installed by
``tools/install-system-deps.sh``): ``/boot/vmlinuz-<ver>`` and its modules in ``/lib/modules/<ver>``. Its
virtio drivers are modules, so the initramfs carries ``virtio_pci`` and ``virtio_net`` with their
dependencies (from ``modules.dep``). The root file system is the initramfs itself: static busybox, the
host's ``iperf3`` with the shared libraries ``ldd`` lists, and ``/init``, which loads the modules and
serves a command channel on the second serial port (see :mod:`paccp.datapath.guest.vm`).

The archive is written by :func:`build` in the cpio ``newc`` format with fixed owners and times, so the
same inputs give the same bytes; it is cached under ``.cache/guest/<digest>/`` (gitignored), the digest
covering every input file and the init script. ``python -m paccp.datapath.guest.image`` (``make guest``)
builds it ahead of time.
"""

from __future__ import annotations

import gzip
import hashlib
import io
import lzma
import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from paccp.errors import EnvironmentUnsupported

CACHE_ENV = "PACCP_GUEST_DIR"
DEFAULT_CACHE = Path(".cache/guest")
KERNEL_ENV = "PACCP_GUEST_KERNEL"  # a vmlinuz to use instead of the newest /boot/vmlinuz-*-cloud-amd64
MODULES = ("virtio_pci", "virtio_net")
BUSYBOX = "/bin/busybox"
READY = "PACCP-GUEST-READY"

# /init: mounts, modules, then the command loop on ttyS1 (each request: "<id> <base64 script>";
# each answer: "@@B <id>", the output in base64, "@@E <id> <exit code>").
INIT = """#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin:/sbin:/usr/bin:/usr/sbin
export LD_LIBRARY_PATH=/lib/x86_64-linux-gnu:/usr/lib/x86_64-linux-gnu
mkdir -p /proc /sys /dev /tmp /run
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
for m in $(cat /lib/paccp-modules); do insmod /lib/paccp-mod/$m.ko || echo "insmod $m failed"; done
ip link set lo up
stty -F /dev/ttyS1 raw -echo -onlcr
# The command loop is PID 1's child, not PID 1: a background job outlives the command that started it
# and is re-parented to PID 1, whose shell catches SIGCHLD. In the loop's `read` that signal made ash
# restart the read and drop the bytes of the request it had read so far.
/bin/sh /agent.sh </dev/ttyS1 >/dev/ttyS1 2>&1 &
agent=$!
while kill -0 $agent 2>/dev/null; do wait $agent; done
poweroff -f
"""

AGENT = f"""echo {READY}
while read -r id b64; do
  [ -n "$id" ] || continue
  echo "$b64" | base64 -d > /tmp/c.$id
  sh /tmp/c.$id > /tmp/o.$id 2>&1 </dev/null
  rc=$?
  echo "@@B $id"
  base64 /tmp/o.$id
  echo "@@E $id $rc"
  rm -f /tmp/c.$id /tmp/o.$id
done
"""


@dataclass(frozen=True)
class BootFiles:
    """What QEMU boots: ``-kernel`` and ``-initrd``, and the kernel release they belong to."""

    kernel: Path
    initrd: Path
    release: str


def find_kernel() -> tuple[Path, str]:
    """The guest kernel and its release: ``$PACCP_GUEST_KERNEL`` or the newest Debian cloud kernel."""
    env = os.environ.get(KERNEL_ENV)
    if env:
        path = Path(env)
        m = re.match(r"vmlinuz-(.+)$", path.name)
        if not path.is_file() or not m:
            raise EnvironmentUnsupported(f"{KERNEL_ENV}={env}: not a vmlinuz-<release> file")
        return path, m.group(1)
    found = sorted(Path("/boot").glob("vmlinuz-*-cloud-amd64"), key=lambda p: _release_key(p.name[8:]))
    if not found:
        raise EnvironmentUnsupported(
            "no Debian cloud kernel in /boot (vmlinuz-*-cloud-amd64): run tools/install-system-deps.sh"
        )
    return found[-1], found[-1].name[len("vmlinuz-") :]


def _release_key(release: str) -> tuple[int, ...]:
    return tuple(int(x) for x in re.findall(r"\d+", release))


def module_files(release: str, names: tuple[str, ...] = MODULES) -> list[Path]:
    """The ``.ko`` files of ``names`` and their dependencies, dependencies first (from modules.dep)."""
    root = Path("/lib/modules") / release
    try:
        dep_text = (root / "modules.dep").read_text()
    except OSError:
        raise EnvironmentUnsupported(f"no {root}/modules.dep: install linux-image-{release}") from None
    deps: dict[str, list[str]] = {}
    by_name: dict[str, str] = {}
    for line in dep_text.splitlines():
        path, _, rest = line.partition(":")
        deps[path] = rest.split()
        by_name[_mod_name(path)] = path
    order: list[str] = []

    def visit(path: str) -> None:
        if path in order:
            return
        for d in reversed(deps.get(path, [])):  # modules.dep lists the deepest dependency last
            visit(d)
        order.append(path)

    for name in names:
        if name not in by_name:
            raise EnvironmentUnsupported(f"kernel {release} has no module {name} (built in or missing?)")
        visit(by_name[name])
    return [root / p for p in order]


def _mod_name(path: str) -> str:
    return re.sub(r"\.ko(\.(xz|zst|gz))?$", "", Path(path).name).replace("-", "_")


def _ko_bytes(path: Path) -> bytes:
    data = path.read_bytes()
    if path.suffix == ".xz":
        return lzma.decompress(data)
    if path.suffix == ".gz":
        return gzip.decompress(data)
    if path.suffix == ".zst":
        return subprocess.run(["zstd", "-dc", str(path)], capture_output=True, check=True).stdout
    return data


def shared_libs(binary: str) -> list[Path]:
    """The shared libraries (and the loader) ``ldd`` lists for ``binary``."""
    res = subprocess.run(["ldd", binary], capture_output=True, text=True)
    if "not a dynamic executable" in res.stdout + res.stderr:
        return []
    if res.returncode != 0:
        raise EnvironmentUnsupported(f"ldd {binary}: {res.stderr.strip()}")
    libs = []
    for line in res.stdout.splitlines():
        m = re.search(r"(/\S+)\s+\(0x", line)
        if m:
            libs.append(Path(m.group(1)))
    return libs


class _Cpio:
    """A cpio ``newc`` archive with root owners and time 0 (reproducible)."""

    def __init__(self) -> None:
        self.buf = io.BytesIO()
        self.ino = 1
        self.dirs: set[str] = set()

    def _entry(self, name: str, mode: int, data: bytes = b"") -> None:
        fields = [self.ino, mode, 0, 0, 1, 0, len(data), 0, 0, 0, 0, len(name) + 1, 0]
        head = b"070701" + b"".join(b"%08X" % f for f in fields)
        self.buf.write(head + name.encode() + b"\0")
        self.buf.write(b"\0" * (-(len(head) + len(name) + 1) % 4))
        self.buf.write(data + b"\0" * (-len(data) % 4))
        self.ino += 1

    def dir(self, name: str) -> None:
        parts = name.strip("/").split("/")
        for i in range(1, len(parts) + 1):
            d = "/".join(parts[:i])
            if d and d not in self.dirs:
                self.dirs.add(d)
                self._entry(d, 0o040755)

    def file(self, name: str, data: bytes, mode: int = 0o644) -> None:
        name = name.strip("/")
        self.dir(os.path.dirname(name))
        self._entry(name, 0o100000 | mode, data)

    def symlink(self, name: str, target: str) -> None:
        name = name.strip("/")
        self.dir(os.path.dirname(name))
        self._entry(name, 0o120777, target.encode())

    def finish(self) -> bytes:
        self._entry("TRAILER!!!", 0)
        return self.buf.getvalue()


def _inputs(release: str) -> list[tuple[str, Path]]:
    """(path in the guest, host file) of every file the initramfs copies."""
    for tool in (BUSYBOX, "/usr/bin/iperf3"):
        if not Path(tool).is_file():
            raise EnvironmentUnsupported(f"{tool} is missing: run tools/install-system-deps.sh")
    if shared_libs(BUSYBOX):
        raise EnvironmentUnsupported(f"{BUSYBOX} is dynamically linked: install busybox-static")
    files = [("bin/busybox", Path(BUSYBOX)), ("usr/bin/iperf3", Path("/usr/bin/iperf3"))]
    files += [(str(lib).lstrip("/"), lib) for lib in shared_libs("/usr/bin/iperf3")]
    files += [(f"lib/paccp-mod/{_mod_name(p.name)}.ko", p) for p in module_files(release)]
    return files


def cache_dir() -> Path:
    return Path(os.environ.get(CACHE_ENV, str(DEFAULT_CACHE)))


def build(force: bool = False) -> BootFiles:
    """The kernel and the (cached) initramfs for it; builds the initramfs when an input changed."""
    kernel, release = find_kernel()
    files = _inputs(release)
    h = hashlib.sha256(INIT.encode() + AGENT.encode() + release.encode())
    for name, src in files:
        h.update(name.encode() + b"\0" + src.resolve().read_bytes())
    out = cache_dir() / h.hexdigest()[:16] / "initrd.gz"
    if out.is_file() and not force:
        return BootFiles(kernel, out, release)
    arc = _Cpio()
    for d in ("proc", "sys", "dev", "tmp", "run", "etc", "sbin", "usr/sbin"):
        arc.dir(d)
    arc.file("init", INIT.encode(), 0o755)
    arc.file("agent.sh", AGENT.encode(), 0o755)
    mods = []
    for name, src in files:
        if name.startswith("lib/paccp-mod/"):
            arc.file(name, _ko_bytes(src))
            mods.append(Path(name).stem)
        else:
            arc.file(name, src.resolve().read_bytes(), 0o755)
    arc.file("lib/paccp-modules", ("\n".join(mods) + "\n").encode())
    arc.file("etc/passwd", b"root:x:0:0:root:/:/bin/sh\n")
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_suffix(".tmp")
    tmp.write_bytes(gzip.compress(arc.finish(), compresslevel=6, mtime=0))
    tmp.replace(out)
    return BootFiles(kernel, out, release)


def qemu_binary() -> str:
    """``qemu-system-x86_64`` or a one-line error saying how to get it."""
    path = shutil.which("qemu-system-x86_64")
    if path is None:
        raise EnvironmentUnsupported("qemu-system-x86_64 is not installed: run tools/install-system-deps.sh")
    return path


def main() -> int:
    try:
        boot = build(force="--force" in sys.argv[1:])
    except EnvironmentUnsupported as exc:
        print(f"paccp: {exc}", file=sys.stderr)
        return exc.exit_code
    size = boot.initrd.stat().st_size
    print(f"guest kernel {boot.kernel} ({boot.release}), initramfs {boot.initrd} ({size / 1e6:.1f} MB)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
