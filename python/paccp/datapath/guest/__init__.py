"""A guest with its own Linux kernel (QEMU) behind a host tap: a VM whose kernel the host does not control.

:mod:`.image` builds the boot files, :mod:`.vm` boots and drives a guest (:class:`~.vm.Guest`),
:mod:`.experiment` is ``paccp testbed kvm-guest``.
"""
