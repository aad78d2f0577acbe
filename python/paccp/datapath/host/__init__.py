"""PACCP enforced by the host on Linux (issue 26), at the host side of each VM's interface.

- :mod:`.enforcer`: :class:`~.enforcer.HostEnforcer`, the host agent (htb classes per VM on the host's
  port, BPF on each VM interface, the optimum re-solved over backlogged VMs, optionally the fabric law);
- :mod:`.metering`: per-VM usage records and Prometheus series from the host's counters;
- :mod:`.testbed`: the ``paccp testbed host-*`` experiments (namespace guests and a KVM guest's tap);
- :mod:`.cli`: their commands.

Design, threat model and figures: docs/host-enforcement.md.
"""
