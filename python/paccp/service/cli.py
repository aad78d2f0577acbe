"""``paccp serve`` (the controller), ``paccp agent`` (one per host) and ``paccp relay`` (one per rack)."""

from __future__ import annotations

import logging
import os
import secrets
import socket
from pathlib import Path
from typing import Annotated

import typer

from paccp.errors import UserError
from paccp.units import parse_duration_ns

DbOpt = Annotated[
    str | None,
    typer.Option(
        "--db", help="ledger: SQLite file or postgresql:// URL (default $PACCP_LEDGER, else per-user)"
    ),
]


def read_or_create_token(path: Path, prefix: str) -> str:
    """The secret in ``path``; a new random one (file mode 0600) if the file does not exist."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        tok = f"{prefix}_{secrets.token_urlsafe(32)}"
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(tok + "\n")
        print(f"created {path} (mode 0600)")
        return tok
    try:
        tok = path.read_text(encoding="utf-8").strip()
    except OSError as exc:
        raise UserError(f"{path}: cannot read ({exc.strerror})") from None
    if len(tok) < 16:
        raise UserError(f"{path}: a token needs at least 16 characters")
    return tok


def serve_cmd(
    db: DbOpt = None,
    bind: Annotated[str, typer.Option("--bind", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port")] = 8080,
    admin_token_file: Annotated[
        Path, typer.Option("--admin-token-file", help="operator's token (created if missing)")
    ] = Path("/etc/paccp/admin.token"),
    agent_token_file: Annotated[
        Path, typer.Option("--agent-token-file", help="agents' enrolment token (created if missing)")
    ] = Path("/etc/paccp/agent.token"),
    log_level: Annotated[str, typer.Option("--log-level", help="debug, info, warning")] = "info",
    workers: Annotated[
        int,
        typer.Option("--workers", help="worker processes (the controller is stateless over its database)"),
    ] = 1,
) -> None:
    """The controller: tenant and operator API (OpenAPI at /docs), tenant web page at /, agents' watch."""
    import uvicorn

    from paccp.service.app import create_app

    if not 0 < port < 65536:
        raise UserError("--port must be 1..65535")
    if not 1 <= workers <= 64:
        raise UserError("--workers must be 1..64")
    if log_level.lower() not in ("debug", "info", "warning", "error"):
        raise UserError(f"--log-level must be debug, info, warning or error, got {log_level!r}")
    admin, agent = read_or_create_token(admin_token_file, "pa"), read_or_create_token(agent_token_file, "pe")
    app = create_app(db, admin, agent)  # also migrates the ledger once, before any worker starts
    _log_setup(log_level)
    if workers == 1:
        uvicorn.run(app, host=bind, port=port, log_level=log_level, access_log=True)
        return
    os.environ.update({_ENV_DB: db or "", _ENV_ADMIN: str(admin_token_file.resolve()),
                       _ENV_AGENT: str(agent_token_file.resolve()), _ENV_LOG: log_level})  # fmt: skip
    uvicorn.run(f"{__name__}:worker_app", factory=True, workers=workers, host=bind, port=port,
                log_level=log_level, access_log=True)  # fmt: skip


_ENV_DB, _ENV_ADMIN, _ENV_AGENT, _ENV_LOG = (f"PACCP_SERVE_{k}" for k in ("DB", "ADMIN", "AGENT", "LOG"))


def _log_setup(level: str) -> None:
    logging.basicConfig(level=level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")


def worker_app() -> object:
    """The app of one ``paccp serve --workers N`` worker process (uvicorn's factory; the parent's settings
    come through the environment, the tokens from their files, never the environment)."""
    from paccp.service.app import create_app

    _log_setup(os.environ.get(_ENV_LOG, "info"))
    return create_app(
        os.environ.get(_ENV_DB) or None,
        read_or_create_token(Path(os.environ[_ENV_ADMIN]), "pa"),
        read_or_create_token(Path(os.environ[_ENV_AGENT]), "pe"),
    )


def agent_cmd(
    controller: Annotated[str, typer.Option("--controller", help="controller URL")] = "http://127.0.0.1:8080",
    host: Annotated[str | None, typer.Option("--host", help="this host's name (default: hostname)")] = None,
    token_file: Annotated[Path, typer.Option("--token-file", help="the agents' enrolment token")] = Path(
        "/etc/paccp/agent.token"
    ),
    state_dir: Annotated[Path, typer.Option("--state-dir", help="last applied state and usage spool")] = Path(
        "/var/lib/paccp-agent"
    ),
    applier: Annotated[
        str, typer.Option("--applier", help="datapath (BPF, root) or fake (a file; tests, no BPF)")
    ] = "datapath",
    metrics_port: Annotated[int, typer.Option("--metrics-port", help="Prometheus port (0: off)")] = 9465,
    metrics_addr: Annotated[str, typer.Option("--metrics-addr", help="Prometheus address")] = "127.0.0.1",
    usage_period: Annotated[str, typer.Option("--usage-period", help="usage record length")] = "10s",
    rate_period: Annotated[str, typer.Option("--rate-period", help="rate sampling period")] = "1s",
    wait: Annotated[str, typer.Option("--wait", help="long-poll wait")] = "20s",
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
    host_config: Annotated[
        Path | None,
        typer.Option("--host-config", help="TOML: the host's port, its VMs' interfaces and addresses"),
    ] = None,
    relay: Annotated[
        str | None, typer.Option("--relay", help="send usage through this relay (paccp relay), not directly")
    ] = None,
) -> None:
    """The host agent: applies the desired state to the datapath, ships usage, exports metrics."""
    from paccp.service.agent import Agent
    from paccp.service.appliers import Applier, FakeApplier
    from paccp.service.schemes import DatapathApplier, HostFacts

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    periods = [parse_duration_ns(x) / 1e9 for x in (usage_period, rate_period, wait)]
    if not all(0 < p <= 3600 for p in periods):
        raise UserError("--usage-period, --rate-period and --wait must be > 0 and at most 1h")
    if not 0 <= metrics_port < 65536:
        raise UserError("--metrics-port must be 0..65535")
    app_: Applier
    if applier == "fake":
        app_ = FakeApplier(state_dir / "fake-datapath.json")
    elif applier == "datapath":
        app_ = DatapathApplier(HostFacts.load(host_config))
    else:
        raise UserError(f"unknown --applier {applier!r} (expected datapath or fake)")
    if not token_file.is_file():
        raise UserError(f"{token_file}: no enrolment token (copy the controller's --agent-token-file)")
    ag = Agent(
        controller,
        host or socket.gethostname(),
        token_file.read_text(encoding="utf-8").strip(),
        state_dir,
        app_,
        usage_period_s=periods[0],
        rate_period_s=periods[1],
        wait_s=periods[2],
        relay=relay,
    )
    ag.run(metrics_port, metrics_addr)


def relay_cmd(
    controller: Annotated[str, typer.Option("--controller", help="controller URL")] = "http://127.0.0.1:8080",
    token_file: Annotated[Path, typer.Option("--token-file", help="the agents' enrolment token")] = Path(
        "/etc/paccp/agent.token"
    ),
    bind: Annotated[str, typer.Option("--bind", help="address to listen on")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", help="TCP port")] = 8081,
    flush: Annotated[str, typer.Option("--flush", help="longest a report waits for its batch")] = "200ms",
    retry: Annotated[str, typer.Option("--retry", help="how long a batch is retried before 503")] = "8s",
    batch_records: Annotated[int, typer.Option("--batch-records", help="records per batch at most")] = 6000,
    log_level: Annotated[str, typer.Option("--log-level")] = "info",
) -> None:
    """A rack's usage relay: agents report to it, it forwards their reports to the controller in batches."""
    import uvicorn

    from paccp.service.relay import create_relay_app

    flush_s, retry_s = (parse_duration_ns(x) / 1e9 for x in (flush, retry))
    if not (0 < flush_s <= 10 and 0 < retry_s <= 60 and 1 <= batch_records <= 20_000 and 0 < port < 65536):
        raise UserError("--flush (0, 10s], --retry (0, 60s], --batch-records 1..20,000, --port 1..65535")
    if not token_file.is_file():
        raise UserError(f"{token_file}: no enrolment token (copy the controller's --agent-token-file)")
    app = create_relay_app(
        controller, token_file.read_text(encoding="utf-8").strip(), flush_s=flush_s, retry_s=retry_s,
        max_records=batch_records,
    )  # fmt: skip
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(name)s %(levelname)s %(message)s")
    uvicorn.run(app, host=bind, port=port, log_level=log_level, access_log=False)


def bench_service_cmd(
    hosts: Annotated[int, typer.Option("--hosts", help="simulated hosts")] = 100_000,
    vms: Annotated[int, typer.Option("--vms", help="VMs per host (one record each per period)")] = 4,
    period: Annotated[str, typer.Option("--period", help="report period of every host")] = "10s",
    seconds: Annotated[str, typer.Option("--seconds", help="how long the usage load runs")] = "120s",
    rps: Annotated[float, typer.Option("--rps", help="tenant API requests per second")] = 200,
    api_seconds: Annotated[
        str, typer.Option("--api-seconds", help="how long the API load runs (0: none)")
    ] = "30s",
    workers: Annotated[int, typer.Option("--workers", help="reports in flight at most")] = 64,
    out: Annotated[str, typer.Option("--out", help="also write the JSON to this file")] = "",
    serve_workers: Annotated[
        int, typer.Option("--serve-workers", help="the controller's worker processes (paccp serve --workers)")
    ] = 2,
    via: Annotated[
        str,
        typer.Option("--via", help="usage path: controller (each host), relay (a relay process), batches"),
    ] = "controller",
    hosts_per_batch: Annotated[
        int, typer.Option("--hosts-per-batch", help="--via batches: hosts per request")
    ] = 1000,
) -> None:
    """The controller under load on loopback over a throwaway PostgreSQL: usage ingest and API latency."""
    from paccp.service.bench import run_cli

    p, s, a = (parse_duration_ns(x) / 1e9 for x in (period, seconds, api_seconds))
    run_cli(hosts, vms, p, s, rps, a, workers, out, serve_workers, via, hosts_per_batch)


def register(app: typer.Typer, bench_app: typer.Typer | None = None) -> None:
    """Add ``serve``, ``agent`` and ``relay`` to the root app, and ``service`` to ``bench``."""
    app.command("serve")(serve_cmd)
    app.command("agent")(agent_cmd)
    app.command("relay")(relay_cmd)
    if bench_app is not None:
        bench_app.command("service")(bench_service_cmd)
