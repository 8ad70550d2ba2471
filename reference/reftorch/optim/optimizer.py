"""The `Optimizer` base class: parameter groups, per-parameter state, state dicts and hooks.

Every optimizer keeps
  * `param_groups`: a list of dicts, each with "params" (a list of tensors) and that group's
    options (missing options are filled in from `defaults`);
  * `state`: a dict keyed by parameter tensor holding that parameter's buffers.

`state_dict()` replaces tensors by their position in the flattened parameter list, so a state
saved by PyTorch loads here and back: {"state": {index: {...}}, "param_groups": [{...,
"params": [indices]}]}.

The update rules in the subclasses follow PyTorch's single-tensor (for-loop) implementation,
which is the one PyTorch uses for CPU tensors: the same operations in the same order, so
results agree to the last bits or nearly so.
"""
from __future__ import annotations

import functools
import warnings
from collections import OrderedDict, defaultdict
from copy import deepcopy
from itertools import chain

import reftorch
from reftorch.autograd.graph import RemovableHandle


class _RequiredParameter:
    """Marks an option (such as SGD's old `lr`) that every parameter group must give."""

    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

# Hooks run around every optimizer's step (register_optimizer_step_pre_hook / _post_hook).
_global_step_pre_hooks: "OrderedDict[int, object]" = OrderedDict()
_global_step_post_hooks: "OrderedDict[int, object]" = OrderedDict()


def _register(container, hook, prepend=False):
    handle = RemovableHandle(container, hook)
    handle._key = handle.id
    container[handle.id] = hook
    if prepend:
        container.move_to_end(handle.id, last=False)
    return handle


def register_optimizer_step_pre_hook(hook):
    """Run `hook(optimizer, args, kwargs)` before every optimizer's step."""
    return _register(_global_step_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    """Run `hook(optimizer, args, kwargs)` after every optimizer's step."""
    return _register(_global_step_post_hooks, hook)


def _with_step_hooks(step):
    """Wrap a subclass's `step` so the step pre/post hooks run around it."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        for hook in chain(_global_step_pre_hooks.values(),
                          self._optimizer_step_pre_hooks.values()):
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{step} must return None or a tuple of "
                                       f"(new_args, new_kwargs), but got {result}.")
                args, kwargs = result
        out = step(self, *args, **kwargs)
        for hook in chain(self._optimizer_step_post_hooks.values(),
                          _global_step_post_hooks.values()):
            hook(self, args, kwargs)
        return out
    wrapper._with_step_hooks = True
    return wrapper


def _use_grad_for_differentiable(step):
    """Run `step` with autograd off, unless the optimizer was built with differentiable=True
    (then the update itself is recorded, as in PyTorch)."""
    @functools.wraps(step)
    def wrapper(self, *args, **kwargs):
        with reftorch.set_grad_enabled(self.defaults.get("differentiable", False)):
            return step(self, *args, **kwargs)
    return wrapper


def _scalar_dtype():
    """dtype of the `step` counters: float32, or float64 when that is the default dtype."""
    default = reftorch.get_default_dtype()
    return reftorch.float64 if default is reftorch.float64 else reftorch.float32


def _new_step_counter(value=0.0):
    """A fresh 0-dim `step` tensor, as PyTorch keeps it (a float tensor, not an int)."""
    return reftorch.tensor(float(value), dtype=_scalar_dtype())


def _value(x):
    """Python number of a hyperparameter that may be given as a 1-element tensor."""
    return x.item() if isinstance(x, reftorch.Tensor) else x


def _check_capturable(group, params):
    """capturable=True needs accelerator tensors; PyTorch refuses it for CPU ones."""
    if group.get("capturable", False) and any(p.device.type == "cpu" for p in params):
        raise AssertionError("If capturable=True, params and state_steps must be on "
                             "supported devices: ['cuda', 'xpu', 'hpu', 'privateuseone', "
                             "'xla'].")


def _check_lr(lr):
    if isinstance(lr, reftorch.Tensor) and lr.numel() != 1:
        raise ValueError("Tensor lr must be 1-element")
    if not 0.0 <= lr:
        raise ValueError(f"Invalid learning rate: {lr}")


def _maybe_negated(grad, maximize):
    return -grad if maximize else grad


def _sparse_check(p, name):
    if getattr(p.grad, "is_sparse", False):
        raise RuntimeError(f"{name} does not support sparse gradients")


def _real_view(t):
    """Complex tensors are updated through their real view (each component independently),
    as PyTorch does with view_as_real."""
    return reftorch.view_as_real(t) if t.is_complex() else t


class Optimizer:
    """Base class for all optimizers.

    Args:
        params: an iterable of tensors, of (name, tensor) pairs, or of dicts (parameter
            groups, each with a "params" entry and optional per-group options).
        defaults: default values of the options, used where a group does not set them.
    """

    def __init__(self, params, defaults):
        self.defaults = defaults
        self._optimizer_step_pre_hooks = OrderedDict()
        self._optimizer_step_post_hooks = OrderedDict()
        self._optimizer_state_dict_pre_hooks = OrderedDict()
        self._optimizer_state_dict_post_hooks = OrderedDict()
        self._optimizer_load_state_dict_pre_hooks = OrderedDict()
        self._optimizer_load_state_dict_post_hooks = OrderedDict()

        if isinstance(params, reftorch.Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + params.type())
        self.state = defaultdict(dict)
        self.param_groups = []
        param_groups = list(params)
        if len(param_groups) == 0:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(param_groups[0], dict):
            param_groups = [{"params": param_groups}]
        for param_group in param_groups:
            self.add_param_group(param_group)

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_with_step_hooks", False):
            cls.step = _with_step_hooks(step)

    # -- pickling (PyTorch pickles only these three) ---------------------------------------
    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state,
                "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)
        for name in ("_optimizer_step_pre_hooks", "_optimizer_step_post_hooks",
                     "_optimizer_state_dict_pre_hooks", "_optimizer_state_dict_post_hooks",
                     "_optimizer_load_state_dict_pre_hooks",
                     "_optimizer_load_state_dict_post_hooks"):
            self.__dict__.setdefault(name, OrderedDict())
        self.defaults.setdefault("differentiable", False)

    def __repr__(self):
        text = self.__class__.__name__ + " ("
        for i, group in enumerate(self.param_groups):
            text += f"\nParameter Group {i}\n"
            for key in sorted(group.keys()):
                if key != "params":
                    text += f"    {key}: {group[key]}\n"
        return text + ")"

    # -- parameter groups ------------------------------------------------------------------
    def add_param_group(self, param_group):
        """Add a parameter group (a dict with "params" and optional options)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        params = param_group["params"]
        if isinstance(params, reftorch.Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)

        # (name, tensor) pairs, as from named_parameters(): keep the names alongside.
        names = [p[0] for p in params if isinstance(p, tuple)]
        tensors = [p[1] if isinstance(p, tuple) else p for p in params]
        param_group["params"] = tensors
        if names:
            if len(names) != len(tensors):
                raise ValueError("all optimizer params should be with/without names. Some "
                                 "param names are missing")
            param_group["param_names"] = names

        for p in tensors:
            if not isinstance(p, reftorch.Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params "
                                "is " + _typename(p))
            if not self.defaults.get("differentiable", None) and not (p.is_leaf
                                                                      or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")

        for name, default in self.defaults.items():
            if default is required and name not in param_group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            param_group.setdefault(name, default)

        if len(tensors) != len(set(tensors)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; "
                          "in future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)

        existing = set()
        for group in self.param_groups:
            existing.update(group["params"])
            if ("param_names" in param_group) != ("param_names" in group):
                which = "with names" if "param_names" in param_group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        if not existing.isdisjoint(tensors):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(param_group)

    # -- gradients -------------------------------------------------------------------------
    def zero_grad(self, set_to_none=True):
        """Reset the gradients: to None (default) or to zeros."""
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is None:
                    continue
                if set_to_none:
                    p.grad = None
                else:
                    if p.grad.grad_fn is not None:
                        p.grad.detach_()
                    else:
                        p.grad.requires_grad_(False)
                    p.grad.zero_()

    def step(self, closure=None):
        """Perform one optimization step (each optimizer defines it)."""
        raise NotImplementedError

    # -- state dicts -----------------------------------------------------------------------
    def state_dict(self):
        """{"state": {index: buffers}, "param_groups": [options with "params": indices]}.

        Parameters are numbered in order over all groups; the tensors themselves are not
        saved, and the buffers are the live tensors (not copies), as in PyTorch.
        """
        for hook in self._optimizer_state_dict_pre_hooks.values():
            hook(self)
        index_of = {}
        next_index = 0

        def pack(group):
            nonlocal next_index
            packed = {k: v for k, v in group.items() if k != "params"}
            for i, p in enumerate(group["params"], next_index):
                index_of.setdefault(id(p), i)
            packed["params"] = [index_of[id(p)] for p in group["params"]]
            next_index += len(packed["params"])
            return packed

        param_groups = [pack(g) for g in self.param_groups]
        state = {(index_of[id(k)] if isinstance(k, reftorch.Tensor) else k): v
                 for k, v in self.state.items()}
        state_dict = {"state": state, "param_groups": param_groups}
        for hook in self._optimizer_state_dict_post_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict):
        """Load a state saved by `state_dict()` (this library's or PyTorch's, with tensors
        converted). Buffers are cast to their parameter's dtype; `step` counters are kept."""
        state_dict = state_dict.copy()
        for hook in self._optimizer_load_state_dict_pre_hooks.values():
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")

        param_of = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                            chain.from_iterable(g["params"] for g in groups)))
        state = defaultdict(dict)
        for key, value in state_dict["state"].items():
            if key in param_of:
                param = param_of[key]
                state[param] = _cast_state(param, value)
            else:
                state[key] = value

        def update_group(group, new_group):
            new_group["params"] = group["params"]
            if "param_names" in group and "param_names" not in new_group:
                new_group["param_names"] = group["param_names"]
            return new_group

        param_groups = [update_group(g, s) for g, s in zip(groups, saved_groups)]
        self.__setstate__({"state": state, "param_groups": param_groups})
        for hook in self._optimizer_load_state_dict_post_hooks.values():
            hook(self)

    # -- hooks -----------------------------------------------------------------------------
    def register_step_pre_hook(self, hook):
        """`hook(optimizer, args, kwargs)` runs before step; may return new (args, kwargs)."""
        return _register(self._optimizer_step_pre_hooks, hook)

    def register_step_post_hook(self, hook):
        """`hook(optimizer, args, kwargs)` runs after step."""
        return _register(self._optimizer_step_post_hooks, hook)

    def register_state_dict_pre_hook(self, hook, prepend=False):
        return _register(self._optimizer_state_dict_pre_hooks, hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend=False):
        return _register(self._optimizer_state_dict_post_hooks, hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend=False):
        return _register(self._optimizer_load_state_dict_pre_hooks, hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend=False):
        return _register(self._optimizer_load_state_dict_post_hooks, hook, prepend)


def _typename(obj):
    if isinstance(obj, reftorch.Tensor):
        return obj.type()
    module = type(obj).__module__
    name = type(obj).__qualname__
    return name if module in ("builtins", None) else f"{module}.{name}"


def _cast_state(param, value, key=None):
    """Deep copy of a saved per-parameter state: tensors go to the parameter's device (and
    its dtype when it is floating), except the `step` counter which keeps its own dtype."""
    if isinstance(value, reftorch.Tensor):
        if key == "step":
            return value
        if param.is_floating_point():
            return value.to(dtype=param.dtype, device=param.device)
        return value.to(device=param.device)
    if isinstance(value, dict):
        return {k: _cast_state(param, v, k) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return type(value)(_cast_state(param, v) for v in value)
    return value


def _evaluate_closure(closure):
    """The loss from `closure` (run with autograd on, as it usually calls backward)."""
    if closure is None:
        return None
    with reftorch.enable_grad():
        return closure()


def _params_with_grad(group):
    """The group's parameters that have a gradient (the others are skipped by every step)."""
    return [p for p in group["params"] if p.grad is not None]
