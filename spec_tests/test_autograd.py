"""The autograd engine and its surroundings, checked against real PyTorch.

Each test runs the same small program on reftorch and on torch and compares what matters:
gradients, node names and graph structure, and the errors raised (type and message prefix).
"""
from __future__ import annotations

import gc
import json
import warnings
import weakref

import numpy as np
import pytest

import reftorch

torch = pytest.importorskip("torch")

BOTH = [reftorch, torch]


def leaf(module, values, requires_grad=True):
    return module.tensor(values, dtype=module.float64, requires_grad=requires_grad)


def ones(module, n):
    return module.ones(n, dtype=module.float64)


def host(t):
    return np.asarray(t.detach().cpu().numpy() if hasattr(t, "cpu") else t)


def run_both(program):
    """program(module) -> value; returns (reftorch value, torch value)."""
    return program(reftorch), program(torch)


def raised(program, module):
    try:
        program(module)
    except Exception as exc:  # noqa: BLE001 - the caller compares both libraries
        return exc
    return None


def assert_same_error(program, prefix_len=60):
    r, t = raised(program, reftorch), raised(program, torch)
    assert t is not None, "torch did not raise"
    assert r is not None, f"reftorch did not raise; torch raised {t!r}"
    assert type(r).__name__ == type(t).__name__ or isinstance(r, type(t)), (r, t)
    assert str(r)[:prefix_len] == str(t)[:prefix_len], (str(r), str(t))


# --- engine errors ---------------------------------------------------------------------------

def test_inplace_on_saved_tensor_raises():
    def program(m):
        x = leaf(m, [1.0, 2.0, 3.0])
        y = x * 2
        z = y * y          # saves y
        y.add_(1)
        z.backward(ones(m, 3))
    assert_same_error(program, prefix_len=86)


def test_second_backward_without_retain_graph_raises():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        y = x * x
        y.backward(ones(m, 2))
        y.backward(ones(m, 2))
    assert_same_error(program)


def test_retain_graph_allows_second_backward():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        y = x * x
        y.backward(ones(m, 2), retain_graph=True)
        y.backward(ones(m, 2))
        return host(x.grad)
    r, t = run_both(program)
    np.testing.assert_allclose(r, t)


def test_inplace_on_leaf_requiring_grad_raises():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        x.mul_(2)
    assert_same_error(program)


def test_backward_on_non_scalar_without_gradient_raises():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        (x * 2).backward()
    assert_same_error(program)


def test_backward_on_tensor_without_grad_fn_raises():
    def program(m):
        leaf(m, [1.0], requires_grad=False).backward()
    assert_same_error(program)


# --- hooks, retain_grad, grad() --------------------------------------------------------------

def test_tensor_hook_replaces_gradient_and_can_be_removed():
    def program(m):
        x = leaf(m, [1.0, 2.0, 3.0])
        y = x * 3
        seen = []
        handle = y.register_hook(lambda g: seen.append(host(g)) or g * 10)
        (y * 1).backward(ones(m, 3))
        first = host(x.grad)
        handle.remove()
        x.grad = None
        y = x * 3
        (y * 1).backward(ones(m, 3))
        return first, host(x.grad), seen
    (r1, r2, rseen), (t1, t2, tseen) = run_both(program)
    np.testing.assert_allclose(r1, t1)
    np.testing.assert_allclose(r2, t2)
    np.testing.assert_allclose(rseen, tseen)


def test_leaf_hook_sees_and_replaces_gradient():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        x.register_hook(lambda g: g + 1)
        (x * x).backward(ones(m, 2))
        return host(x.grad)
    r, t = run_both(program)
    np.testing.assert_allclose(r, t)


def test_leaf_hook_outlives_the_graph_it_was_registered_under():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        seen = []
        x.register_hook(lambda g: seen.append(host(g)) or g * 2)
        y = x * 5        # the first graph through x: its accumulator dies with it
        del y
        gc.collect()
        (x * 3).backward(ones(m, 2))
        return host(x.grad), seen
    (r, rseen), (t, tseen) = run_both(program)
    np.testing.assert_allclose(r, t)
    np.testing.assert_allclose(rseen, tseen)


# --- memory: graphs are freed by reference counting, as in PyTorch ---------------------------

def _graph_programs(m):
    """Programs that build autograd history, each returning weak references to what must die
    with its last strong reference (the cyclic garbage collector is off meanwhile)."""
    class Exp(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x.exp()
            ctx.save_for_backward(y)
            return y

        @staticmethod
        def backward(ctx, g):
            (y,) = ctx.saved_tensors
            return g * y

    def after_backward():
        x = leaf(m, [[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]])
        m.nn.functional.cross_entropy(x, m.tensor([2, 0])).backward()
        return [weakref.ref(x), weakref.ref(x.grad)]

    def unused_graph():
        x = leaf(m, [1.0, 2.0])
        y = x * 2
        return [weakref.ref(x), weakref.ref(y)]

    def saved_output():            # exp saves its result: result -> node -> result
        x = leaf(m, [1.0, 2.0])
        y = x.exp()
        return [weakref.ref(x), weakref.ref(y)]

    def saved_output_in_place():   # an in-place op's result is the tensor it wrote
        y = leaf(m, [1.0, 2.0]) * 1
        y.sigmoid_()
        return [weakref.ref(y)]

    def retained_grad():
        y = leaf(m, [1.0, 2.0]).exp()
        y.retain_grad()
        return [weakref.ref(y)]

    def custom_function_output():
        y = Exp.apply(leaf(m, [1.0, 2.0]))
        return [weakref.ref(y), weakref.ref(y.grad_fn)]

    return [after_backward, unused_graph, saved_output, saved_output_in_place, retained_grad,
            custom_function_output]


@pytest.mark.parametrize("index", range(6))
def test_graph_memory_is_freed_without_the_cycle_collector(index):
    def program(m):
        gc.disable()
        try:
            refs = _graph_programs(m)[index]()
            return [r() is None for r in refs]
        finally:
            gc.enable()
    r, t = run_both(program)
    assert t == [True] * len(t)  # what PyTorch does
    assert r == t


def test_saved_outputs_keep_their_history_for_double_backward():
    def program(m):
        x = leaf(m, [0.5, -1.0, 2.0])
        y = x.exp()            # saves its output
        z = x.sigmoid() * 1
        z.tanh_()              # in place, saves its output
        (gx,) = m.autograd.grad((y + z).sum(), x, create_graph=True)
        gx.sum().backward()    # differentiates through the saved outputs again
        return host(gx), host(x.grad)
    (rg, rx), (tg, tx) = run_both(program)
    np.testing.assert_allclose(rg, tg, rtol=1e-6)
    np.testing.assert_allclose(rx, tx, rtol=1e-6)


def test_modifying_a_saved_output_is_still_detected():
    def program(m):
        y = leaf(m, [1.0, 2.0]).exp()
        y.add_(1)
        y.sum().backward()
    assert_same_error(program)


def test_retain_grad_on_intermediate():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        y = x * x
        y.retain_grad()
        z = y * 3
        z.backward(ones(m, 2))
        return host(y.grad), y.retains_grad, x.grad is not None
    (rg, rr, rx), (tg, tr, tx) = run_both(program)
    np.testing.assert_allclose(rg, tg)
    assert (rr, rx) == (tr, tx)


def test_intermediate_grad_is_none_without_retain_grad():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        y = x * x
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            (y * 2).backward(ones(m, 2))
            return y.grad is None
    assert run_both(program) == (True, True)


def test_grad_allow_unused():
    def program(m):
        x, unused = leaf(m, [1.0, 2.0]), leaf(m, [5.0])
        y = x * x
        gx, gu = m.autograd.grad(y, (x, unused), ones(m, 2), allow_unused=True)
        return host(gx), gu
    (rx, ru), (tx, tu) = run_both(program)
    np.testing.assert_allclose(rx, tx)
    assert ru is None and tu is None


def test_grad_unused_without_allow_unused_raises():
    def program(m):
        x, unused = leaf(m, [1.0, 2.0]), leaf(m, [5.0])
        m.autograd.grad(x * x, (x, unused), ones(m, 2))
    assert_same_error(program)


def test_create_graph_double_backward():
    def program(m):
        x = leaf(m, [1.0, 2.0, 3.0])
        y = x * x * x
        (g,) = m.autograd.grad(y, x, ones(m, 3), create_graph=True)
        (gg,) = m.autograd.grad(g, x, ones(m, 3))
        return host(g), host(gg), g.requires_grad
    (rg, rgg, rreq), (tg, tgg, treq) = run_both(program)
    np.testing.assert_allclose(rg, tg)
    np.testing.assert_allclose(rgg, tgg)
    assert rreq == treq


# --- graph structure -------------------------------------------------------------------------

def structure(fn, depth=4):
    """The graph below `fn` as nested (name, [children]) with AccumulateGrad leaves."""
    if fn is None:
        return None
    if depth == 0:
        return fn.name()
    return (fn.name(), [structure(child, depth - 1) for child, _ in fn.next_functions])


def test_node_names_and_next_functions_match_torch():
    def program(m):
        x, w = leaf(m, [1.0, 2.0]), leaf(m, [3.0, 4.0])
        c = leaf(m, [0.5, 0.5], requires_grad=False)
        y = (x * w + c) / w - x
        return structure(y.grad_fn)
    r, t = run_both(program)
    assert r == t


def test_view_then_inplace_rewrites_base_history():
    def program(m):
        x = leaf(m, [1.0, 2.0, 3.0, 4.0])
        base = x * 1
        view = base[1:3]
        view.mul_(5)
        base.backward(ones(m, 4))
        return base.grad_fn.name(), host(x.grad), view.grad_fn.name()
    r, t = run_both(program)
    assert r[0] == t[0] and "CopySlices" in r[0]
    assert r[2] == t[2]
    np.testing.assert_allclose(r[1], t[1])


def test_detach_shares_storage_and_stops_gradient():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        y = x * 2
        d = y.detach()
        d.add_(1)          # visible through y (shared storage)
        return d.requires_grad, d.grad_fn is None, host(y)
    (r1, r2, r3), (t1, t2, t3) = run_both(program)
    assert (r1, r2) == (t1, t2)
    np.testing.assert_allclose(r3, t3)


def test_detach_inplace():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        y = x * 2
        y.detach_()
        return y.requires_grad, y.grad_fn is None, y.is_leaf
    assert run_both(program)[0] == run_both(program)[1]


def test_requires_grad_errors():
    def non_leaf(m):
        (leaf(m, [1.0]) * 2).requires_grad_(False)
    assert_same_error(non_leaf)

    def integer(m):
        m.tensor([1, 2]).requires_grad_()
    assert_same_error(integer)


def test_data_is_detached_alias():
    def program(m):
        x = leaf(m, [1.0, 2.0])
        d = x.data
        d.mul_(3)
        return d.requires_grad, host(x)
    (r1, r2), (t1, t2) = run_both(program)
    assert r1 == t1
    np.testing.assert_allclose(r2, t2)


# --- grad mode -------------------------------------------------------------------------------

def test_grad_mode_decorators_and_context_managers():
    def program(m):
        x = leaf(m, [1.0])

        @m.no_grad()
        def off():
            return (x * 2).requires_grad

        @m.enable_grad()
        def on():
            return (x * 2).requires_grad

        @m.set_grad_enabled(False)
        def off2():
            return (x * 2).requires_grad

        with m.no_grad():
            inner = on()
        with m.set_grad_enabled(False):
            ctx = (x * 2).requires_grad
        return off(), inner, off2(), ctx, m.is_grad_enabled()
    r, t = run_both(program)
    assert r == t


# --- custom Function -------------------------------------------------------------------------

def make_functions(m):
    class Cube(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            ctx.scale = scale
            return x * x * x * scale

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 3 * x * x * ctx.scale, None

    class Split(m.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.mark_non_differentiable  # attribute exists
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, ga, gb):
            return ga * 2 + gb * 3

    class Square(m.autograd.Function):       # PyTorch 2 style with setup_context
        @staticmethod
        def forward(x):
            return x * x

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 2 * x

    class WrongCount(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            return x * y

        @staticmethod
        def backward(ctx, grad):
            return grad

    class Doubler(m.autograd.Function):      # in-place with mark_dirty
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, grad):
            return grad * 2

    class NeedsGrad(m.autograd.Function):
        @staticmethod
        def forward(ctx, x, y):
            ctx.flags = ctx.needs_input_grad
            ctx.set_materialize_grads(True)
            return x * 1, y * 1

        @staticmethod
        def backward(ctx, ga, gb):
            return ga, gb     # gb materialized as zeros although unused

    return dict(Cube=Cube, Split=Split, Square=Square, WrongCount=WrongCount, Doubler=Doubler,
                NeedsGrad=NeedsGrad)


def test_custom_function_gradients_and_node_name():
    def program(m):
        f = make_functions(m)
        x = leaf(m, [1.0, 2.0, 3.0])
        y = f["Cube"].apply(x, 2.0)
        z = f["Square"].apply(y) + y        # composes with built-in ops
        z.backward(ones(m, 3))
        a, b = f["Split"].apply(x)
        g = m.autograd.grad((a, b), x, (ones(m, 3), ones(m, 3)))[0]
        return (y.grad_fn.name(), structure(z.grad_fn), host(x.grad), host(g))
    r, t = run_both(program)
    assert r[0] == t[0] == "CubeBackward"
    assert r[1] == t[1]
    np.testing.assert_allclose(r[2], t[2])
    np.testing.assert_allclose(r[3], t[3])


def test_custom_function_wrong_number_of_grads_raises():
    def program(m):
        f = make_functions(m)
        x, y = leaf(m, [1.0]), leaf(m, [2.0])
        f["WrongCount"].apply(x, y).backward()
    assert_same_error(program)


def test_custom_function_saved_tensor_version_checked():
    def program(m):
        f = make_functions(m)
        x = leaf(m, [1.0, 2.0])
        h = x * 1
        y = f["Square"].apply(h)
        h.add_(1)
        y.backward(ones(m, 2))
    r, t = raised(program, reftorch), raised(program, torch)
    assert isinstance(t, RuntimeError) and isinstance(r, RuntimeError)
    prefix = "one of the variables needed for gradient computation has been modified"
    assert str(t).startswith(prefix) and str(r).startswith(prefix)


def test_custom_function_mark_dirty_and_needs_input_grad():
    def program(m):
        f = make_functions(m)
        x = leaf(m, [1.0, 2.0])
        h = x * 1
        out = f["Doubler"].apply(h)
        same = out is h
        out.backward(ones(m, 2))
        a, b = f["NeedsGrad"].apply(x, leaf(m, [1.0], requires_grad=False))
        flags = a.grad_fn.flags
        a.backward(ones(m, 2))       # b unused: its grad is materialized as zeros
        return same, host(x.grad), flags, b.requires_grad
    r, t = run_both(program)
    assert r[0] == t[0] and r[2] == t[2] and r[3] == t[3]
    np.testing.assert_allclose(r[1], t[1])


def test_custom_function_on_leaf_mark_dirty_raises():
    def program(m):
        make_functions(m)["Doubler"].apply(leaf(m, [1.0]))
    r, t = raised(program, reftorch), raised(program, torch)
    assert isinstance(r, RuntimeError) and isinstance(t, RuntimeError)
    assert "leaf Variable that requires grad" in str(r)


def test_once_differentiable_blocks_double_backward():
    def program(m):
        class Exp3(m.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                ctx.save_for_backward(x)
                return x * x * x

            @staticmethod
            @m.autograd.function.once_differentiable
            def backward(ctx, grad):
                (x,) = ctx.saved_tensors
                return grad * 3 * x * x

        x = leaf(m, [1.0, 2.0])
        cotangent = ones(m, 2).requires_grad_()
        (g,) = m.autograd.grad(Exp3.apply(x), x, cotangent, create_graph=True)
        first = host(g)
        g.backward(ones(m, 2))
        return first
    r, t = raised(program, reftorch), raised(program, torch)
    assert isinstance(t, RuntimeError) and isinstance(r, RuntimeError)
    assert "once_differentiable" in str(r) and "once_differentiable" in str(t)


def test_legacy_function_call_raises():
    def program(m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            make_functions(m)["Square"]()(leaf(m, [1.0]))
    assert_same_error(program, prefix_len=40)


# --- anomaly detection -----------------------------------------------------------------------

def test_anomaly_detection_names_node_and_warns_with_forward_trace():
    def program(m):
        x = leaf(m, [0.0, 1.0])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with m.autograd.detect_anomaly():
                y = x / x           # 0/0 in backward -> nan
                try:
                    y.backward(ones(m, 2))
                except RuntimeError as exc:
                    return str(exc), [str(w.message) for w in caught]
        return None, []
    (rmsg, rwarn), (tmsg, twarn) = run_both(program)
    assert tmsg is not None and rmsg == tmsg
    assert any("Traceback of forward call that caused the error" in w for w in rwarn)
    assert any("test_autograd.py" in w for w in rwarn if "Traceback" in w)
    assert any("Traceback of forward call" in w for w in twarn)


def test_set_detect_anomaly_toggles_state():
    from reftorch.autograd.anomaly_mode import is_anomaly_enabled

    def program(m, enabled):
        before = enabled()
        with m.autograd.set_detect_anomaly(True):
            inside = enabled()
        after = enabled()
        m.autograd.set_detect_anomaly(True)        # also a plain call
        called = enabled()
        m.autograd.set_detect_anomaly(False)
        return before, inside, after, called, enabled()
    assert program(reftorch, is_anomaly_enabled) == program(torch, torch.is_anomaly_enabled)


# --- Variable --------------------------------------------------------------------------------

def test_variable_shim():
    def program(m):
        x = m.ones(2, dtype=m.float64)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            v = m.autograd.Variable(x, volatile=True)
        w = m.autograd.Variable(m.ones(2, dtype=m.float64), requires_grad=True)
        return (type(v).__name__, isinstance(x, m.autograd.Variable), w.requires_grad,
                [str(c.message)[:30] for c in caught])
    r, t = run_both(program)
    assert r == t


# --- profiler --------------------------------------------------------------------------------

def test_profiler_records_ops_and_exports_chrome_trace(tmp_path):
    from reftorch.autograd import profiler
    x = leaf(reftorch, [1.0, 2.0, 3.0])
    with profiler.profile(record_shapes=True) as prof:
        with profiler.record_function("my_block"):
            y = x * 2
            y = y * y + 1
    averages = {a.key: a for a in prof.key_averages()}
    assert averages["mul"].count == 2 and averages["add"].count == 1
    assert averages["my_block"].count == 1
    assert averages["my_block"].cpu_time_total >= averages["mul"].cpu_time_total
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=2)
    assert "my_block" in table and table.count("\n") < 12
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    events = json.loads(path.read_text())["traceEvents"]
    names = [e["name"] for e in events]
    assert names.count("mul") == 2 and "my_block" in names
    for e in events:
        assert e["ph"] == "X" and e["dur"] >= 0 and {"ts", "pid", "tid"} <= set(e)
    with profiler.emit_nvtx():
        pass
    # Nothing is recorded once the block has ended.
    _ = x * 3
    assert sum(a.count for a in prof.key_averages() if a.key == "mul") == 2


def test_profiler_matches_torch_event_names():
    def program(m):
        x = leaf(m, [1.0, 2.0], requires_grad=False)
        with m.autograd.profiler.profile() as prof:
            with m.autograd.profiler.record_function("region"):
                x * 2
        return {e.key for e in prof.key_averages()}
    r, t = run_both(program)
    assert "region" in r and "region" in t
    assert "mul" in r and "aten::mul" in t


# --- checkpoint ------------------------------------------------------------------------------

def test_checkpoint_gradients_equal_plain_computation():
    import reftorch.utils.checkpoint as rcp
    import torch.utils.checkpoint as tcp

    def block(x, w):
        return (x * w + 1) * x

    def program(m, cp):
        x, w = leaf(m, [1.0, 2.0, 3.0]), leaf(m, [0.5, -1.0, 2.0])
        y = cp.checkpoint(block, x, w, use_reentrant=False) if cp else block(x, w)
        (y * y).backward(ones(m, 3))
        return host(x.grad), host(w.grad)
    plain = program(reftorch, None)
    for got in (program(reftorch, rcp), program(torch, tcp)):
        np.testing.assert_allclose(got[0], plain[0])
        np.testing.assert_allclose(got[1], plain[1])


def test_checkpoint_sequential_gradients_match_torch():
    import reftorch.utils.checkpoint as rcp
    import torch.utils.checkpoint as tcp

    def program(m, cp):
        x = leaf(m, [1.0, -2.0, 3.0])
        fns = [lambda a: a * a, lambda a: a * 3 + 1, lambda a: a * a, lambda a: a / 2]
        y = cp.checkpoint_sequential(fns, 2, x, use_reentrant=True)
        y.backward(ones(m, 3))
        return host(x.grad)
    np.testing.assert_allclose(program(reftorch, rcp), program(torch, tcp))


@pytest.mark.parametrize("name,args", [("squeeze_", (1,)), ("squeeze_", ()),
                                       ("squeeze_", ((1,),)), ("unsqueeze_", (0,)),
                                       ("t_", ()), ("transpose_", (0, 2)),
                                       ("as_strided_", ((3, 2), (1, 3)))])
def test_inplace_geometry_ops_record_history(name, args):
    """x.squeeze_() and friends change a non-leaf's shape in place: the gradient must flow
    back through the inverse geometry, under PyTorch's in-place node name."""
    def run(lib):
        leaf = lib.arange(6.0, dtype=lib.float64).reshape(3, 1, 2).requires_grad_()
        if name == "t_":
            leaf = lib.arange(6.0, dtype=lib.float64).reshape(3, 2).requires_grad_()
        x = leaf * 1
        y = getattr(x, name)(*args)
        weights = lib.arange(float(y.numel()), dtype=lib.float64).reshape(y.shape)
        (y * weights).sum().backward()
        return type(y.grad_fn).__name__, tuple(y.shape), leaf.grad.numpy().tolist()
    assert run(reftorch) == run(torch)
    with pytest.raises(RuntimeError):
        getattr(reftorch.zeros(3, 1, 2, requires_grad=True), name)(*args)


@pytest.mark.parametrize("view", [
    lambda w: w.expand(3, 4).narrow(-1, 0, 2),
    lambda w: w.expand(3, 4)[1:, ::2],
    lambda w: w.expand(3, 4).select(1, 2),
    lambda w: w.expand(4, 4).diagonal(),
    lambda w: w.expand(3, 4).unfold(1, 2, 1),
    lambda w: w.expand(3, 4)[:, 1:3][1],
], ids=["narrow", "slice", "select", "diagonal", "unfold", "chained"])
def test_views_of_expanded_tensors_get_per_element_gradients(view):
    """An expanded tensor's elements share storage slots: a view of it must still send each
    of its elements' gradient to that element (not to every element sharing the slot)."""
    def run(lib):
        w = lib.arange(4.0, dtype=lib.float64, requires_grad=True)
        y = view(w)
        (y * lib.arange(float(y.numel()), dtype=lib.float64).reshape(y.shape)).sum().backward()
        return w.grad.numpy().tolist()
    assert run(reftorch) == run(torch)


def test_first_gradient_never_aliases_a_tensor_someone_else_holds():
    # The engine hands a fresh gradient to .grad without copying it; anything visible
    # elsewhere (the caller's grad, a gradient two inputs share, one a hook kept, a view)
    # is copied, as PyTorch's AccumulateGrad does.
    a = reftorch.randn(3, requires_grad=True)
    b = reftorch.randn(3, requires_grad=True)
    g = reftorch.ones(3)
    (a + b).backward(g)
    assert a.grad is not g and b.grad is not g and a.grad is not b.grad
    g.add_(5)
    a.grad.add_(1)
    assert g.tolist() == [6.0] * 3 and a.grad.tolist() == [2.0] * 3 and b.grad.tolist() == [1.0] * 3

    kept = []
    c = reftorch.randn(4, requires_grad=True)
    c.register_hook(lambda grad: kept.append(grad))
    (c * 2).sum().backward()
    c.grad.mul_(10)
    assert kept[0].tolist() == [2.0] * 4 and c.grad.tolist() == [20.0] * 4

    d = reftorch.randn(2, 3, requires_grad=True)
    e = d * 1
    e.retain_grad()
    (e * 3).sum().backward()
    d.grad.zero_()
    assert e.grad.tolist() == [[3.0] * 3] * 2

    w = reftorch.randn(3, 2, requires_grad=True)
    (reftorch.ones(4, 3) @ w).sum().backward()   # a fresh gradient: values as PyTorch's
    assert w.grad.tolist() == [[4.0, 4.0]] * 3


@pytest.mark.parametrize("case", ["linear", "transposed weight", "transposed input",
                                  "caller's transposed grad", "permuted 3-d leaf"])
def test_leaf_gradients_take_the_leafs_layout(case):
    # PyTorch's layout contract: .grad has its parameter's strides (the mm backward computes
    # the product transposed for a column-major operand; AccumulateGrad copies into the
    # parameter's layout otherwise), so optimizers walk both in memory order.
    def run(lib):
        lib.manual_seed(0)
        x = lib.randn(5, 4, dtype=lib.float64)
        if case == "linear":
            w = lib.randn(3, 4, dtype=lib.float64, requires_grad=True)
            lib.nn.functional.linear(x, w).sum().backward()
        elif case == "transposed weight":
            w = lib.randn(3, 4, dtype=lib.float64).t().requires_grad_()
            lib.addmm(lib.ones(3, dtype=lib.float64), x, w).pow(2).sum().backward()
        elif case == "transposed input":
            w = lib.randn(4, 5, dtype=lib.float64).t().requires_grad_()
            lib.mm(w, lib.randn(4, 3, dtype=lib.float64)).pow(2).sum().backward()
        elif case == "caller's transposed grad":
            w = lib.randn(4, 3, dtype=lib.float64, requires_grad=True)
            (w * 2).backward(lib.randn(3, 4, dtype=lib.float64).t())
        else:
            w = lib.randn(2, 3, 4, dtype=lib.float64).permute(2, 0, 1).requires_grad_()
            (w * lib.arange(24.0, dtype=lib.float64).reshape(4, 2, 3)).sum().backward()
        return w.stride(), w.grad.stride(), w.grad._base is None, host(w.grad).tolist()
    mine, theirs = run(reftorch), run(torch)
    assert mine[:3] == theirs[:3]
    np.testing.assert_allclose(mine[3], theirs[3], rtol=1e-12)


# --- ops that return several views: one node with an output per piece ------------------------

SPLITS = {
    "split": lambda x: x.split(2),
    "split-dim1": lambda x: x.split(3, 1),
    "split_with_sizes": lambda x: x.split([1, 4, 1]),
    "chunk": lambda x: x.chunk(2, 1),
    "unbind": lambda x: x.unbind(0),
    "unbind-dim1": lambda x: x.unbind(1),
}


@pytest.mark.parametrize("name", list(SPLITS))
def test_split_and_unbind_record_one_node_with_an_output_per_piece(name):
    """Node name, output numbers, saved values and gradients (pieces that get no gradient
    are zeros, as PyTorch's) equal torch's; a second order gradient flows through."""
    def run(lib):
        x = lib.arange(24.0, dtype=lib.float64).reshape(6, 4).requires_grad_()
        pieces = SPLITS[name](x * 1)
        node = pieces[0].grad_fn
        used = pieces[::2]   # every other piece
        loss = sum((p * p).sum() for p in used)
        (grad,) = lib.autograd.grad(loss, x, create_graph=True)
        (grad * grad).sum().backward()
        saved = {key: getattr(node, key, None)
                 for key in ("_saved_dim", "_saved_split_size", "_saved_split_sizes")}
        return (type(node).__name__, [p._output_nr if lib is reftorch else p.output_nr
                                      for p in pieces],
                {k: tuple(v) if isinstance(v, (tuple, list)) else v for k, v in saved.items()},
                grad.detach().numpy().tolist(), x.grad.numpy().tolist())
    assert run(reftorch) == run(torch)


@pytest.mark.parametrize("name", list(SPLITS))
def test_in_place_writes_to_split_pieces_raise_as_in_pytorch(name):
    for lib in BOTH:
        x = lib.randn(6, 4, dtype=lib.float64, requires_grad=True)
        with pytest.raises(RuntimeError) as raised:
            SPLITS[name](x * 1)[1].mul_(2)
        message = str(raised.value)
        assert "is a view and is being modified inplace" in message
        if lib is reftorch:
            expected = message
        else:
            assert expected == message
    with reftorch.no_grad():     # outside autograd the pieces are ordinary views
        y = reftorch.ones(6, 4, dtype=reftorch.float64)
        SPLITS[name](y)[1].mul_(2)
    assert y.sum().item() > 24


def test_narrow_records_slice_backward_as_pytorch():
    for lib in BOTH:
        x = lib.randn(5, 3, requires_grad=True)
        assert type(x.narrow(0, 1, 2).grad_fn).__name__ == "SliceBackward0"


def test_lstm_time_steps_are_pieces_of_one_split():
    """The recurrence takes each step's input gates as a piece of one split (SplitBackward0
    in the graph, whose backward joins the steps' gradients once) and matches torch."""
    reftorch.manual_seed(3)
    torch.manual_seed(3)
    ours, theirs = reftorch.nn.LSTM(5, 7, 2), torch.nn.LSTM(5, 7, 2)
    theirs.load_state_dict({k: torch.from_numpy(v.detach().numpy().copy())
                            for k, v in ours.state_dict().items()})
    x = np.random.default_rng(4).standard_normal((6, 3, 5)).astype(np.float32)
    xr, xt = reftorch.from_numpy(x).requires_grad_(), torch.from_numpy(x).requires_grad_()
    out_r, _ = ours(xr)
    out_t, _ = theirs(xt)
    out_r.sum().backward()
    out_t.sum().backward()
    np.testing.assert_allclose(out_r.detach().numpy(), out_t.detach().numpy(), rtol=1e-5,
                               atol=1e-6)
    np.testing.assert_allclose(xr.grad.numpy(), xt.grad.numpy(), rtol=1e-4, atol=1e-6)
    for (name, p), q in zip(ours.named_parameters(), theirs.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-5,
                                   err_msg=name)
    seen, stack = set(), [out_r.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in seen:
            seen.add(node)
            stack.extend(child for child, _ in node.next_functions)
    assert "SplitBackward0" in {type(n).__name__ for n in seen} or \
        "SplitWithSizesBackward0" in {type(n).__name__ for n in seen}
