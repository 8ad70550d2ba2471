"""torch.nn.functional attention: scaled_dot_product_attention and the computation behind
nn.MultiheadAttention (multi_head_attention_forward). Both are compositions of reftorch ops
(matmul, softmax, dropout, linear), so autograd needs no rows of its own.

Mask conventions differ between the two, as in PyTorch:
- scaled_dot_product_attention: a bool mask says where attention is ALLOWED (True = attend);
  a float mask is added to the scores.
- MultiheadAttention / multi_head_attention_forward: a bool mask says what is MASKED OUT
  (True = ignore); bool masks become float masks with -inf at the True positions.
"""
from __future__ import annotations

import math
import warnings

from ... import _ops
from ... import _dtype as D
# Imported by name: the functional package re-exports functions called `linear`, `dropout`,
# `pad`, which shadow the section modules of the same name as package attributes.
from .activation import softmax as _softmax
from .dropout import dropout as _dropout
from .linear import linear as _linear
from .padding import pad as _pad

__all__ = ["scaled_dot_product_attention", "multi_head_attention_forward"]

_NEG_INF = float("-inf")


def _cat(tensors, dim=0):
    return _ops.joining.cat(tensors, dim)


# ----------------------------------------------------------------------------------------------
# scaled_dot_product_attention

def _short(dtype):
    return str(dtype).replace("torch.", "")


def _sdpa_check(query, key, value):
    if not (query.dtype == key.dtype == value.dtype):
        raise RuntimeError(f"Expected query, key, and value to have the same dtype, but got "
                           f"query.dtype: {_short(query.dtype)} key.dtype: "
                           f"{_short(key.dtype)} and value.dtype: {_short(value.dtype)} "
                           f"instead.")
    if query.dim() < 2 or key.dim() < 2 or value.dim() < 2:
        raise RuntimeError(f"Expected query, key, and value to all be  at least 2 dimensional, "
                           f"but got query.dim: {query.dim()} key.dim: {key.dim()} and "
                           f"value.dim: {value.dim()} instead.")
    if not query.dtype.is_floating_point:
        raise RuntimeError(f"expected scalar type Float but found "
                           f"{query.dtype.scalar_name}")
    if query.size(-1) != key.size(-1):
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{key.size(-1)}] but got: [{query.size(-1)}].")


def _repeat_heads_for_gqa(query, key, value):
    """Grouped-query attention: each key/value head serves several query heads."""
    heads_q, heads_kv = query.size(-3), key.size(-3)
    if heads_q % heads_kv != 0 or heads_q % value.size(-3) != 0:
        raise RuntimeError(f"Number of heads in key and value must divide the number of heads "
                           f"in query, got {heads_q} query heads and {heads_kv} key heads")
    key = key.repeat_interleave(heads_q // heads_kv, -3)
    value = value.repeat_interleave(heads_q // value.size(-3), -3)
    return key, value


def _attention_bias(attn_mask, is_causal, target_len, source_len, like):
    """The additive (L, S)-broadcastable bias: -inf where attention is not allowed."""
    allowed = None
    bias = None
    if is_causal:
        ones = _ops.creation.ones((target_len, source_len), dtype=D.bool, device=like.device)
        allowed = ones.tril()
    if attn_mask is not None:
        if attn_mask.dtype == D.bool:
            allowed = attn_mask if allowed is None else allowed.logical_and(attn_mask)
        else:
            bias = attn_mask.to(like.dtype)
    if allowed is not None:
        blocked = _ops.creation.zeros(allowed.shape, dtype=like.dtype, device=like.device)
        blocked = blocked.masked_fill(allowed.logical_not(), _NEG_INF)
        bias = blocked if bias is None else bias + blocked
    return bias


def _safe_softmax(scores):
    """Softmax over the last dim, giving 0 (not NaN) for rows where everything is masked,
    as PyTorch's CPU attention does. Those rows are zeroed before the softmax too, so the
    backward pass sees no NaN either."""
    fully_masked = (scores == _NEG_INF).all(-1, keepdim=True)
    weights = _softmax(scores.masked_fill(fully_masked, 0.0), -1)
    return weights.masked_fill(fully_masked, 0.0)


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0,
                                 is_causal=False, scale=None, enable_gqa=False):
    """softmax(Q Kᵀ · scale + bias) V over the last two dims, with dropout on the weights.

    scale defaults to 1/sqrt(E) (E = query.size(-1)); a bool attn_mask keeps the True
    positions; is_causal keeps key positions j <= i (top-left aligned, combined with a bool
    mask if both are given); leading (batch, head) dims broadcast."""
    _sdpa_check(query, key, value)
    if enable_gqa:
        key, value = _repeat_heads_for_gqa(query, key, value)
    scale_factor = 1.0 / math.sqrt(query.size(-1)) if scale is None else scale
    scores = query.matmul(key.transpose(-2, -1)) * scale_factor
    bias = _attention_bias(attn_mask, is_causal, query.size(-2), key.size(-2), query)
    if bias is not None:
        scores = scores + bias
    weights = _safe_softmax(scores)
    if dropout_p > 0.0:
        weights = _dropout(weights, dropout_p, True)
    return weights.matmul(value)


# ----------------------------------------------------------------------------------------------
# multi_head_attention_forward

def _none_or_dtype(input):
    return None if input is None else input.dtype


def _canonical_mask(mask, mask_name, other_type, other_name, target_type, check_other=True):
    """Bool masks (True = masked out) become float masks with -inf; floats pass through."""
    if mask is None:
        return None
    if mask.dtype != D.bool and not mask.dtype.is_floating_point:
        raise AssertionError(f"only bool and floating types of {mask_name} are supported")
    if check_other and other_type is not None and mask.dtype != other_type:
        warnings.warn(f"Support for mismatched {mask_name} and {other_name} is deprecated. "
                      f"Use same type for both instead.")
    if not mask.dtype.is_floating_point:
        zeros = _ops.creation.zeros(mask.shape, dtype=target_type, device=mask.device)
        mask = zeros.masked_fill(mask, _NEG_INF)
    return mask


def _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads):
    """Returns whether the input is batched; AssertionError (as PyTorch) on bad ranks."""
    if query.dim() == 3:
        if key.dim() != 3 or value.dim() != 3:
            raise AssertionError(f"For batched (3-D) `query`, expected `key` and `value` to be "
                                 f"3-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 f"respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 2:
            raise AssertionError(f"For batched (3-D) `query`, expected `key_padding_mask` to "
                                 f"be `None` or 2-D but found {key_padding_mask.dim()}-D "
                                 f"tensor instead")
        if attn_mask is not None and attn_mask.dim() not in (2, 3):
            raise AssertionError(f"For batched (3-D) `query`, expected `attn_mask` to be "
                                 f"`None`, 2-D or 3-D but found {attn_mask.dim()}-D tensor "
                                 f"instead")
        return True
    if query.dim() == 2:
        if key.dim() != 2 or value.dim() != 2:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key` and `value` to "
                                 f"be 2-D but found {key.dim()}-D and {value.dim()}-D tensors "
                                 f"respectively")
        if key_padding_mask is not None and key_padding_mask.dim() != 1:
            raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to "
                                 f"be `None` or 1-D but found {key_padding_mask.dim()}-D "
                                 f"tensor instead")
        if attn_mask is not None:
            if attn_mask.dim() not in (2, 3):
                raise AssertionError(f"For unbatched (2-D) `query`, expected `attn_mask` to be "
                                     f"`None`, 2-D or 3-D but found {attn_mask.dim()}-D tensor "
                                     f"instead")
            expected = (num_heads, query.shape[0], key.shape[0])
            if attn_mask.dim() == 3 and tuple(attn_mask.shape) != expected:
                raise AssertionError(f"Expected `attn_mask` shape to be {expected} but got "
                                     f"{attn_mask.shape}")
        return False
    raise AssertionError(f"query should be unbatched 2D or batched 3D tensor but received "
                         f"{query.dim()}-D query tensor")


def _in_projection(query, key, value, w_q, w_k, w_v, b_q, b_k, b_v):
    e_q, e_k, e_v = query.size(-1), key.size(-1), value.size(-1)
    for name, weight, shape in (("query", w_q, (e_q, e_q)), ("key", w_k, (e_q, e_k)),
                                ("value", w_v, (e_q, e_v))):
        if tuple(weight.shape) != shape:
            raise AssertionError(f"expecting {name} weights shape of {shape}, but got "
                                 f"{weight.shape}")
    for name, bias in (("query", b_q), ("key", b_k), ("value", b_v)):
        if bias is not None and tuple(bias.shape) != (e_q,):
            raise AssertionError(f"expecting {name} bias shape of {(e_q,)}, but got "
                                 f"{bias.shape}")
    return (_linear(query, w_q, b_q), _linear(key, w_k, b_k),
            _linear(value, w_v, b_v))


def _check_attn_mask_shape(attn_mask, tgt_len, src_len, bsz, num_heads):
    """Brings attn_mask to 3-D: (1, L, S) or (N * num_heads, L, S)."""
    if attn_mask.dim() == 2:
        if tuple(attn_mask.shape) != (tgt_len, src_len):
            raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should "
                               f"be {(tgt_len, src_len)}.")
        return attn_mask.unsqueeze(0)
    if attn_mask.dim() == 3:
        expected = (bsz * num_heads, tgt_len, src_len)
        if tuple(attn_mask.shape) != expected:
            raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should "
                               f"be {expected}.")
        return attn_mask
    raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads,
                                 in_proj_weight, in_proj_bias, bias_k, bias_v, add_zero_attn,
                                 dropout_p, out_proj_weight, out_proj_bias, training=True,
                                 key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None,
                                 k_proj_weight=None, v_proj_weight=None, static_k=None,
                                 static_v=None, average_attn_weights=True, is_causal=False):
    """Multi-head attention on (L, N, E) query and (S, N, E_k/E_v) key/value (or unbatched
    (L, E), (S, E)). Returns (output, weights) — weights are (N, L, S) averaged over heads,
    (N, heads, L, S) with average_attn_weights=False, or None when need_weights=False."""
    is_batched = _mha_shape_check(query, key, value, key_padding_mask, attn_mask, num_heads)
    if not is_batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    src_len = key.shape[0]

    key_padding_mask = _canonical_mask(key_padding_mask, "key_padding_mask",
                                       _none_or_dtype(attn_mask), "attn_mask", query.dtype)
    if is_causal and attn_mask is None:
        raise RuntimeError("Need attn_mask if specifying the is_causal hint. You may use the "
                           "Transformer module method `generate_square_subsequent_mask` to "
                           "create this mask.")
    if is_causal and key_padding_mask is None and not need_weights:
        # Only the hint is used (by scaled_dot_product_attention); the mask is dropped.
        attn_mask = None
    else:
        attn_mask = _canonical_mask(attn_mask, "attn_mask", None, "", query.dtype,
                                    check_other=False)
        if key_padding_mask is not None:
            is_causal = False  # the merged mask is no longer causal

    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but "
                             f"got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if use_separate_proj_weight:
        if tuple(key.shape[:2]) != tuple(value.shape[:2]):
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match "
                                 f"value's {value.shape[:2]}")
    elif tuple(key.shape) != tuple(value.shape):
        raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")

    # Input projections: the packed (3E, E) weight holds W_q, W_k, W_v stacked.
    if not use_separate_proj_weight:
        if in_proj_weight is None:
            raise AssertionError("use_separate_proj_weight is False but in_proj_weight is None")
        q_proj_weight, k_proj_weight, v_proj_weight = in_proj_weight.chunk(3)
    else:
        for name, weight in (("q", q_proj_weight), ("k", k_proj_weight), ("v", v_proj_weight)):
            if weight is None:
                raise AssertionError(f"use_separate_proj_weight is True but {name}_proj_weight "
                                     f"is None")
    b_q = b_k = b_v = None
    if in_proj_bias is not None:
        b_q, b_k, b_v = in_proj_bias.chunk(3)
    q, k, v = _in_projection(query, key, value, q_proj_weight, k_proj_weight, v_proj_weight,
                             b_q, b_k, b_v)

    if attn_mask is not None:
        attn_mask = _check_attn_mask_shape(attn_mask, tgt_len, src_len, bsz, num_heads)

    # Learned extra key/value position (add_bias_kv): one more source position.
    if bias_k is not None and bias_v is not None:
        if static_k is not None:
            raise AssertionError("bias cannot be added to static key.")
        if static_v is not None:
            raise AssertionError("bias cannot be added to static value.")
        k = _cat([k, bias_k.repeat(1, bsz, 1)])
        v = _cat([v, bias_v.repeat(1, bsz, 1)])
        attn_mask = _pad_last(attn_mask)
        key_padding_mask = _pad_last(key_padding_mask)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must both be given or both be None")

    # Split heads: (L, N, E) -> (N * heads, L, head_dim).
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = _heads_first(k, static_k, bsz, num_heads, head_dim, "k")
    v = _heads_first(v, static_v, bsz, num_heads, head_dim, "v")

    if add_zero_attn:  # one more source position whose key and value are zero
        zeros = _ops.creation.zeros((bsz * num_heads, 1, head_dim), dtype=k.dtype,
                                    device=k.device)
        k = _cat([k, zeros], 1)
        v = _cat([v, zeros], 1)
        attn_mask = _pad_last(attn_mask)
        key_padding_mask = _pad_last(key_padding_mask)
    src_len = k.size(1)

    if key_padding_mask is not None:
        if key_padding_mask.shape[0] != bsz:
            raise AssertionError(f"Expected key_padded_mask.shape[0] to be {bsz}, but got "
                                 f"{key_padding_mask.shape[0]}")
        if key_padding_mask.shape[1] != src_len:
            raise AssertionError(f"Expected key_padded_mask.shape[1] to be {src_len}, but got "
                                 f"{key_padding_mask.shape[1]}")
        key_padding_mask = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(
            -1, num_heads, -1, -1).reshape(bsz * num_heads, 1, src_len)
        attn_mask = key_padding_mask if attn_mask is None else attn_mask + key_padding_mask

    if not training:
        dropout_p = 0.0

    if need_weights:
        # Explicit weights: plain softmax (a fully masked row gives NaN, as in PyTorch).
        scale = math.sqrt(1.0 / float(head_dim))
        scores = (q * scale).bmm(k.transpose(-2, -1))
        if attn_mask is not None:
            scores = scores + attn_mask
        weights = _softmax(scores, -1)
        if dropout_p > 0.0:
            weights = _dropout(weights, dropout_p)
        output = weights.bmm(v)
        output = output.transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
        output = _linear(output, out_proj_weight, out_proj_bias)
        output = output.reshape(tgt_len, bsz, output.size(1))
        weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
        if average_attn_weights:
            weights = weights.mean(dim=1)
        if not is_batched:
            output, weights = output.squeeze(1), weights.squeeze(0)
        return output, weights

    if attn_mask is not None:
        if attn_mask.size(0) == 1 and attn_mask.dim() == 3:
            attn_mask = attn_mask.unsqueeze(0)
        else:
            attn_mask = attn_mask.reshape(bsz, num_heads, -1, src_len)
    q = q.reshape(bsz, num_heads, tgt_len, head_dim)
    k = k.reshape(bsz, num_heads, src_len, head_dim)
    v = v.reshape(bsz, num_heads, src_len, head_dim)
    output = scaled_dot_product_attention(q, k, v, attn_mask, dropout_p, is_causal)
    output = output.permute(2, 0, 1, 3).reshape(bsz * tgt_len, embed_dim)
    output = _linear(output, out_proj_weight, out_proj_bias)
    output = output.reshape(tgt_len, bsz, output.size(1))
    if not is_batched:
        output = output.squeeze(1)
    return output, None


def _pad_last(mask):
    """One more (unmasked) source position at the end of a mask, or None."""
    return None if mask is None else _pad(mask, (0, 1))


def _heads_first(tensor, static, bsz, num_heads, head_dim, name):
    if static is None:
        return tensor.reshape(tensor.shape[0], bsz * num_heads, head_dim).transpose(0, 1)
    if static.size(0) != bsz * num_heads:
        raise AssertionError(f"expecting static_{name}.size(0) of {bsz * num_heads}, but got "
                             f"{static.size(0)}")
    if static.size(2) != head_dim:
        raise AssertionError(f"expecting static_{name}.size(2) of {head_dim}, but got "
                             f"{static.size(2)}")
    return static
