"""Checks of a batchbench installation on real servers, gathered into one verdict by `batchbench gpu-check`."""
