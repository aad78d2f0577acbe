"""Reports of results: the HTML report of run and experiment directories (:mod:`paccp.report.html`) and the
tables of a comparison (:mod:`paccp.report.tables`, also printed by ``paccp compare``). The per-run rate
plots are drawn by the simulator front (:mod:`paccp.sim.plots`)."""
