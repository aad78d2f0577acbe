"""A throwaway PostgreSQL server for the ledger's tests and ``paccp bench ledger``.

It runs the system's PostgreSQL binaries (``initdb``, ``postgres``; Debian's ``postgresql`` package puts them
in ``/usr/lib/postgresql/N/bin``, ``tools/install-system-deps.sh`` installs it) on a temporary data directory,
listening only on a Unix socket inside that directory (no TCP port), with ``trust`` authentication for the
``postgres`` role: nothing outside this process's temporary directory can reach it. PostgreSQL refuses to
run as root, so when we are root (CI) the server runs as the unprivileged user ``nobody``, which owns the
temporary directory. :meth:`TempPostgres.stop` shuts it down and removes the directory.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

from paccp.errors import EnvironmentUnsupported

#: Environment variable naming a directory with initdb and postgres, to override the search.
BIN_ENV = "PACCP_PG_BIN"


def find_bindir() -> Path | None:
    """The directory with ``initdb`` and ``postgres``: $PACCP_PG_BIN, the newest /usr/lib/postgresql/N/bin,
    or the one on PATH."""
    if os.environ.get(BIN_ENV):
        return Path(os.environ[BIN_ENV])
    versions = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"),
        key=lambda p: int(p.parts[-3]) if p.parts[-3].isdigit() else 0,
    )
    if versions:
        return versions[-1].parent
    found = shutil.which("initdb")
    return Path(found).parent if found else None


class TempPostgres:
    """One throwaway server; ``url(db)`` gives an SQLAlchemy URL for a database on it."""

    def __init__(self, *, durable: bool = False) -> None:
        """``durable``: keep PostgreSQL's default fsync and synchronous commit; tests turn them off."""
        bindir = find_bindir()
        if bindir is None or not (bindir / "postgres").exists():
            raise EnvironmentUnsupported(
                "PostgreSQL server binaries not found"
                " (install Debian's postgresql package, or set PACCP_PG_BIN)"
            )
        self.bindir = bindir
        self.durable = durable
        as_root = os.geteuid() == 0
        # as root the server runs as nobody, who must reach the directory: /tmp, not a private $TMPDIR
        self.root = Path(tempfile.mkdtemp(prefix="paccp-pg-", dir="/tmp" if as_root else None))
        self.data = self.root / "data"
        self.proc: subprocess.Popen[bytes] | None = None
        self._user: str | None = None
        if as_root:
            self._user = "nobody"
            pw = pwd.getpwnam(self._user)
            os.chown(self.root, pw.pw_uid, pw.pw_gid)
        self.log = self.root / "postgres.log"

    def _env(self) -> dict[str, str]:
        return {**os.environ, "HOME": str(self.root), "LC_ALL": "C"}

    def _ids(self) -> tuple[int | None, int | None, list[int] | None]:
        """(uid, gid, supplementary groups) to run the server as: ``nobody`` when we are root."""
        if self._user is None:
            return None, None, None
        pw = pwd.getpwnam(self._user)
        return pw.pw_uid, pw.pw_gid, []

    def start(self, timeout_s: float = 60.0) -> TempPostgres:
        """initdb, start the server, wait until it accepts connections."""
        uid, gid, groups = self._ids()
        init = subprocess.run(
            [str(self.bindir / "initdb"), "-D", str(self.data), "-U", "postgres", "--auth=trust",
             "--encoding=UTF8", "--locale=C", "--no-sync"],
            capture_output=True, cwd=self.root, env=self._env(), user=uid, group=gid, extra_groups=groups,
        )  # fmt: skip
        if init.returncode != 0:
            self.stop()
            raise EnvironmentUnsupported(
                f"initdb failed: {init.stderr.decode(errors='replace').strip()[:300]}"
            )
        opts = [
            "-c",
            "listen_addresses=",
            "-c",
            f"unix_socket_directories={self.root}",
            "-c",
            "max_connections=40",
        ]
        if not self.durable:
            opts += ["-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off"]
        with self.log.open("wb") as log:
            self.proc = subprocess.Popen(
                [str(self.bindir / "postgres"), "-D", str(self.data), *opts],
                stdout=log, stderr=subprocess.STDOUT, cwd=self.root, start_new_session=True, env=self._env(),
                user=uid, group=gid, extra_groups=groups,
            )  # fmt: skip
        deadline = time.monotonic() + timeout_s
        while True:
            if self.proc.poll() is not None:
                tail = self.log.read_text(errors="replace")[-300:]
                self.stop()
                raise EnvironmentUnsupported(f"postgres exited at start: {tail.strip()}")
            try:
                self.execute("SELECT 1")
                return self
            except Exception:
                if time.monotonic() > deadline:
                    self.stop()
                    raise
                time.sleep(0.1)

    def server_cpu_s(self) -> float:
        """CPU seconds (user + system) the server has used: the postmaster, its live processes and the
        ones it has reaped (from ``/proc``; 0.0 where there is none)."""
        if self.proc is None:
            return 0.0
        tick = os.sysconf("SC_CLK_TCK")
        total = 0
        for stat in Path("/proc").glob("[0-9]*/stat"):
            try:
                fields = stat.read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            pid, ppid = int(stat.parent.name), int(fields[1])
            if pid == self.proc.pid:  # utime, stime, cutime, cstime
                total += sum(int(x) for x in fields[11:15])
            elif ppid == self.proc.pid:
                total += int(fields[11]) + int(fields[12])
        return total / tick

    def conninfo(self, dbname: str = "postgres") -> str:
        """A libpq connection string."""
        return f"host={self.root} user=postgres dbname={dbname}"

    def url(self, dbname: str = "postgres", user: str = "postgres") -> str:
        """An SQLAlchemy URL (psycopg 3) for ``dbname`` on this server."""
        return f"postgresql+psycopg://{user}@/{dbname}?host={self.root}"

    def execute(self, sql: str, dbname: str = "postgres") -> None:
        """Run one statement in autocommit mode (CREATE DATABASE, CREATE ROLE...)."""
        import psycopg

        with psycopg.connect(self.conninfo(dbname), autocommit=True, connect_timeout=5) as conn:
            conn.execute(sql)

    def create_database(self, name: str, template: str = "template0") -> str:
        """A fresh database (a file copy of ``template``); returns its URL."""
        self.execute(f'CREATE DATABASE "{name}" TEMPLATE "{template}" STRATEGY FILE_COPY')
        return self.url(name)

    def drop_database(self, name: str) -> None:
        """Drop a database, disconnecting whoever is still on it."""
        self.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')

    def stop(self) -> None:
        """Fast shutdown, then remove the data directory."""
        if self.proc is not None and self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGINT)  # fast shutdown: disconnect clients, stop
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None
        shutil.rmtree(self.root, ignore_errors=True)


@contextlib.contextmanager
def temp_postgres(*, durable: bool = False) -> Iterator[TempPostgres]:
    """``with temp_postgres() as pg: ...``: a started server, stopped and removed afterwards."""
    pg = TempPostgres(durable=durable)
    try:
        yield pg.start()
    finally:
        pg.stop()
