"""The Linux datapath: PACCP as a BPF struct_ops congestion control, parameters, metering, testbed."""
