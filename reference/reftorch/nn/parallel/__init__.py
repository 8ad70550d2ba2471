"""torch.nn.parallel: DataParallel (single-process data parallelism)."""
from .data_parallel import DataParallel, data_parallel

__all__ = ["DataParallel", "data_parallel"]
