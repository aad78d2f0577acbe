"""PACCP as a BPF struct_ops congestion control: loading (:mod:`.lifecycle`), parameter checks
(:mod:`.params`), VM pairs (:mod:`.vms`), flow rules (:mod:`.rules`), per-socket pairs (:mod:`.sockets`),
metering and usage records (:mod:`.metering`), the Prometheus exporter and the testbeds.

The BPF side lives in ``bpf/`` (built with ``make -C bpf`` on first use). Loading runs the small libbpf
loader ``bpf/build/paccp_loader``, which registers the struct_ops ``paccp`` and pins every map and the
sockops program under :data:`.maps.PIN_DIR` (mode 0600, root). Everything else talks to the pinned maps
directly through ``bpf(2)`` (:mod:`paccp.datapath.core.bpfsys`); cgroup attachment uses ``bpftool``.
"""
