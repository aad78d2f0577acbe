"""Limits of every user-supplied quantity, in one place (the README's reliability section lists them).

Every value must fit the engine's integer types (u64 bit/s, ns and bytes; simulated time is kept in
picoseconds internally, so times must stay far below 2^64 / 1000 ns), the places names go (file names,
usage records: docs/usage-records.md, at most 128 characters for a tenant and 256 for ids), and memory:
a run's flows and its sampled series are bounded before the engine allocates anything.
"""

from __future__ import annotations

MAX_RATE_BPS = 10**15  # 1 Pbit/s
MAX_TIME_NS = 100 * 86_400 * 10**9  # 100 days
MAX_SIZE_BYTES = 10**15  # 1 PB: flow sizes, CDF sizes, byte buffers
MAX_BUFFER_PACKETS = 10**9
MAX_OMEGA = 1e6
MAX_COUNT = 1_000_000  # hosts, leaves, spines, nodes
MAX_LINKS = 10_000_000
MAX_NAME = 64  # ids, labels, tenants, node names (file names, usage record ids)
MAX_FLOWS_PER_RUN = 5_000_000  # static + expected arrival flows (about 1-2 KB of memory each)
MAX_SAMPLE_CELLS = 20_000_000  # sampled flows x sample intervals (the engine returns them at once)
MAX_OPTIMUM_CELLS = 50_000_000  # links x flows of an optimum problem (dense matrices)
INT64_MAX = 2**63 - 1
