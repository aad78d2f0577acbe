"""The running service: ``paccp serve`` (the controller: tenant API, operator API, web page) and
``paccp agent`` (one per host: reconciles the desired state into the datapath, ships usage).

Public names: :func:`create_app` (the controller's FastAPI app), :class:`Agent`, the :class:`Applier`
interface and its two implementations, :class:`FakeApplier` (tests, hosts without BPF) and
:class:`~paccp.service.schemes.DatapathApplier` (each VM through the datapath of the scheme it bought:
PACCP's BPF maps, SoftBW, MPTCP BG/WC or PACCP at the host's port). Operator guide: ``docs/service.md``.
"""

from paccp.service.app import create_app

__all__ = ["create_app"]
