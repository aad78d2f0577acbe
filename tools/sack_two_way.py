"""Two-way dumbbell for SACK under ACK loss (docs/explanation/engine.md): rate, retransmits, spurious,
timeouts.

200 Mb/s bottleneck, 32-packet buffer, 5 us delays, 3 s, min_rto 200 ms; one BE (0, 1), one DS (0, 2)
and one MRG (80 Mb/s, 2) flow each way. Run with `.venv/bin/python tools/sack_two_way.py` from a checkout.
"""

from typing import Any

from paccp.scenario import parse_scenario, to_engine
from paccp.sim import engine

CLASSES = (("be", "0bit", 1.0), ("ds", "0bit", 2.0), ("mrg", "80Mbit", 2.0))


def run(label: str, two_way: bool = True, buf: str = "32pkt", tr: dict[str, Any] | None = None) -> None:
    fl = [
        {"id": f"{c}{i}", "src": f"l{i}", "dst": f"r{i}", "theta": th, "omega": om}
        for i, (c, th, om) in enumerate(CLASSES)
    ]
    if two_way:
        fl += [
            {"id": f"R{c}{i}", "src": f"r{i}", "dst": f"l{i}", "theta": th, "omega": om}
            for i, (c, th, om) in enumerate(CLASSES)
        ]
    sc = {
        "run": {"seed": 1, "duration": "3s", "warmup": "500ms", "sample_interval": "10ms"},
        "transport": {"min_rto": "200ms", "initial_rto": "1s", "max_rto": "2s", **OFF, **(tr or {})},
        "topology": {
            "kind": "dumbbell",
            "left_hosts": 3,
            "right_hosts": 3,
            "access_rate": "2Gbit",
            "access_delay": "5us",
            "bottleneck_rate": "200Mbit",
            "bottleneck_delay": "5us",
            "bottleneck_buffer": buf,
        },
        "flows": fl,
    }
    r = engine.run(to_engine(parse_scenario(sc, where="sack_two_way")))
    cells = [
        f"{row['id']} {row['bytes_acked'] * 8 / 3 / 1e6:.1f} Mb/s "
        f"({row['retransmits']}/{row['spurious_retransmits']}/{row['timeouts']})"
        for row in r.flows.to_pylist()[:3]
    ]
    print(f"{label:32s}", " | ".join(cells), flush=True)


# Every option named explicitly (the scenario defaults are sack = true, host_backpressure = true).
OFF = {"sack": False, "host_backpressure": False, "delayed_ack": False}

if __name__ == "__main__":
    run("one-way newreno", two_way=False)
    run("one-way sack", two_way=False, tr={"sack": True})
    run("two-way newreno")
    run("two-way sack", tr={"sack": True})
    run("two-way sack+bp", tr={"sack": True, "host_backpressure": True})
    run("two-way newreno+delack", tr={"delayed_ack": True})
    run("two-way sack+delack", tr={"delayed_ack": True, "sack": True})
    run("two-way sack+delack+bp", tr={"delayed_ack": True, "sack": True, "host_backpressure": True})
