"""Cross-check of the engine against ns-3 (the ``ns3`` wheel) and the Linux kernel (network namespaces).

``make crosscheck`` / ``paccp crosscheck``: matched scenarios (:mod:`.scenarios`), run on the engine
(:mod:`.engine_side`), on ns-3 (:mod:`.ns3_run`, a subprocess) and on the kernel (:mod:`.kernel_side`),
compared side by side (:mod:`.run`). How each parameter is matched is in docs/explanation/fidelity.md.
"""
