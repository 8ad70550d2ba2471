"""gradcheck / gradgradcheck: compare backward's gradients with central finite differences.

The numerical Jacobian perturbs one input element at a time by +-eps (in place, straight in
the input's storage, so the tensor's version and history are untouched) and differences the
outputs. The analytical Jacobian pulls one-hot cotangents back through the graph, one output
element at a time. Both are laid out as PyTorch prints them: rows are input elements, columns
output elements. The loops run over elements by nature of finite differences; they are test
machinery, not kernels.

Complex numbers are checked as pairs of real numbers, which is what PyTorch's Wirtinger
check amounts to: a complex input element gives two rows (perturb the real part, then the
imaginary part), a complex output element two columns (its real and imaginary part). On
the analytical side, backward with cotangent 1 gives d(Re w)/dx + i d(Re w)/dy and with
cotangent 1j gives d(Im w)/dx + i d(Im w)/dy (PyTorch's convention: the gradient of the
real function Re(conj(g) w)), so the two Jacobians have the same layout.
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


def _host(t):
    """The elements as real numbers: a complex element gives (real, imaginary)."""
    array = np.asarray(t.detach()._host_array())
    if np.iscomplexobj(array):
        return np.stack([array.real, array.imag], axis=-1).astype(np.float64).reshape(-1)
    return np.array(array, dtype=np.float64).reshape(-1)


def _real_size(t):
    """How many real numbers the tensor holds (two per complex element)."""
    return t.numel() * (2 if t.is_complex() else 1)


def _perturbations(t, eps):
    """The steps that move one real number of an element: eps, and i*eps if complex."""
    return (eps, 1j * eps) if t.is_complex() else (eps,)


def _numerical_jacobians(func, inputs, eps):
    """{(input index, output index): ndarray (numel_in, numel_out)} by central differences."""
    with no_grad():
        outputs = _outputs_of(func, inputs)
    jacobians = {}
    for i, x in enumerate(inputs):
        if not (_is_tensor(x) and x.requires_grad):
            continue
        columns = [np.zeros((_real_size(x), _real_size(o))) for o in outputs]
        storage_view = x.detach()._np    # writes go straight to x's storage
        steps = _perturbations(x, eps)
        for j in range(x.numel()):
            index = np.unravel_index(j, x._shape)
            original = storage_view[index].copy()
            for part, step in enumerate(steps):
                storage_view[index] = original + step
                with no_grad():
                    plus = [_host(o) for o in _outputs_of(func, inputs)]
                storage_view[index] = original - step
                with no_grad():
                    minus = [_host(o) for o in _outputs_of(func, inputs)]
                storage_view[index] = original
                for k in range(len(outputs)):
                    columns[k][j * len(steps) + part] = (plus[k] - minus[k]) / (2 * eps)
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
            jacobians[(i, k)] = np.zeros((_real_size(inputs[i]), _real_size(out)))
        if not out.requires_grad:
            continue
        # Cotangent 1 pulls back the real part of an output element, 1j its imaginary part.
        units = (1.0, 1j) if out.is_complex() else (1.0,)
        for m in range(out.numel()):
            for part, unit in enumerate(units):
                one_hot = np.zeros(out.numel(), dtype=type(unit))
                one_hot[m] = unit
                cotangent = reftorch.from_numpy(one_hot.reshape(out._shape)).to(out.dtype)
                grads = autograd_grad((out,), targets, (cotangent,), retain_graph=True,
                                      allow_unused=True)
                for i, g in zip(positions, grads):
                    if g is None:
                        continue
                    if tuple(g._shape) != tuple(inputs[i]._shape):
                        raise GradcheckError(f"Gradient has shape mismatch: expected "
                                             f"{list(inputs[i]._shape)}, got "
                                             f"{list(g._shape)}")
                    jacobians[(i, k)][:, m * len(units) + part] = _host(g)
    return jacobians


def _complex_part(out, ana, num, rtol, atol):
    """PyTorch's prefix naming the part of a complex output that disagrees (it checks the
    imaginary part first, then the real part; complex inputs get no prefix)."""
    if not out.is_complex():
        return ""
    bad = ~np.isclose(ana, num, rtol=rtol, atol=atol)
    part = "imaginary" if bad[:, 1::2].any() else "real"
    return f"While considering the {part} part of complex outputs only, "


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
            return _fail(f"{_complex_part(outputs[k], ana, num, rtol, atol)}"
                         f"Jacobian mismatch for output {k} with respect to input {i},\n"
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

        def random_like(o):
            values = rng.standard_normal(tuple(o._shape))
            if o.is_complex():
                values = values + 1j * rng.standard_normal(tuple(o._shape))
            return reftorch.from_numpy(np.asarray(values)).to(o.dtype).requires_grad_(True)
        grad_outputs = tuple(random_like(o) for o in outputs if _differentiable(o))
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
