"""What every reftorch plugin shares: loop geometry for strided kernels, dtype -> C type
tables, the on-disk compile cache, and the plugin conformance kit."""
