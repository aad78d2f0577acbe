"""``paccp compare``: PACCP, SoftBW, MPTCP BG/WC and TCP side by side on the same tenants, traffic, prices.

- :mod:`paccp.compare.spec`: the comparison file (a scenario plus ``[compare]``: purchases, VMs, traffic,
  points, gaming, quick);
- :mod:`paccp.compare.setup`: the scheme-independent VMs and flows of one point and seed;
- :mod:`paccp.compare.schemes`: one mapping and one pricing function per scheme (the registry);
- :mod:`paccp.compare.measure`: what a run measures and its scores;
- :mod:`paccp.compare.run`: planning, the sweep, aggregation over seeds, outputs;
- :mod:`paccp.report.tables` (shared with the HTML report), :mod:`paccp.compare.plots`: markdown and PNGs.
"""
