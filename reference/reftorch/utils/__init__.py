"""reftorch.utils: checkpointing, DLPack exchange, model downloads (model_zoo) and data
loading (reftorch.utils.data). `cpp_extension` and `bottleneck` are imported on demand."""
from . import checkpoint, data, dlpack, model_zoo

__all__ = ["checkpoint", "data", "dlpack", "model_zoo"]
