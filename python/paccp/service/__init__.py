"""The running service: ``paccp serve`` (the controller: tenant API, operator API, web page) and
``paccp agent`` (one per host: reconciles the desired state into the datapath, ships usage).

Public names: :func:`paccp.service.app.create_app` (the controller's FastAPI app), :class:`Agent`, the
:class:`Applier` interface and its two implementations, :class:`FakeApplier` (tests, hosts without BPF)
and :class:`~paccp.service.schemes.DatapathApplier` (each VM through the datapath of the scheme it
bought: PACCP's BPF maps, SoftBW, MPTCP BG/WC or PACCP at the host's port). Operator guide:
``docs/service.md``.

The package itself imports nothing: ``paccp`` imports it for its ``serve`` and ``agent`` commands, and
every other command would otherwise pay for FastAPI's import in each process.
"""
