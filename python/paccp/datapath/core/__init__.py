"""What every scheme's datapath shares: the bpf(2) calls, the BPF build and loader, cgroups,
network-namespace testbeds, CPU metering of runs, usage records and the engine's predictions."""
