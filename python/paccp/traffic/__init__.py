"""Traffic models shared by scenarios, experiments and the comparison: flow-size CDFs and deadline rules
(:mod:`paccp.traffic.workload`), the MapReduce shuffle trace (:mod:`paccp.traffic.mapreduce`)."""
