"""Benchmarks compare reftorch with PyTorch and NumPy in the same run (ratios, not limits)."""
