"""reftorch.optim: optimizers and learning-rate schedulers (torch.optim).

The update rules follow PyTorch's single-tensor implementations (the ones PyTorch runs for
CPU tensors), written with reftorch tensor ops under no_grad; state dicts have PyTorch's
layout so optimizer states move between the two libraries.
"""
from . import lr_scheduler
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import (Optimizer, register_optimizer_step_post_hook,
                        register_optimizer_step_pre_hook)
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from .sparse_adam import SparseAdam

__all__ = ["ASGD", "Adadelta", "Adagrad", "Adam", "AdamW", "Adamax", "LBFGS", "NAdam",
           "Optimizer", "RAdam", "RMSprop", "Rprop", "SGD", "SparseAdam", "lr_scheduler",
           "register_optimizer_step_post_hook", "register_optimizer_step_pre_hook"]
