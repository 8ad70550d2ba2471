"""Benchmarks compare reftorch with PyTorch and NumPy in the same run (ratios, not limits).

Both libraries run here in one process, each with its own OpenMP runtime (PyTorch bundles
libgomp, the C plugin uses the system's) next to NumPy's OpenBLAS threads. Idle OpenMP threads
spin for milliseconds by default and take the cores the other pools need: in a training step
that costs both libraries several times their time on a 2-core machine. So every runtime here
sleeps when idle (set before anything loads libgomp; a user's own choice wins), and NumPy's
OpenBLAS threads too (see report.py's OPENBLAS_THREAD_TIMEOUT).
"""
import os

os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "4")
