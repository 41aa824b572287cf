#!/usr/bin/env python3
"""The peers of `benches/cuda.rs` on the GPU: Triton's tutorial kernels (01 vector add,
02 fused softmax, 03 matmul, its fp8 benchmark and its form through tensor descriptors,
06 fused attention forward, 09 persistent matmul) written against the installed
Triton (the kernels themselves in `benches/triton_kernels.py`), plus PyTorch's
`torch.softmax` and cuBLAS (`torch.matmul`).

    python3 benches/triton_peers.py            # every case
    python3 benches/triton_peers.py softmax    # the cases whose key starts with a word

Each line is `key microseconds` (or `key error: why`), timed as `benches/cuda.rs` times
Tritium: the best of 5 rounds of back-to-back calls, closed by a synchronization. The
shapes and the data's sizes are the Rust bench's, so the rows pair up by key.
"""
import os
import sys
import time

import torch
import triton

# The `@triton.jit` kernels live beside this file, importable without torch (for the offline
# report, scripts/gpu_report.py); this file puts the autotuners over them.
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import triton_kernels  # noqa: E402
from triton_kernels import add_kernel, softmax_kernel  # noqa: E402

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


# Tutorial 01: vector add (`add_kernel` in benches/triton_kernels.py).
def vector_add():
    n = 1 << 26
    x = torch.rand(n, device=DEV)
    y = torch.rand(n, device=DEV)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, 1024),)
    yield "add", best_us(lambda: add_kernel[grid](x, y, out, n, BLOCK=1024))
    torch.testing.assert_close(out, x + y)


# Tutorial 02: fused softmax (`softmax_kernel`), persistent programs sized by occupancy.
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


matmul_kernel = triton.autotune(configs=matmul_configs(), key=["M", "N", "K"])(
    triton_kernels.matmul_kernel)


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


# Tutorial 03's fp8 benchmark: E5M2 inputs, `b` passed as `b.T` (K-major), autotuned over
# the tutorial's fp8 configs.
def matmul_fp8_configs():
    shapes = [(128, 256, 128, 3, 8), (256, 128, 128, 3, 8), (256, 64, 128, 4, 4),
              (64, 256, 128, 4, 4), (128, 128, 128, 4, 4), (128, 64, 64, 4, 4),
              (64, 128, 64, 4, 4), (128, 32, 64, 4, 4)]
    return [triton.Config({"BM": m, "BN": n, "BK": k, "GROUP_M": 8}, num_stages=s, num_warps=w)
            for m, n, k, s, w in shapes]


matmul_fp8_kernel = triton.autotune(configs=matmul_fp8_configs(), key=["M", "N", "K"])(
    triton_kernels.matmul_kernel)


def fp8_matmul():
    m = n = k = 4096
    a = torch.randn(m, k, device=DEV, dtype=torch.float16).to(torch.float8_e5m2)
    b = torch.randn(k, n, device=DEV, dtype=torch.float16).T.contiguous().T
    b = b.to(torch.float8_e5m2)
    assert b.stride(0) == 1
    c = torch.empty(m, n, device=DEV, dtype=torch.float16)
    grid = lambda meta: (triton.cdiv(m, meta["BM"]) * triton.cdiv(n, meta["BN"]),)
    run = lambda: matmul_fp8_kernel[grid](a, b, c, m, n, k, a.stride(0), a.stride(1),
                                          b.stride(0), b.stride(1), c.stride(0), c.stride(1))
    run()  # autotunes once
    yield "matmul_fp8.triton", best_us(run, rounds=3, calls=5)
    want = torch.matmul(a.to(torch.float16), b.to(torch.float16))
    torch.testing.assert_close(c, want, atol=1.0, rtol=2e-2)


# Tutorial 09: the persistent matmul at its f16 config (128 x 256 x 64, 8 warps, 3 stages),
# one program per SM. `sms` (not a time) tells the Rust bench how many programs to launch.
def persistent_matmul():
    m = n = k = 4096
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    yield "sms", sms
    a = torch.randn(m, k, device=DEV, dtype=torch.float16)
    b = torch.randn(k, n, device=DEV, dtype=torch.float16)
    c = torch.empty(m, n, device=DEV, dtype=torch.float16)
    run = lambda: triton_kernels.matmul_kernel_persistent[(sms,)](
        a, b, c, m, n, k, a.stride(0), a.stride(1), b.stride(0), b.stride(1), c.stride(0),
        c.stride(1), BM=128, BN=256, BK=64, GROUP_M=8, NUM_SMS=sms, num_stages=3,
        num_warps=8)
    yield "matmul_persistent.triton", best_us(run, rounds=3, calls=5)
    torch.testing.assert_close(c, torch.matmul(a, b), atol=0.5, rtol=1e-2)


# Tutorial 03 through tensor descriptors (`matmul_kernel_descriptor`) at 128 x 256 x 64,
# 8 warps, 3 stages: Hopper copies its blocks by TMA. Its descriptors are built in the
# kernel, in global scratch memory from Triton's allocator.
def descriptor_matmul():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device=DEV))
    m = n = k = 4096
    a = torch.randn(m, k, device=DEV, dtype=torch.float16)
    b = torch.randn(k, n, device=DEV, dtype=torch.float16)
    c = torch.empty(m, n, device=DEV, dtype=torch.float16)
    grid = (triton.cdiv(m, 128) * triton.cdiv(n, 256),)
    run = lambda: triton_kernels.matmul_kernel_descriptor[grid](
        a, b, c, m, n, k, BM=128, BN=256, BK=64, GROUP_M=8, WARP_SPECIALIZE=False,
        num_stages=3, num_warps=8)
    yield "matmul_descriptor.triton", best_us(run, rounds=3, calls=5)
    torch.testing.assert_close(c, torch.matmul(a, b), atol=0.5, rtol=1e-2)


# Tutorial 09 through tensor descriptors (`matmul_kernel_descriptor_persistent`), one
# program per SM, at 128 x 256 x 64, 8 warps, 3 stages: every tile's blocks by TMA.
def descriptor_persistent_matmul():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device=DEV))
    m = n = k = 4096
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    a = torch.randn(m, k, device=DEV, dtype=torch.float16)
    b = torch.randn(k, n, device=DEV, dtype=torch.float16)
    c = torch.empty(m, n, device=DEV, dtype=torch.float16)
    run = lambda: triton_kernels.matmul_kernel_descriptor_persistent[(sms,)](
        a, b, c, m, n, k, BM=128, BN=256, BK=64, GROUP_M=8, NUM_SMS=sms, num_stages=3,
        num_warps=8)
    yield "matmul_descriptor_persistent.triton", best_us(run, rounds=3, calls=5)
    torch.testing.assert_close(c, torch.matmul(a, b), atol=0.5, rtol=1e-2)


# Tutorial 06: fused attention forward (`attn_fwd` calling `attn_inner`).
def attn_configs():
    shapes = [(128, 64, 3, 4), (128, 64, 3, 8), (128, 128, 3, 8), (64, 64, 4, 4),
              (128, 32, 4, 4)]
    return [triton.Config({"BM": m, "BN": n}, num_stages=s, num_warps=w)
            for m, n, s, w in shapes]


attn_fwd = triton.autotune(configs=attn_configs(), key=["n_ctx", "D", "STAGE"])(
    triton_kernels.attn_fwd)


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


# Tutorial 06's Hopper form (`attn_fwd_descriptor`: tensor descriptors made in the
# kernel, TMA on Hopper) at the Hopper configs: D = 64 128 x 64 with 4 warps,
# D = 128 128 x 128 with 8 warps, 3 stages.
def descriptor_attention():
    triton.set_allocator(lambda size, align, stream: torch.empty(size, dtype=torch.int8,
                                                                 device=DEV))
    z, h, n = 4, 32, 4096
    for d, bm, bn, w in [(64, 128, 64, 4), (128, 128, 128, 8)]:
        for causal in [False, True]:
            q, k, v = (torch.randn(z, h, n, d, device=DEV, dtype=torch.float16) * 0.5
                       for _ in range(3))
            out = torch.empty_like(q)
            lse = torch.empty(z, h, n, device=DEV, dtype=torch.float32)
            scale = d ** -0.5
            stage = 3 if causal else 1
            run = lambda: triton_kernels.attn_fwd_descriptor[(n // bm, z * h)](
                q, k, v, scale, lse, out, z * h, n, D=d, STAGE=stage, BM=bm, BN=bn,
                num_stages=3, num_warps=w)
            run()
            key = f"attention_descriptor.{d}.{'causal' if causal else 'full'}"
            yield key, best_us(run, rounds=3, calls=5)
            want = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                     scale=scale)
            torch.testing.assert_close(out, want, atol=2e-2, rtol=2e-2)


# Tutorial 06's fp8 path at Tritium's Hopper config (D = 64, 128 x 64, 4 warps, 3 stages):
# E5M2 `q`, `k` and `v`, `v` passed transposed (`[Z, H, D, N]`), an E5M2 output.
def fp8_attention():
    z, h, n, d = 4, 32, 4096, 64
    for causal in [False, True]:
        q, k, v = (torch.randn(z, h, n, d, device=DEV, dtype=torch.float16) * 0.5
                   for _ in range(3))
        q8, k8, v8 = (x.to(torch.float8_e5m2) for x in (q, k, v))
        vt = v8.permute(0, 1, 3, 2).contiguous()
        out = torch.empty_like(q8)
        lse = torch.empty(z, h, n, device=DEV, dtype=torch.float32)
        scale = d ** -0.5
        grid = (triton.cdiv(n, 128), z * h)
        run = lambda: triton_kernels.attn_fwd[grid](q8, k8, vt, scale, lse, out, n, D=d,
                                                    STAGE=3 if causal else 1, BM=128, BN=64,
                                                    num_warps=4, num_stages=3)
        run()
        yield f"attention_fp8.{d}.{'causal' if causal else 'full'}", best_us(run, rounds=3,
                                                                            calls=5)
        want = torch.nn.functional.scaled_dot_product_attention(
            q8.to(torch.float16), k8.to(torch.float16), v8.to(torch.float16),
            is_causal=causal, scale=scale)
        torch.testing.assert_close(out.to(torch.float16), want, atol=0.1, rtol=0.3)


CASES = {"add": vector_add, "softmax": fused_softmax, "matmul": f16_matmul,
         "matmul_fp8": fp8_matmul, "matmul_persistent": persistent_matmul,
         "matmul_descriptor": descriptor_matmul,
         "matmul_descriptor_persistent": descriptor_persistent_matmul,
         "attention": attention, "attention_descriptor": descriptor_attention,
         "attention_fp8": fp8_attention}


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
