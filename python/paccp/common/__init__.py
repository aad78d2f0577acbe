"""Base modules shared by every area (beside :mod:`paccp.errors`, :mod:`paccp.units`, :mod:`paccp.limits`):
classes of service (:mod:`paccp.common.cos`), the usage-record schema (:mod:`paccp.common.usage`), atomic
output files and directories (:mod:`paccp.common.outdir`)."""
