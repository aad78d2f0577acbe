"""The simulator front: the engine wrapper, run directories, sweeps, the optimum, metrics, and the
``run``/``reproduce``/``optimum``/``bench``/``sweep``/``report`` commands.

- :mod:`paccp.sim.engine`: the typed wrapper of the Rust engine (``paccp._engine``);
- :mod:`paccp.sim.rundir`: one simulation run -> its run directory (docs/run-dir.md);
- :mod:`paccp.sim.sweep`: grids of runs over local cores or Ray, with a result cache;
- :mod:`paccp.sim.optimum`: the weighted alpha-fair optimum; :mod:`paccp.sim.guarantees`: guarantee checks;
- :mod:`paccp.sim.metrics`: workload metrics (FCT per size class, deadlines, confidence intervals);
- commands: :mod:`paccp.sim.cli`, :mod:`paccp.sim.workcli`, :mod:`paccp.sim.benchcli`
  (+ :mod:`paccp.sim.bench`).
"""
