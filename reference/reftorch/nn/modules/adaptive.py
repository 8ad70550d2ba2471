"""torch.nn modules: AdaptiveLogSoftmaxWithLoss (Grave et al., "Efficient softmax
approximation for GPUs"): frequent classes are scored by a head softmax, rarer ones by
clusters whose total probability is one extra entry of the head."""
from __future__ import annotations

from collections import namedtuple

import numpy as np

from ... import _ops
from .. import functional as F
from .container import ModuleList, Sequential
from .linear import Linear
from .module import Module

__all__ = ["AdaptiveLogSoftmaxWithLoss"]

_ASMoutput = namedtuple("_ASMoutput", ["output", "loss"])


def _int64(values, device):
    return _ops.creation.tensor(np.asarray(values, dtype=np.int64), device=device)


class AdaptiveLogSoftmaxWithLoss(Module):
    """Classes [0, cutoffs[0]) form the shortlist, scored directly by the head; cluster i
    holds classes [cutoffs[i], cutoffs[i+1]) and is scored by a two-layer projection of width
    in_features // div_value**(i+1). log p(class in cluster i) =
    log p_head(cluster i) + log p_cluster_i(class)."""

    def __init__(self, in_features, n_classes, cutoffs, div_value=4.0, head_bias=False,
                 device=None, dtype=None):
        super().__init__()
        cutoffs = list(cutoffs)
        if len(cutoffs) == 0:
            raise ValueError("cutoffs should be a sequence of length larger than 0")
        if (cutoffs != sorted(cutoffs) or min(cutoffs) <= 0 or max(cutoffs) > n_classes - 1
                or len(set(cutoffs)) != len(cutoffs) or any(int(c) != c for c in cutoffs)):
            raise ValueError("cutoffs should be a sequence of unique, positive integers sorted "
                             "in an increasing order, where each value is between 1 and "
                             "n_classes-1")
        self.in_features = in_features
        self.n_classes = n_classes
        self.cutoffs = cutoffs + [n_classes]
        self.div_value = div_value
        self.head_bias = head_bias
        self.shortlist_size = self.cutoffs[0]
        self.n_clusters = len(self.cutoffs) - 1
        self.head_size = self.shortlist_size + self.n_clusters
        factory = {"device": device, "dtype": dtype}
        self.head = Linear(in_features, self.head_size, bias=head_bias, **factory)
        self.tail = ModuleList()
        for i in range(self.n_clusters):
            hidden = int(in_features // (div_value ** (i + 1)))
            size = self.cutoffs[i + 1] - self.cutoffs[i]
            self.tail.append(Sequential(Linear(in_features, hidden, bias=False, **factory),
                                        Linear(hidden, size, bias=False, **factory)))

    def reset_parameters(self):
        self.head.reset_parameters()
        for to_hidden, to_output in self.tail:
            to_hidden.reset_parameters()
            to_output.reset_parameters()

    def forward(self, input_, target_):
        """Returns (output, loss): output[i] = log p(target[i] | input[i]) and
        loss = mean(-output)."""
        self._check_forward(input_, target_)
        is_batched = target_.dim() > 0
        input = input_ if is_batched else input_.unsqueeze(0)
        target = target_ if is_batched else target_.unsqueeze(0)
        targets = target._np.astype(np.int64)
        if np.any((targets < 0) | (targets >= self.n_classes)):
            raise RuntimeError(f"Target values should be in [0, {self.n_classes - 1}], but "
                               f"values in range [{targets.min()}, {targets.max()}] were found. ")
        device = input.device
        output = _ops.creation.zeros((len(targets),), dtype=input.dtype, device=device)
        # Which head entry each row reads: its own class in the shortlist, else its cluster.
        head_index = targets.copy()
        for i in range(1, len(self.cutoffs)):
            low, high = self.cutoffs[i - 1], self.cutoffs[i]
            rows = np.nonzero((targets >= low) & (targets < high))[0]
            if rows.size == 0:
                continue
            head_index[rows] = self.shortlist_size + i - 1
            rows_t = _int64(rows, device)
            cluster_output = self.tail[i - 1](input.index_select(0, rows_t))
            relative = _int64(targets[rows] - low, device).unsqueeze(1)
            local = F.log_softmax(cluster_output, dim=1).gather(1, relative).squeeze(1)
            output = output.index_add(0, rows_t, local)
        head_logprob = F.log_softmax(self.head(input), dim=1)
        output = output + head_logprob.gather(1, _int64(head_index, device).unsqueeze(1)).squeeze(1)
        loss = (-output).mean()
        if not is_batched:
            output = output.squeeze(0)
        return _ASMoutput(output, loss)

    @staticmethod
    def _check_forward(input_, target_):
        if target_.dim() == 1:
            if input_.size(0) != target_.size(0):
                raise RuntimeError("Input and target should have the same size in the batch "
                                   "dimension.")
            if input_.dim() != 2:
                raise RuntimeError(f"1D target tensor expects 2D input tensors, but found "
                                   f"inputs with size {input_.size()}")
        elif target_.dim() == 0:
            if input_.dim() != 1:
                raise RuntimeError(f"0D target tensor expects 1D input tensors, but found "
                                   f"inputs with size {input_.size()}")
        else:
            raise RuntimeError("0D or 1D target tensor expected, multi-target not supported")

    def _get_full_log_prob(self, input, head_output):
        head_logprob = F.log_softmax(head_output, dim=1)
        pieces = [head_logprob[:, :self.shortlist_size]]
        for i in range(self.n_clusters):
            cluster_logprob = F.log_softmax(self.tail[i](input), dim=1)
            pieces.append(cluster_logprob
                          + head_logprob[:, self.shortlist_size + i].unsqueeze(1))
        return _ops.joining.cat(pieces, 1)

    def log_prob(self, input):
        """log p(class | input) for every class: (N, n_classes)."""
        return self._get_full_log_prob(input, self.head(input))

    def predict(self, input):
        """The most likely class per row; the clusters are only evaluated for rows whose
        head prediction is a cluster."""
        head_output = self.head(input)
        output = head_output.argmax(dim=1)
        not_in_shortlist = output >= self.shortlist_size
        if not bool(not_in_shortlist.any()):
            return output
        if bool(not_in_shortlist.all()):
            return self._get_full_log_prob(input, head_output).argmax(dim=1)
        log_prob = self._get_full_log_prob(input[not_in_shortlist],
                                           head_output[not_in_shortlist])
        output[not_in_shortlist] = log_prob.argmax(dim=1)
        return output
