"""A QEMU guest with its own Linux kernel, behind a host tap: :class:`Guest`.

::

    with Guest("tapg0", addr="10.77.0.2/24", host_addr="10.77.0.1/24", cc="reno") as g:
        print(g.run("iperf3 -c 10.77.0.1 -t 5 -J", timeout=60))

The guest boots Debian's kernel with the initramfs of :mod:`paccp.datapath.guest.image` and one
virtio-net NIC on the tap (created by :class:`Guest` in ``netns``, or in this namespace; removed on exit).
Its console (ttyS0) goes to ``console.log`` in the guest's work directory; the second serial port (ttyS1)
is the command channel: a script in, its output and exit code back (base64 framed, see ``image.AGENT``).
The guest's TCP congestion control is its own (``net.ipv4.tcp_congestion_control`` inside the guest).

Acceleration: ``tcg`` by default (QEMU's software emulation: slow, a few tens of Mbit/s); ``kvm`` when
asked (``accel="kvm"`` or ``$PACCP_GUEST_ACCEL``). On the machines this project runs on, /dev/kvm is the
PVM nested hypervisor, under which a stock kernel does not get to its first console line: see
docs/kvm-guest.md.
"""

from __future__ import annotations

import base64
import contextlib
import ipaddress
import os
import re
import signal
import socket
import subprocess
import tempfile
import time
from pathlib import Path
from types import TracebackType

from paccp.datapath.guest import image
from paccp.errors import EnvironmentUnsupported, UserError

ACCEL_ENV = "PACCP_GUEST_ACCEL"
CCS = ("cubic", "reno")
BOOT_TIMEOUT_S = 180.0
# no TSO/UFO/checksum offload from the guest to the tap: the guest hands the host MTU-sized frames, as
# the namespace guests do (gso_max_segs 1), so drops at the host port are per packet
NO_OFFLOAD = ",csum=off,host_tso4=off,host_tso6=off,host_ecn=off,host_ufo=off,mrg_rxbuf=on"


class GuestError(EnvironmentUnsupported):
    """The guest did not boot, a command timed out, or the guest died (one line, the console's tail)."""


def _check_ifname(name: str) -> str:
    if not re.fullmatch(r"[A-Za-z0-9_.-]{1,15}", name):
        raise UserError(f"bad interface name {name!r}: 1-15 of A-Z a-z 0-9 _ . -")
    return name


def require(accel: str) -> str:
    """QEMU's binary, after checking that ``accel`` can run here (one-line errors, no traceback)."""
    if accel not in ("tcg", "kvm"):
        raise UserError(f"accel must be tcg or kvm, got {accel!r}")
    qemu = image.qemu_binary()
    if accel == "kvm" and not os.access("/dev/kvm", os.R_OK | os.W_OK):
        raise EnvironmentUnsupported("/dev/kvm is missing or not accessible: use accel tcg")
    if os.geteuid() != 0:
        raise EnvironmentUnsupported("a guest on a tap needs root (creating the tap)")
    return qemu


class Guest:
    """A booted guest; use as a context manager (boots on enter, powers off and cleans up on exit)."""

    def __init__(
        self,
        tap: str,
        addr: str,
        host_addr: str | None = None,
        cc: str = "cubic",
        netns: str | None = None,
        accel: str | None = None,
        memory_mb: int = 256,
        mac: str = "52:54:00:12:34:56",
        workdir: Path | None = None,
        boot_timeout_s: float = BOOT_TIMEOUT_S,
        offload: bool = False,
    ) -> None:
        self.tap = _check_ifname(tap)
        try:
            self.addr = ipaddress.ip_interface(addr)
            self.host_addr = ipaddress.ip_interface(host_addr) if host_addr else None
        except ValueError as exc:
            raise UserError(f"bad guest address: {exc}") from None
        if cc not in CCS:
            raise UserError(f"guest congestion control must be one of {', '.join(CCS)}, got {cc!r}")
        if not re.fullmatch(r"([0-9a-f]{2}:){5}[0-9a-f]{2}", mac):
            raise UserError(f"bad MAC {mac!r}")
        if not 64 <= memory_mb <= 4096:
            raise UserError("guest memory must be 64..4096 MB")
        self.cc = cc
        self.netns = netns
        self.accel = accel or os.environ.get(ACCEL_ENV, "tcg")
        self.memory_mb = memory_mb
        self.mac = mac
        self.boot_timeout_s = boot_timeout_s
        self.offload = offload
        self._sockdir = Path(tempfile.mkdtemp(prefix="paccp-guest-"))  # short: a socket path has <= 107 bytes
        self.workdir = workdir or self._sockdir
        self.console = self.workdir / "console.log"
        self._proc: subprocess.Popen[bytes] | None = None
        self._sock: socket.socket | None = None
        self._buf = b""
        self._seq = 0
        self._made_tap = False
        self.boot_s = 0.0

    # --- host side --------------------------------------------------------------------------------
    def _host(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        full = ["ip", "netns", "exec", self.netns, *cmd] if self.netns else list(cmd)
        res = subprocess.run(full, capture_output=True, text=True)
        if check and res.returncode != 0:
            raise GuestError(f"{' '.join(full)}: {res.stderr.strip()}")
        return res

    def _make_tap(self) -> None:
        if self._host("ip", "link", "show", self.tap, check=False).returncode != 0:
            self._host("ip", "tuntap", "add", "dev", self.tap, "mode", "tap")
            self._made_tap = True
        if self.host_addr is not None:
            self._host("ip", "addr", "replace", str(self.host_addr), "dev", self.tap)
        self._host("ip", "link", "set", self.tap, "up")

    def qemu_args(self, boot: image.BootFiles, ctl: Path) -> list[str]:
        accel = (
            ["-accel", "kvm", "-cpu", "host,-arch-capabilities"] if self.accel == "kvm" else ["-accel", "tcg"]
        )
        return [
            *accel,
            "-m", str(self.memory_mb), "-smp", "1", "-nodefaults", "-display", "none", "-no-reboot",
            "-kernel", str(boot.kernel), "-initrd", str(boot.initrd),
            "-append", "console=ttyS0 panic=-1 loglevel=4 tsc=reliable",
            "-serial", f"file:{self.console}",
            "-chardev", f"socket,id=ctl,path={ctl},server=on,wait=on",
            "-serial", "chardev:ctl",
            "-netdev", f"tap,id=n0,ifname={self.tap},script=no,downscript=no",
            "-device", f"virtio-net-pci,netdev=n0,mac={self.mac}{'' if self.offload else NO_OFFLOAD}",
        ]  # fmt: skip

    def __enter__(self) -> Guest:
        qemu = require(self.accel)
        boot = image.build()
        try:
            self._make_tap()
            self.workdir.mkdir(parents=True, exist_ok=True)
            ctl = self._sockdir / "ctl.sock"
            cmd = [qemu, *self.qemu_args(boot, ctl)]
            if self.netns:
                cmd = ["ip", "netns", "exec", self.netns, *cmd]
            t0 = time.monotonic()
            err = open(self.workdir / "qemu.err", "wb")
            self._proc = subprocess.Popen(
                cmd, stdout=subprocess.DEVNULL, stderr=err, stdin=subprocess.DEVNULL, start_new_session=True
            )
            err.close()
            self._connect(ctl, t0 + 20)
            self._read_until(image.READY.encode() + b"\n", t0 + self.boot_timeout_s, "boot")
            self.boot_s = time.monotonic() - t0
            self._configure()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def _connect(self, path: Path, deadline: float) -> None:
        while time.monotonic() < deadline:
            self._alive("start")
            s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                s.connect(str(path))
            except OSError:
                s.close()
                time.sleep(0.05)
                continue
            self._sock = s
            return
        raise GuestError("QEMU did not open its control socket within 20 s")

    def _configure(self) -> None:
        dev = "eth0"
        script = [
            f"ip link set {dev} up",
            f"ip addr add {self.addr} dev {dev}",
            f"sysctl -qw net.ipv4.tcp_congestion_control={self.cc}",
        ]
        if self.host_addr is not None:
            script.append(f"ip route add default via {self.host_addr.ip}")
        self.run("\n".join(script), timeout=30)

    # --- command channel -----------------------------------------------------------------------------
    def _alive(self, what: str) -> None:
        if self._proc is not None and self._proc.poll() is not None:
            raise GuestError(f"the guest exited during {what} (code {self._proc.returncode}); {self._tail()}")

    def _tail(self) -> str:
        lines = []
        for f in (self.workdir / "qemu.err", self.console):
            with contextlib.suppress(OSError):
                lines += [ln.strip() for ln in f.read_text(errors="replace").splitlines() if ln.strip()]
        return "last output: " + (" | ".join(lines[-3:]) if lines else "(none)")

    def _read_until(self, marker: bytes, deadline: float, what: str) -> bytes:
        assert self._sock is not None
        while marker not in self._buf:
            left = deadline - time.monotonic()
            if left <= 0:
                raise GuestError(f"guest {what} timed out; {self._tail()}")
            self._alive(what)
            self._sock.settimeout(min(left, 0.5))
            try:
                chunk = self._sock.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                raise GuestError(f"the guest closed its control channel during {what}; {self._tail()}")
            self._buf += chunk
        head, _, self._buf = self._buf.partition(marker)
        return head

    def run_rc(self, script: str, timeout: float = 60.0) -> tuple[int, str]:
        """Run a shell script in the guest; its exit code and output (stdout + stderr)."""
        if self._sock is None:
            raise GuestError("the guest is not running")
        n, line = self._request(script)
        self._sock.sendall(line)
        return self._answer(n, time.monotonic() + timeout)

    def _request(self, script: str) -> tuple[int, bytes]:
        """The next request's number and line: ``<id> <base64 script>``."""
        self._seq += 1
        return self._seq, f"{self._seq} ".encode() + base64.b64encode(script.encode()) + b"\n"

    def _answer(self, n: int, deadline: float) -> tuple[int, str]:
        """Request ``n``'s exit code and output, read from the command channel."""
        self._read_until(f"@@B {n}\n".encode(), deadline, f"command {n}")
        body = self._read_until(f"@@E {n} ".encode(), deadline, f"command {n}")
        rc = self._read_until(b"\n", deadline, f"command {n}")
        return int(rc.strip()), base64.b64decode(b"".join(body.split())).decode(errors="replace")

    def run(self, script: str, timeout: float = 60.0) -> str:
        """Like :meth:`run_rc`; a non-zero exit code is a :class:`GuestError` with the output's tail."""
        rc, out = self.run_rc(script, timeout)
        if rc != 0:
            tail = " | ".join(out.strip().splitlines()[-3:])
            raise GuestError(f"guest command failed (exit {rc}): {script.splitlines()[0]!r}: {tail}")
        return out

    def spawn(self, script: str) -> int:
        """Start a script in the guest's background; :meth:`wait` returns its output. Returns a job id."""
        self._seq += 1
        job = self._seq
        q = script.replace("'", "'\\''")
        self.run(f"(sh -c '{q}' > /tmp/job.{job} 2>&1 </dev/null; echo $? > /tmp/job.{job}.rc) &", timeout=30)
        return job

    def wait(self, job: int, timeout: float = 120.0, poll_s: float = 1.0) -> tuple[int, str]:
        """Wait for a job of :meth:`spawn`: its exit code and output."""
        deadline = time.monotonic() + timeout
        while True:
            rc, out = self.run_rc(f"cat /tmp/job.{job}.rc && cat /tmp/job.{job}", timeout=30)
            if rc == 0:
                code, _, text = out.partition("\n")
                return int(code), text
            if time.monotonic() > deadline:
                raise GuestError(f"guest job {job} still running after {timeout:g} s")
            time.sleep(poll_s)

    def wait_listening(self, port: int, timeout: float = 30.0) -> None:
        """Wait until a TCP socket listens on ``port`` in the guest (a server started by :meth:`spawn`)."""
        deadline = time.monotonic() + timeout
        while f":{port} " not in self.run("netstat -ltn", timeout=30):
            if time.monotonic() > deadline:
                raise GuestError(f"nothing listens on port {port} in the guest after {timeout:g} s")
            time.sleep(0.2)

    # --- teardown -------------------------------------------------------------------------------------
    def close(self) -> None:
        """Power off (kill QEMU), remove the tap if made here; idempotent."""
        if self._sock is not None:
            with contextlib.suppress(OSError):
                self._sock.close()
            self._sock = None
        if self._proc is not None:
            if self._proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self._proc.pid, signal.SIGTERM)
                try:
                    self._proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(self._proc.pid, signal.SIGKILL)
                    self._proc.wait(timeout=5)
            self._proc = None
        if self._made_tap:
            self._host("ip", "link", "del", self.tap, check=False)
            self._made_tap = False
        with contextlib.suppress(OSError):
            (self._sockdir / "ctl.sock").unlink()
