#!/usr/bin/env python3
"""The peers of `benches/cuda.rs` on the GPU: Triton's tutorial kernels (01 vector add,
02 fused softmax, 03 matmul, 06 fused attention forward) written against the installed
Triton, plus PyTorch's `torch.softmax` and cuBLAS (`torch.matmul`).

    python3 benches/triton_peers.py            # every case
    python3 benches/triton_peers.py softmax    # the cases whose key starts with a word

Each line is `key microseconds` (or `key error: why`), timed as `benches/cuda.rs` times
Tritium: the best of 5 rounds of back-to-back calls, closed by a synchronization. The
shapes and the data's sizes are the Rust bench's, so the rows pair up by key.
"""
import sys
import time

import torch
import triton
import triton.language as tl

DEV = "cuda"


def best_us(fn, rounds=5, calls=20):
    fn()
    torch.cuda.synchronize()
    best = float("inf")
    for _ in range(rounds):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
        best = min(best, (time.perf_counter() - t) / calls)
    return best * 1e6


# Tutorial 01: vector add.
@triton.jit
def add_kernel(x_ptr, y_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask)
    y = tl.load(y_ptr + offs, mask=mask)
    tl.store(out_ptr + offs, x + y, mask=mask)


def vector_add():
    n = 1 << 26
    x = torch.rand(n, device=DEV)
    y = torch.rand(n, device=DEV)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    yield "add", best_us(lambda: add_kernel[grid](x, y, out, n, BLOCK=1024))
    torch.testing.assert_close(out, x + y)


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


def softmax_programs(x, out, block, num_warps, num_stages):
    """The tutorial's grid: as many programs as the SMs hold at the kernel's occupancy."""
    rows, cols = x.shape
    props = triton.runtime.driver.active.utils.get_device_properties(x.device.index)
    k = softmax_kernel.warmup(out, x, x.stride(0), out.stride(0), rows, cols, BLOCK=block,
                              num_stages=num_stages, num_warps=num_warps, grid=(1,))
    k._init_handles()
    regs = max(k.n_regs, 1)
    occupancy = props["max_num_regs"] // (regs * props.get("warpSize", 32) * num_warps)
    if k.metadata.shared:
        occupancy = min(occupancy, props["max_shared_mem"] // k.metadata.shared)
    return min(props["multiprocessor_count"] * max(occupancy, 1), rows)


def fused_softmax():
    rows = 4096
    for cols in [256, 1024, 4096, 8192]:
        x = torch.randn(rows, cols, device=DEV)
        out = torch.empty_like(x)
        block = triton.next_power_of_2(cols)
        num_warps, num_stages = 8, 4
        try:
            programs = softmax_programs(x, out, block, num_warps, num_stages)
        except Exception:  # an API the installed Triton lacks: one program per row
            programs = rows
        run = lambda: softmax_kernel[(programs,)](out, x, x.stride(0), out.stride(0), rows,
                                                  cols, BLOCK=block, num_stages=num_stages,
                                                  num_warps=num_warps)
        yield f"softmax.{cols}.triton", best_us(run)
        torch.testing.assert_close(out, torch.softmax(x, dim=-1))
        yield f"softmax.{cols}.torch", best_us(lambda: torch.softmax(x, dim=-1))


# Tutorial 03: matmul with grouped ordering, autotuned over the tutorial's CUDA configs.
def matmul_configs():
    shapes = [(128, 256, 64, 3, 8), (64, 256, 32, 4, 4), (128, 128, 32, 4, 4),
              (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (128, 32, 32, 4, 4),
              (64, 32, 32, 5, 2), (32, 64, 32, 5, 2)]
    return [triton.Config({"BM": m, "BN": n, "BK": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
            for m, n, k, s, w in shapes]


@triton.autotune(configs=matmul_configs(), key=["M", "N", "K"])
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


def f16_matmul():
    m = n = k = 4096
    a = torch.randn(m, k, device=DEV, dtype=torch.float16)
    b = torch.randn(k, n, device=DEV, dtype=torch.float16)
    c = torch.empty(m, n, device=DEV, dtype=torch.float16)
    grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
    run = lambda: matmul_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0),
                                      b.stride(1), c.stride(0), c.stride(1))
    run()  # autotunes once
    yield "matmul.triton", best_us(run, rounds=3, calls=5)
    want = torch.matmul(a, b)
    torch.testing.assert_close(c, want, atol=0.5, rtol=1e-2)
    yield "matmul.cublas", best_us(lambda: torch.matmul(a, b), rounds=3, calls=5)


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
        v = tl.load(v_base + (start_n + offs_n)[:, None] * D + offs_d[None, :])
        acc = tl.dot(p.to(tl.float16), v, acc)
        m_i = m_ij
    return acc, l_i, m_i


def attn_configs():
    shapes = [(128, 64, 3, 4), (128, 64, 3, 8), (128, 128, 3, 8), (64, 64, 4, 4),
              (128, 32, 4, 4)]
    return [triton.Config({"BM": m, "BN": n}, num_stages=s, num_warps=w)
            for m, n, s, w in shapes]


@triton.autotune(configs=attn_configs(), key=["n_ctx", "D", "STAGE"])
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
    tl.store(out_ptr + head + offs_m[:, None] * D + offs_d[None, :], acc.to(tl.float16))


def attention():
    z, h, n = 4, 32, 4096
    for d in [64, 128]:
        for causal in [False, True]:
            q, k, v = (torch.randn(z, h, n, d, device=DEV, dtype=torch.float16) * 0.5
                       for _ in range(3))
            out = torch.empty_like(q)
            lse = torch.empty(z, h, n, device=DEV, dtype=torch.float32)
            scale = d ** -0.5
            stage = 3 if causal else 1
            grid = lambda meta: (triton.cdiv(n, meta["BM"]), z * h)
            run = lambda: attn_fwd[grid](q, k, v, scale, lse, out, n, D=d, STAGE=stage)
            run()
            key = f"attention.{d}.{'causal' if causal else 'full'}"
            yield key, best_us(run, rounds=3, calls=5)
            want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                     scale=scale)
            torch.testing.assert_close(out, want, atol=2e-2, rtol=2e-2)


CASES = {"add": vector_add, "softmax": fused_softmax, "matmul": f16_matmul,
         "attention": attention}


def main():
    words = sys.argv[1:] or list(CASES)
    for word in words:
        try:
            for key, us in CASES[word]():
                print(f"{key} {us:.3f}", flush=True)
        except Exception as e:  # one case failing leaves the others' rows
            print(f"{word} error: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}",
                  flush=True)


if __name__ == "__main__":
    main()
