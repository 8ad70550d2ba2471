"""Op declarations and their reference kernels, one module per documented section."""
