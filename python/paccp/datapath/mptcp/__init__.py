"""MPTCP BG/WC on the kernel's own MPTCP: the BPF congestion controls and sockops (:mod:`.control`), strict
priority at switch ports (:mod:`.prio`), its commands and its testbeds."""
