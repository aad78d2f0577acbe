"""Shared test helpers, and which tests run alone (the ``serial`` marker).

``make test-py`` runs the suite in two parts: every test not marked ``serial`` spread over the cores
(pytest-xdist), then the ``serial`` tests one at a time with nothing else of the suite beside them. A test
is ``serial`` when what it measures depends on having the machine to itself: it needs root (BPF,
network namespaces, iperf3 rates, the QEMU guest), starts service processes and waits on their timing,
or drives a browser. The rule is here, in one place: the paths below and the ``root`` marker.
"""

from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]

# Test files (relative to tests/) and folders (ending in /) whose tests run alone, and why.
SERIAL = {
    "datapath/": "root: BPF datapath, namespaces and iperf3 rates, the QEMU guest",
    "service/test_e2e_datapath.py": "root: the service over the real datapath",
    "service/test_e2e_host_scheme.py": "root: the service over the host enforcer",
    "service/test_agent.py": "agent and controller processes, restart and outage timing",
    "service/test_relay.py": "relay, agent and controller processes, retry timing",
    "service/test_serve_workers.py": "several server worker processes",
    "service/test_api_reads.py": "a token revocation bound of its cache TTL + 0.5 s",
    "service/test_web_browser.py": "a browser against a served controller",
    "test_report_browser.py": "a browser",
}


def is_serial(item: pytest.Item) -> bool:
    """Whether ``item`` runs alone (see :data:`SERIAL`)."""
    if item.get_closest_marker("root") is not None:
        return True
    rel = Path(str(item.path)).relative_to(REPO / "tests").as_posix()
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in SERIAL)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if is_serial(item):
            item.add_marker(pytest.mark.serial)


@pytest.fixture(scope="session")
def repo() -> Path:
    """The repository root."""
    return REPO
