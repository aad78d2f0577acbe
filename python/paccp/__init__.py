"""PACCP: price-aware congestion control — simulator, Linux datapath, pricing and billing."""

__version__ = "0.1.0"
