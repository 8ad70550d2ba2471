"""gradcheck / gradgradcheck: compare backward's gradients with central finite differences.

The numerical Jacobian perturbs one input element at a time by +-eps (in place, straight in
the input's storage, so the tensor's version and history are untouched) and differences the
outputs. The analytical Jacobian pulls one-hot cotangents back through the graph, one output
element at a time. Both are laid out as PyTorch prints them: rows are input elements, columns
output elements. The loops run over elements by nature of finite differences; they are test
machinery, not kernels.
"""
from __future__ import annotations

import warnings

import numpy as np

from .grad_mode import enable_grad, no_grad

__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]


class GradcheckError(RuntimeError):
    """Raised by gradcheck / gradgradcheck when a check fails."""


def _is_tensor(x):
    return hasattr(x, "_shape") and hasattr(x, "requires_grad")


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _differentiable(t):
    return t.dtype.is_floating_point or t.dtype.is_complex


def _outputs_of(func, inputs):
    result = func(*inputs)
    return tuple(o for o in _as_tuple(result) if _is_tensor(o))


def _check_inputs(inputs):
    needing = [t for t in inputs if _is_tensor(t) and t.requires_grad]
    if not needing:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, "
                         "but none of them have requires_grad=True.")
    for i, t in enumerate(inputs):
        if _is_tensor(t) and t.requires_grad and t.dtype.scalar_name not in ("Double",
                                                                            "ComplexDouble"):
            warnings.warn(f"Input #{i} requires gradient and is not a double precision floating "
                          f"point or complex. This check will likely fail if all the inputs are "
                          f"not of double precision floating point or complex. ", UserWarning,
                          stacklevel=3)
    for t in needing:
        if t.is_complex():
            raise NotImplementedError("reftorch's gradcheck does not handle complex inputs yet")


def _host(t):
    return np.array(t.detach()._host_array(), dtype=np.float64).reshape(-1)


def _numerical_jacobians(func, inputs, eps):
    """{(input index, output index): ndarray (numel_in, numel_out)} by central differences."""
    with no_grad():
        outputs = _outputs_of(func, inputs)
    jacobians = {}
    for i, x in enumerate(inputs):
        if not (_is_tensor(x) and x.requires_grad):
            continue
        columns = [np.zeros((x.numel(), o.numel())) for o in outputs]
        storage_view = x.detach()._np    # writes go straight to x's storage
        for j in range(x.numel()):
            index = np.unravel_index(j, x._shape)
            original = storage_view[index].copy()
            storage_view[index] = original + eps
            with no_grad():
                plus = [_host(o) for o in _outputs_of(func, inputs)]
            storage_view[index] = original - eps
            with no_grad():
                minus = [_host(o) for o in _outputs_of(func, inputs)]
            storage_view[index] = original
            for k in range(len(outputs)):
                columns[k][j] = (plus[k] - minus[k]) / (2 * eps)
        for k in range(len(outputs)):
            jacobians[(i, k)] = columns[k]
    return jacobians, outputs


def _analytical_jacobians(outputs, inputs):
    """{(input index, output index): ndarray} by pulling back one-hot cotangents."""
    import reftorch
    from .engine import grad as autograd_grad
    positions = [i for i, x in enumerate(inputs) if _is_tensor(x) and x.requires_grad]
    targets = [inputs[i] for i in positions]
    jacobians = {}
    for k, out in enumerate(outputs):
        for i in positions:
            jacobians[(i, k)] = np.zeros((inputs[i].numel(), out.numel()))
        if not out.requires_grad:
            continue
        for m in range(out.numel()):
            one_hot = np.zeros(out.numel())
            one_hot[m] = 1.0
            cotangent = reftorch.from_numpy(one_hot.reshape(out._shape)).to(out.dtype)
            grads = autograd_grad((out,), targets, (cotangent,), retain_graph=True,
                                  allow_unused=True)
            for i, g in zip(positions, grads):
                if g is None:
                    continue
                if tuple(g._shape) != tuple(inputs[i]._shape):
                    raise GradcheckError(f"Gradient has shape mismatch: expected "
                                         f"{list(inputs[i]._shape)}, got {list(g._shape)}")
                jacobians[(i, k)][:, m] = _host(g)
    return jacobians


def _fail(message, raise_exception):
    if raise_exception:
        raise GradcheckError(message)
    return False


def _as_tensor(array):
    import reftorch
    return reftorch.from_numpy(np.ascontiguousarray(array))


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False,
              check_forward_ad=False, check_backward_ad=True, fast_mode=False, masked=None):
    """True if backward's Jacobians match finite differences (else raise / return False).

    `fast_mode`, the batched and forward-AD checks are accepted and ignored: reftorch always
    runs the full (slow) comparison and has no forward-mode AD.
    """
    inputs = _as_tuple(inputs)
    _check_inputs(inputs)
    numerical, outputs = _numerical_jacobians(func, inputs, eps)
    if not check_backward_ad:
        return True

    for out in outputs:
        if out.is_complex():
            raise NotImplementedError("reftorch's gradcheck does not handle complex outputs "
                                      "yet")
    with enable_grad():
        outputs = _outputs_of(func, inputs)
        analytical = _analytical_jacobians(outputs, inputs)
        repeated = _analytical_jacobians(outputs, inputs)

    # Outputs that do not require grad must not depend on the inputs at all.
    for (i, k), jac in numerical.items():
        if not outputs[k].requires_grad and _differentiable(outputs[k]) and \
                np.any(np.abs(jac) > nondet_tol + atol):
            return _fail("Numerical gradient for function expected to be zero",
                         raise_exception)

    for (i, k), num in numerical.items():
        if not outputs[k].requires_grad:
            continue
        ana = analytical[(i, k)]
        if not np.allclose(ana, num, rtol=rtol, atol=atol, equal_nan=False):
            return _fail(f"Jacobian mismatch for output {k} with respect to input {i},\n"
                         f"numerical:{_as_tensor(num)}\nanalytical:{_as_tensor(ana)}\n",
                         raise_exception)
        if np.any(np.abs(repeated[(i, k)] - ana) > nondet_tol):
            return _fail(f"Backward is not reentrant, i.e., running backward with same input "
                         f"and grad_output multiple times gives different values, although "
                         f"analytical gradient matches numerical gradient.The tolerance for "
                         f"nondeterminism was {nondet_tol}.", raise_exception)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """gradcheck of the gradient itself: checks the derivative of the backward pass.

    Without `grad_outputs`, random cotangents (seeded, requiring grad) are made for every
    differentiable output, so the check also covers derivatives with respect to them.
    """
    import reftorch
    from .engine import grad as autograd_grad
    inputs = _as_tuple(inputs)
    _check_inputs(inputs)
    if grad_outputs is None:
        with no_grad():
            outputs = _outputs_of(func, inputs)
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            reftorch.from_numpy(rng.standard_normal(tuple(o._shape))).to(o.dtype)
            .requires_grad_(True)
            for o in outputs if _differentiable(o))
    grad_outputs = _as_tuple(grad_outputs)
    count = len(inputs)

    def first_derivative(*all_inputs):
        ins, cotangents = all_inputs[:count], all_inputs[count:]
        outs = [o for o in _outputs_of(func, ins) if _differentiable(o)]
        pairs = [(o, c) for o, c in zip(outs, cotangents) if o.requires_grad]
        targets = [x for x in ins if _is_tensor(x) and x.requires_grad]
        grads = autograd_grad([o for o, _ in pairs], targets, [c for _, c in pairs],
                              create_graph=True, allow_unused=True)
        return tuple(g for g in grads if g is not None)

    if not check_rev_over_rev:
        return True
    return gradcheck(first_derivative, inputs + grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad)
