"""Triton's tutorial kernels (01 vector add, 02 fused softmax, 03 matmul, 06 fused attention
forward, 09 persistent matmul) as `@triton.jit` functions only: no torch, no autotuning, so that they compile
offline (`scripts/gpu_report.py` calls `triton.compile` on them for a target without a
GPU). `benches/triton_peers.py` imports them and puts the autotuners over `matmul_kernel`
and `attn_fwd`. `attn_fwd` calls `attn_inner` by name: the two live in this one module.
"""
import triton
import triton.language as tl


# Tutorial 01: vector add.
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


# Tutorial 02: fused softmax, persistent programs sized by occupancy.
@triton.jit
def softmax_kernel(out_ptr, in_ptr, in_stride, out_stride, n_rows, n_cols,
                   BLOCK: tl.constexpr, num_stages: tl.constexpr):
    start = tl.program_id(0)
    step = tl.num_programs(0)
    for row in tl.range(start, n_rows, step, num_stages=num_stages):
        cols = tl.arange(0, BLOCK)
        mask = cols < n_cols
        x = tl.load(in_ptr + row * in_stride + cols, mask=mask, other=-float("inf"))
        x = x - tl.max(x, axis=0)
        num = tl.exp(x)
        y = num / tl.sum(num, axis=0)
        tl.store(out_ptr + row * out_stride + cols, y, mask=mask)


# Tutorial 03: matmul with grouped ordering (autotuned over the tutorial's CUDA configs in
# benches/triton_peers.py).
@triton.jit
def matmul_kernel(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk, stride_bn,
                  stride_cm, stride_cn, BM: tl.constexpr, BN: tl.constexpr, BK: tl.constexpr,
                  GROUP_M: tl.constexpr):
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % per_group) % group_m)
    pid_n = (pid % per_group) // group_m
    offs_am = (pid_m * BM + tl.arange(0, BM)) % M
    offs_bn = (pid_n * BN + tl.arange(0, BN)) % N
    offs_k = tl.arange(0, BK)
    a_ptrs = a_ptr + offs_am[:, None] * stride_am + offs_k[None, :] * stride_ak
    b_ptrs = b_ptr + offs_k[:, None] * stride_bk + offs_bn[None, :] * stride_bn
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for k in range(0, tl.cdiv(K, BK)):
        a = tl.load(a_ptrs, mask=offs_k[None, :] < K - k * BK, other=0.0)
        b = tl.load(b_ptrs, mask=offs_k[:, None] < K - k * BK, other=0.0)
        acc = tl.dot(a, b, acc)
        a_ptrs += BK * stride_ak
        b_ptrs += BK * stride_bk
    c = acc.to(tl.float16)
    offs_cm = pid_m * BM + tl.arange(0, BM)
    offs_cn = pid_n * BN + tl.arange(0, BN)
    c_ptrs = c_ptr + stride_cm * offs_cm[:, None] + stride_cn * offs_cn[None, :]
    tl.store(c_ptrs, c, mask=(offs_cm[:, None] < M) & (offs_cn[None, :] < N))


# Tutorial 09: the persistent matmul: NUM_SMS programs loop over the output tiles in groups
# of GROUP_M block rows; `flatten` fuses the tile and K loops into one (Triton's Hopper form).
@triton.jit
def matmul_kernel_persistent(a_ptr, b_ptr, c_ptr, M, N, K, stride_am, stride_ak, stride_bk,
                             stride_bn, stride_cm, stride_cn, BM: tl.constexpr,
                             BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                             NUM_SMS: tl.constexpr):
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    per_group = GROUP_M * num_pid_n
    lanes_k = tl.arange(0, BK)
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        first_m = (tile // per_group) * GROUP_M
        group_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + (tile % group_m)
        pid_n = (tile % per_group) // group_m
        rows = pid_m * BM + tl.arange(0, BM)
        cols = pid_n * BN + tl.arange(0, BN)
        am = tl.max_contiguous(tl.multiple_of(tl.where(rows < M, rows, 0), BM), BM)
        bn = tl.max_contiguous(tl.multiple_of(tl.where(cols < N, cols, 0), BN), BN)
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            offs_k = ki * BK + lanes_k
            a = tl.load(a_ptr + am[:, None] * stride_am + offs_k[None, :] * stride_ak,
                        mask=lanes_k[None, :] < K - ki * BK, other=0.0)
            b = tl.load(b_ptr + offs_k[:, None] * stride_bk + bn[None, :] * stride_bn,
                        mask=lanes_k[:, None] < K - ki * BK, other=0.0)
            acc = tl.dot(a, b, acc)
        c_ptrs = c_ptr + rows[:, None] * stride_cm + cols[None, :] * stride_cn
        tl.store(c_ptrs, acc.to(tl.float16), mask=(rows[:, None] < M) & (cols[None, :] < N))


# Tutorial 03 through tensor descriptors (tutorial 09's descriptor form, one tile per
# program): on Hopper Triton copies the blocks by TMA, its descriptors made in the kernel.
# `WARP_SPECIALIZE` is tutorial 09's loop option (`scripts/gpu_report.py
# --warp-specialize` shows what it changes per target).
@triton.jit
def matmul_kernel_descriptor(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                             BN: tl.constexpr, BK: tl.constexpr, GROUP_M: tl.constexpr,
                             WARP_SPECIALIZE: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BM, BN])
    pid = tl.program_id(0)
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    per_group = GROUP_M * num_pid_n
    first_m = (pid // per_group) * GROUP_M
    group_m = min(num_pid_m - first_m, GROUP_M)
    pid_m = first_m + ((pid % per_group) % group_m)
    pid_n = (pid % per_group) // group_m
    acc = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in tl.range(tl.cdiv(K, BK), warp_specialize=WARP_SPECIALIZE):
        a = a_desc.load([pid_m * BM, ki * BK])
        b = b_desc.load([ki * BK, pid_n * BN])
        acc = tl.dot(a, b, acc)
    c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


# Tutorial 09's persistent matmul through tensor descriptors
# (`matmul_kernel_descriptor_persistent`, descriptors made in the kernel, one tile's
# epilogue whole): NUM_SMS programs loop over the tiles in groups of GROUP_M block rows,
# the tile and K loops flattened; on Hopper the blocks are copied by TMA.
@triton.jit
def matmul_kernel_descriptor_persistent(a_ptr, b_ptr, c_ptr, M, N, K, BM: tl.constexpr,
                                        BN: tl.constexpr, BK: tl.constexpr,
                                        GROUP_M: tl.constexpr, NUM_SMS: tl.constexpr):
    a_desc = tl.make_tensor_descriptor(a_ptr, shape=[M, K], strides=[K, 1],
                                       block_shape=[BM, BK])
    b_desc = tl.make_tensor_descriptor(b_ptr, shape=[K, N], strides=[N, 1],
                                       block_shape=[BK, BN])
    c_desc = tl.make_tensor_descriptor(c_ptr, shape=[M, N], strides=[N, 1],
                                       block_shape=[BM, BN])
    num_pid_m = tl.cdiv(M, BM)
    num_pid_n = tl.cdiv(N, BN)
    k_tiles = tl.cdiv(K, BK)
    per_group = GROUP_M * num_pid_n
    for tile in tl.range(tl.program_id(0), num_pid_m * num_pid_n, NUM_SMS, flatten=True):
        first_m = (tile // per_group) * GROUP_M
        group_m = min(num_pid_m - first_m, GROUP_M)
        pid_m = first_m + ((tile % per_group) % group_m)
        pid_n = (tile % per_group) // group_m
        acc = tl.zeros((BM, BN), dtype=tl.float32)
        for ki in range(k_tiles):
            a = a_desc.load([pid_m * BM, ki * BK])
            b = b_desc.load([ki * BK, pid_n * BN])
            acc = tl.dot(a, b, acc)
        c_desc.store([pid_m * BM, pid_n * BN], acc.to(tl.float16))


# Tutorial 06: fused attention forward (FlashAttention-2): off-band blocks unmasked, the
# diagonal block masked (causal), the running max and sum rescaled with exp2.
@triton.jit
def attn_inner(acc, l_i, m_i, q, k_base, v_base, start_m, qk_scale, n_ctx,
               BM: tl.constexpr, BN: tl.constexpr, D: tl.constexpr, STAGE: tl.constexpr):
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    offs_d = tl.arange(0, D)
    if STAGE == 1:
        lo, hi = 0, start_m * BM
    elif STAGE == 2:
        lo, hi = start_m * BM, (start_m + 1) * BM
        lo = tl.multiple_of(lo, BM)
    else:
        lo, hi = 0, n_ctx
    for start_n in tl.range(lo, hi, BN):
        start_n = tl.multiple_of(start_n, BN)
        kt = tl.load(k_base + (start_n + offs_n)[None, :] * D + offs_d[:, None])
        qk = tl.dot(q, kt)
        if STAGE == 2:
            keep = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(keep, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        if v_base.dtype.element_ty.is_fp8():
            # fp8 (tutorial 06's FP8 path): `v` given transposed, `[D, N]` per head.
            v = tl.load(v_base + offs_d[None, :] * n_ctx + (start_n + offs_n)[:, None])
        else:
            v = tl.load(v_base + (start_n + offs_n)[:, None] * D + offs_d[None, :])
        acc = tl.dot(p.to(v_base.dtype.element_ty), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


@triton.jit
def attn_fwd(q_ptr, k_ptr, v_ptr, sm_scale, lse_ptr, out_ptr, n_ctx, D: tl.constexpr,
             STAGE: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    head = off_hz.to(tl.int64) * n_ctx * D
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_d = tl.arange(0, D)
    m_i = tl.zeros([BM], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BM], dtype=tl.float32) + 1.0
    acc = tl.zeros([BM, D], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = tl.load(q_ptr + head + offs_m[:, None] * D + offs_d[None, :])
    if STAGE & 1:
        acc, l_i, m_i = attn_inner(acc, l_i, m_i, q, k_ptr + head, v_ptr + head, start_m,
                                   qk_scale, n_ctx, BM, BN, D, 4 - STAGE)
    if STAGE & 2:
        acc, l_i, m_i = attn_inner(acc, l_i, m_i, q, k_ptr + head, v_ptr + head, start_m,
                                   qk_scale, n_ctx, BM, BN, D, 2)
    tl.store(lse_ptr + off_hz * n_ctx + offs_m, m_i + tl.math.log2(l_i))
    acc = acc / l_i[:, None]
    tl.store(out_ptr + head + offs_m[:, None] * D + offs_d[None, :],
             acc.to(out_ptr.dtype.element_ty))


# Tutorial 06's Hopper form: `q`, `k`, `v` and `out` through tensor descriptors over the
# `[Z*H*N, D]` rows (made in the kernel, as `matmul_kernel_descriptor`'s; the tutorial
# makes them on the host where it can), keys taken as `desc_k.load(..).T`, the row offsets
# carried through the loop; `n_ctx` a multiple of the blocks. On Hopper Triton copies the
# key and value blocks by TMA.
@triton.jit
def attn_inner_descriptor(acc, l_i, m_i, q, desc_k, desc_v, offset_y, start_m, qk_scale,
                          n_ctx, BM: tl.constexpr, BN: tl.constexpr, STAGE: tl.constexpr):
    offs_m = start_m * BM + tl.arange(0, BM)
    offs_n = tl.arange(0, BN)
    if STAGE == 1:
        lo, hi = 0, start_m * BM
    elif STAGE == 2:
        lo, hi = start_m * BM, (start_m + 1) * BM
        lo = tl.multiple_of(lo, BM)
    else:
        lo, hi = 0, n_ctx
    offsetk_y = offset_y + lo
    offsetv_y = offset_y + lo
    for start_n in tl.range(lo, hi, BN):
        start_n = tl.multiple_of(start_n, BN)
        k = desc_k.load([offsetk_y, 0]).T
        qk = tl.dot(q, k)
        if STAGE == 2:
            keep = offs_m[:, None] >= (start_n + offs_n[None, :])
            qk = qk * qk_scale + tl.where(keep, 0, -1.0e6)
            m_ij = tl.maximum(m_i, tl.max(qk, 1))
            qk -= m_ij[:, None]
        else:
            m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
            qk = qk * qk_scale - m_ij[:, None]
        p = tl.math.exp2(qk)
        alpha = tl.math.exp2(m_i - m_ij)
        l_i = l_i * alpha + tl.sum(p, 1)
        acc = acc * alpha[:, None]
        v = desc_v.load([offsetv_y, 0])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
        offsetk_y += BN
        offsetv_y += BN
    return acc, l_i, m_i


@triton.jit
def attn_fwd_descriptor(q_ptr, k_ptr, v_ptr, sm_scale, lse_ptr, out_ptr, Z_H, n_ctx,
                        D: tl.constexpr, STAGE: tl.constexpr, BM: tl.constexpr,
                        BN: tl.constexpr):
    start_m = tl.program_id(0)
    off_hz = tl.program_id(1)
    y_dim = Z_H * n_ctx
    desc_q = tl.make_tensor_descriptor(q_ptr, shape=[y_dim, D], strides=[D, 1],
                                       block_shape=[BM, D])
    desc_k = tl.make_tensor_descriptor(k_ptr, shape=[y_dim, D], strides=[D, 1],
                                       block_shape=[BN, D])
    desc_v = tl.make_tensor_descriptor(v_ptr, shape=[y_dim, D], strides=[D, 1],
                                       block_shape=[BN, D])
    desc_o = tl.make_tensor_descriptor(out_ptr, shape=[y_dim, D], strides=[D, 1],
                                       block_shape=[BM, D])
    offset_y = off_hz * n_ctx
    qo_offset_y = offset_y + start_m * BM
    offs_m = start_m * BM + tl.arange(0, BM)
    m_i = tl.zeros([BM], dtype=tl.float32) - float("inf")
    l_i = tl.zeros([BM], dtype=tl.float32) + 1.0
    acc = tl.zeros([BM, D], dtype=tl.float32)
    qk_scale = sm_scale * 1.44269504
    q = desc_q.load([qo_offset_y, 0])
    if STAGE & 1:
        acc, l_i, m_i = attn_inner_descriptor(acc, l_i, m_i, q, desc_k, desc_v, offset_y,
                                              start_m, qk_scale, n_ctx, BM, BN, 4 - STAGE)
    if STAGE & 2:
        acc, l_i, m_i = attn_inner_descriptor(acc, l_i, m_i, q, desc_k, desc_v, offset_y,
                                              start_m, qk_scale, n_ctx, BM, BN, 2)
    tl.store(lse_ptr + off_hz * n_ctx + offs_m, m_i + tl.math.log2(l_i))
    acc = acc / l_i[:, None]
    desc_o.store([qo_offset_y, 0], acc.to(tl.float16))
