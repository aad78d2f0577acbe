"""Paper experiments: each module builds scenarios, runs them and scores them against the paper.

An experiment registers itself in :data:`REGISTRY` under the id used by ``paccp reproduce``
(``fig4a``, ``fig4c``, ``fig5``, ``rcos``, ``fig8`` ... ``fig11``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


def check(statement: str, paper: Any, ours: Any, holds: bool | None) -> dict[str, Any]:
    """One row of an experiment's ``summary.json`` ``checks``: a claim of the paper, the paper's figure,
    ours, and whether the claim holds here (``None``: it could not be judged in this run)."""
    verdict = None if holds is None else bool(holds)
    return {"statement": statement, "paper": paper, "ours": ours, "holds": verdict}


@dataclass(frozen=True)
class ExperimentOptions:
    """Options shared by every experiment run from ``paccp reproduce``."""

    out_dir: Path
    seed: int = 1
    quick: bool = False
    duration_ns: int | None = None
    # ``[transport]`` keys applied to every scenario the experiment builds (``--transport KEY=VALUE``),
    # e.g. {"sack": True}; validated by the scenario schema like a user's file.
    transport: dict[str, Any] = field(default_factory=dict)
    # The workload grid (``--seeds``, ``--loads``, ``--drain``); None keeps each experiment's own.
    seeds: int | None = None  # number of seeds: seed .. seed + seeds - 1
    loads: tuple[float, ...] | None = None
    drain_ns: int | None = None  # simulated time after the last arrival
    from_cache: bool = False  # summarise the points already in the cache, run nothing (``--from-cache``)


@dataclass(frozen=True)
class Experiment:
    """A reproducible paper experiment."""

    id: str
    title: str
    run: Callable[[ExperimentOptions], dict[str, Any]]  # returns the summary written to summary.json
    # True when the experiment writes DIR/<id>/ as a whole and moves it into place (paccp.common.outdir),
    # so an existing DIR/<id>/ must be one of our outputs; False when it resumes from a cache kept there.
    replaces_dir: bool = False
    # Optional: validate and resolve everything (scenarios, engine inputs) without running; returns the
    # thunk that runs the prepared experiment. ``paccp reproduce`` prepares every experiment it was given
    # before running the first, so a bad option fails before any work.
    prepare: Callable[[ExperimentOptions], Callable[[], dict[str, Any]]] | None = None
    # True when the experiment applies ``ExperimentOptions.transport`` (``--transport``) to its runs; the
    # others set their own transport (a testbed's), and ``paccp reproduce`` refuses the option for them.
    takes_transport: bool = False
    # True when the experiment uses ``ExperimentOptions.duration_ns`` (``--duration``); for the others
    # ``paccp reproduce`` refuses the option (it would be ignored).
    takes_duration: bool = False
    # True when the experiment is a grid of loads x seeds that takes ``--seeds``, ``--loads`` and ``--drain``
    # (``ExperimentOptions.seeds``/``loads``/``drain_ns``); ``paccp reproduce`` refuses them for the others.
    takes_grid: bool = False
    # True when the experiment resumes from a per-point cache kept in DIR/<id>/cache (each entry written
    # atomically; the summary files renamed into place), so an interrupted run is picked up again. An
    # experiment neither ``replaces_dir`` nor ``resumable`` is built by ``paccp reproduce`` in a temporary
    # directory beside DIR/<id>/ and moved into place at the end (paccp.common.outdir.staged_parent).
    resumable: bool = False


REGISTRY: dict[str, Experiment] = {}


def register(exp: Experiment) -> Experiment:
    """Add an experiment to the registry (ids must be unique)."""
    if exp.id in REGISTRY:
        raise ValueError(f"experiment {exp.id!r} registered twice")
    REGISTRY[exp.id] = exp
    return exp


# Modules that define experiments; each registers itself on import.
_MODULES: tuple[str, ...] = (
    "paccp.experiments.longlived",  # fig4a, fig4c, fig5 (simulation-engine issue)
    "paccp.experiments.workload",  # rcos, fig8-fig11 (workload issue)
    "paccp.experiments.softbw_oc",  # softbw-oc (SoftBW issue)
    "paccp.experiments.softbw_price",  # softbw-price (SoftBW issue)
    "paccp.experiments.softbw_short",  # softbw-short (SoftBW issue)
    "paccp.experiments.softbw_converge",  # softbw-converge (SoftBW issue)
    "paccp.experiments.softbw_share",  # softbw-share (SoftBW issue)
    "paccp.experiments.mptcp_bgwc",  # mptcp-bg, -table3, -fair (issue 11)
    "paccp.experiments.mptcp_sched",  # mptcp-sched (issue 11, connection layer)
    "paccp.experiments.mptcp_rcvbuf",  # mptcp-rcvbuf (issue 11, connection layer)
    "paccp.experiments.mptcp_more",  # mptcp-cc, -wc, -clos (issue 11)
)


def load_all() -> dict[str, Experiment]:
    """Import every experiment module and return the registry."""
    import importlib

    for name in _MODULES:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name != name:
                raise
    return REGISTRY
