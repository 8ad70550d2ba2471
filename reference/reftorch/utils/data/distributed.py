"""DistributedSampler: each of `num_replicas` processes gets its own share of the indices."""
from __future__ import annotations

import math

import reftorch as torch

from .sampler import Sampler


class DistributedSampler(Sampler):
    """Indices `rank, rank + num_replicas, ...` of a (per-epoch shuffled) index list padded by
    wrapping around to a multiple of `num_replicas` (or cut down with `drop_last`).

    Every replica must pass the same `seed` and call `set_epoch(epoch)` before each epoch so
    that all of them shuffle alike; the permutation is randperm with a generator seeded with
    `seed + epoch`. reftorch has no torch.distributed, so num_replicas and rank are required.
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None or rank is None:
            raise RuntimeError("Requires distributed package to be available")
        if rank >= num_replicas or rank < 0:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.epoch = 0
        self.drop_last = drop_last
        n = len(dataset)
        if drop_last and n % num_replicas != 0:
            # Drop the tail so every replica gets the same number of samples.
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas
        self.shuffle = shuffle
        self.seed = seed

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            generator = torch.Generator().manual_seed(self.seed + self.epoch)
            indices = torch.randperm(n, generator=generator).tolist()
        else:
            indices = list(range(n))
        if not self.drop_last:
            padding = self.total_size - len(indices)
            if padding <= len(indices):
                indices += indices[:padding]
            else:
                indices += (indices * math.ceil(padding / len(indices)))[:padding]
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank:self.total_size:self.num_replicas])

    def __len__(self):
        return self.num_samples

    def set_epoch(self, epoch):
        """Set the epoch, which (with the seed) picks this epoch's shuffle."""
        self.epoch = epoch
