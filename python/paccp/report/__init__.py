"""Plots and reports of simulation results."""
