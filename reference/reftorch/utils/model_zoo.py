"""torch.utils.model_zoo: `load_url` is torch.hub.load_state_dict_from_url (as in PyTorch).

`load_url(url, model_dir=None, map_location=None, progress=True, check_hash=False,
file_name=None, weights_only=False)` downloads `url` into `model_dir` (default
`<hub_dir>/checkpoints`) unless already there, optionally checks the SHA-256 prefix in a
`name-<hash>.ext` file name, and deserializes it with reftorch.serialization.load.
"""
from ..hub import load_state_dict_from_url as load_url

__all__ = ["load_url"]
