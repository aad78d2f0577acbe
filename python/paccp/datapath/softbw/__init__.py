"""SoftBW at a host's egress port: the BPF fulfilment steering (:mod:`.control`) over HTB classes, its
commands and its testbeds (bandwidth shares, short flows, overhead)."""
