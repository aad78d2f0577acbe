"""The running service: ``paccp serve`` (the controller: tenant API, operator API, web page) and
``paccp agent`` (one per host: reconciles the desired state into the datapath, ships usage).

Public names: :func:`create_app` (the controller's FastAPI app), :class:`Agent`, the :class:`Applier`
interface and its two implementations, :class:`FakeApplier` (tests, hosts without BPF) and
:class:`DatapathApplier` (the BPF datapath through :mod:`paccp.datapath.paccp`). Operator guide:
``docs/service.md``.
"""

from paccp.service.app import create_app

__all__ = ["create_app"]
