//! Triton tutorial 06's fused attention (forward and backward, block pointers) on every
//! device against plain f64 softmax attention and its gradients, causal and not, on
//! sequence lengths that are not multiples of the blocks, in f32 (and f16 forward).

use crate::common::{all_devices, assert_close, random_f32};
use ndarray::{Array2, Array3, Array4, Axis};
use tritium::prelude::*;
use tritium_kernels::attention::{attention, AttentionConfig};

/// The reference: the output and each row's `log2 Σ_j exp(scale · q·k_j)` over the keys
/// it sees.
fn reference(
    q: &Array4<f64>,
    k: &Array4<f64>,
    v: &Array4<f64>,
    scale: f64,
    causal: bool,
) -> (Array4<f64>, Array3<f64>) {
    let (z, h, n, d) = q.dim();
    let mut out = Array4::zeros((z, h, n, d));
    let mut lse = Array3::zeros((z, h, n));
    for b in 0..z {
        for hh in 0..h {
            let (qm, km, vm) = (
                q.index_axis(Axis(0), b).index_axis(Axis(0), hh).to_owned(),
                k.index_axis(Axis(0), b).index_axis(Axis(0), hh).to_owned(),
                v.index_axis(Axis(0), b).index_axis(Axis(0), hh).to_owned(),
            );
            let s: Array2<f64> = qm.dot(&km.t()) * scale;
            for i in 0..n {
                let seen = if causal { i + 1 } else { n };
                let row = s.row(i);
                let max = row
                    .iter()
                    .take(seen)
                    .cloned()
                    .fold(f64::NEG_INFINITY, f64::max);
                let w: Vec<f64> = row.iter().take(seen).map(|x| (x - max).exp()).collect();
                let total: f64 = w.iter().sum();
                lse[[b, hh, i]] = (max + total.ln()) / std::f64::consts::LN_2;
                for j in 0..seen {
                    for c in 0..d {
                        out[[b, hh, i, c]] += w[j] / total * vm[[j, c]];
                    }
                }
            }
        }
    }
    (out, lse)
}

fn random4(shape: (usize, usize, usize, usize), seed: u64) -> Array4<f32> {
    let n = shape.0 * shape.1 * shape.2 * shape.3;
    Array4::from_shape_vec(shape, random_f32(n, seed)).unwrap()
}

#[test]
fn fused_attention_matches_softmax_attention() {
    // (Z, H, N, D, causal)
    let cases = [
        (1, 2, 40, 16, false),
        (2, 1, 40, 16, true),
        (1, 1, 32, 32, true),
        (1, 1, 7, 16, false),
    ];
    let config = |causal| AttentionConfig {
        block_m: 16,
        block_n: 16,
        causal,
    };
    for (z, h, n, d, causal) in cases {
        let what = format!("{:?} causal={causal}", (z, h, n, d));
        assert_forward_on_every_device(
            (z, h, n, d),
            [1, 2, 3],
            causal,
            &what,
            |dev, [q, k, v], scale| attention(dev, q, k, v, scale, config(causal)),
            |dev, [q, k, v], scale| attention(dev, q, k, v, scale, config(causal)),
        );
    }
}

/// An attention forward of `T` inputs `[q, k, v]` and a scale: the output and the
/// log-sum-exp.
type Forward<T> = tritium::Result<(Array4<T>, Array3<f32>)>;

/// `f32_forward` and `f16_forward`, causal or not, on every device against the f64
/// reference (on the f16-rounded inputs for f16), on random `shape` inputs from `seeds`.
fn assert_forward_on_every_device(
    shape: (usize, usize, usize, usize),
    seeds: [u64; 3],
    causal: bool,
    what: &str,
    f32_forward: impl Fn(&Device, [ndarray::ArrayView4<f32>; 3], f32) -> Forward<f32>,
    f16_forward: impl Fn(&Device, [ndarray::ArrayView4<half::f16>; 3], f32) -> Forward<half::f16>,
) {
    let [q, k, v] = seeds.map(|seed| random4(shape, seed));
    let scale = 1.0 / (shape.3 as f32).sqrt();
    let f64s = |a: &Array4<f32>| a.mapv(f64::from);
    let (want, want_lse) = reference(&f64s(&q), &f64s(&k), &f64s(&v), scale as f64, causal);
    // f16 inputs: the reference sees the same rounded inputs.
    let half = |a: &Array4<f32>| a.mapv(half::f16::from_f32);
    let (qh, kh, vh) = (half(&q), half(&k), half(&v));
    let widen = |a: &Array4<half::f16>| a.mapv(|x| f64::from(x.to_f32()));
    let (want_h, _) = reference(&widen(&qh), &widen(&kh), &widen(&vh), scale as f64, causal);
    for device in all_devices() {
        let what = format!("{what} on {device:?}");
        let (out, lse) = f32_forward(&device, [q.view(), k.view(), v.view()], scale).unwrap();
        assert_close(&out, &want, 1e-4, 1e-5, &format!("{what}: f32 out"));
        assert_close(&lse, &want_lse, 1e-5, 1e-5, &format!("{what}: lse"));
        let (out, _) = f16_forward(&device, [qh.view(), kh.view(), vh.view()], scale).unwrap();
        let out = out.mapv(|x| x.to_f32());
        assert_close(&out, &want_h, 1e-2, 2e-3, &format!("{what}: f16 out"));
    }
}

/// The blocks the CPU benchmarks use per head dimension (128 query rows and 128 keys per
/// step from `D = 128`), on the CPU against the f64 reference, causal and not, with a
/// partial last block.
#[test]
fn attention_with_the_head_dim_blocks_matches_the_reference() {
    for (n, d) in [(200, 128), (130, 64)] {
        for causal in [false, true] {
            let shape = (1, 1, n, d);
            let (q, k, v) = (random4(shape, 4), random4(shape, 5), random4(shape, 6));
            let scale = 1.0 / (d as f32).sqrt();
            let f64s = |a: &Array4<f32>| a.mapv(f64::from);
            let (want, _) = reference(&f64s(&q), &f64s(&k), &f64s(&v), scale as f64, causal);
            let config = AttentionConfig {
                causal,
                ..AttentionConfig::for_head_dim(d)
            };
            let wide = if d >= 128 { 128 } else { 64 };
            assert_eq!((config.block_m, config.block_n), (wide, wide));
            let (out, _) = attention(
                &tritium::Device::cpu(),
                q.view(),
                k.view(),
                v.view(),
                scale,
                config,
            )
            .unwrap();
            let what = format!("N={n} D={d} causal={causal}");
            assert_close(&out, &want, 1e-4, 1e-5, &what);
        }
    }
}

/// Tutorial 06's Hopper form (`attention_descriptor`: tensor descriptors over the
/// `[Z·H·N, D]` rows, keys loaded then transposed) on every device against the f64
/// reference, f32 and f16, causal and not, several heads (a block next to another head's
/// rows).
#[test]
fn descriptor_attention_matches_softmax_attention() {
    use tritium_kernels::attention_descriptor::attention_on_descriptors;
    // (Z, H, N, D, block_m, block_n, causal)
    let cases = [
        (1, 2, 32, 16, 16, 16, false),
        (2, 1, 64, 32, 32, 16, true),
        (1, 3, 48, 16, 16, 16, true),
    ];
    for (z, h, n, d, bm, bn, causal) in cases {
        let config = AttentionConfig {
            block_m: bm,
            block_n: bn,
            causal,
        };
        let what = format!("{:?} {bm}x{bn} causal={causal}", (z, h, n, d));
        assert_forward_on_every_device(
            (z, h, n, d),
            [7, 8, 9],
            causal,
            &what,
            |dev, [q, k, v], scale| attention_on_descriptors(dev, q, k, v, scale, config),
            |dev, [q, k, v], scale| attention_on_descriptors(dev, q, k, v, scale, config),
        );
    }
}

/// The descriptor form takes whole blocks per head only (a block across two heads would
/// read the next head's keys): anything else is an error that says so.
#[test]
fn descriptor_attention_rejects_partial_blocks() {
    use tritium_kernels::attention_descriptor::attention_on_descriptors;
    let q = random4((1, 2, 40, 16), 1);
    let config = AttentionConfig {
        block_m: 16,
        block_n: 16,
        causal: false,
    };
    let e = attention_on_descriptors(&Device::cpu(), q.view(), q.view(), q.view(), 1.0, config)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("N = 40 must be a multiple of block_m = 16"),
        "{e}"
    );
}

#[test]
fn attention_rejects_mismatched_shapes() {
    let q = random4((1, 1, 8, 16), 1);
    let k = random4((1, 1, 9, 16), 2);
    let e = attention(
        &Device::cpu(),
        q.view(),
        k.view(),
        q.view(),
        1.0,
        AttentionConfig::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        e.contains("q, k and v must have one shape") && e.contains("[1, 1, 9, 16]"),
        "{e}"
    );
}

/// The forward and backward passes compile to PTX for sm_80 and sm_90, in f16 with
/// tensor-core `mma`.
#[test]
fn fused_attention_compiles_to_ptx() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    use tritium_kernels::attention::{
        attention_backward_dkdv, attention_backward_dq, attention_forward,
    };
    type H = half::f16;
    let s = Specialization::default();
    let kernels = [
        attention_forward::trace::<H>(&s, 64, 32, 64, true).unwrap(),
        attention_backward_dkdv::trace::<H>(&s, 32, 32, 64, true).unwrap(),
        attention_backward_dq::trace::<H>(&s, 32, 32, 64, true).unwrap(),
    ];
    for sm in [80, 90] {
        let copts = CudaCompileOptions {
            sm,
            ..Default::default()
        };
        for f in &kernels {
            let ptx = compile_ptx(f, "attention", &copts).unwrap().text;
            let name = &f.name;
            // Hopper runs the products whose rows fill whole warpgroups on `wgmma`.
            assert!(
                ptx.contains("mma.sync.aligned.m16n8k16")
                    || (sm == 90 && ptx.contains("wgmma.mma_async")),
                "{name} sm_{sm}: no tensor cores"
            );
        }
    }
}

/// The gradients of softmax attention in f64 for the output gradient `d_o`:
/// `dV = Pᵀ dO`, `dS = P ∘ (dO Vᵀ − rowsum(dO ∘ O))`, `dQ = dS K · scale`, `dK = dSᵀ Q · scale`.
fn reference_grads(
    q: &Array4<f64>,
    k: &Array4<f64>,
    v: &Array4<f64>,
    d_o: &Array4<f64>,
    scale: f64,
    causal: bool,
) -> [Array4<f64>; 3] {
    let (z, h, n, _) = q.dim();
    let mut grads = [
        Array4::zeros(q.dim()),
        Array4::zeros(q.dim()),
        Array4::zeros(q.dim()),
    ];
    for b in 0..z {
        for hh in 0..h {
            let at = |a: &Array4<f64>| a.index_axis(Axis(0), b).index_axis(Axis(0), hh).to_owned();
            let (qm, km, vm, dom) = (at(q), at(k), at(v), at(d_o));
            let s: Array2<f64> = qm.dot(&km.t()) * scale;
            let mut p = Array2::<f64>::zeros((n, n));
            for i in 0..n {
                let seen = if causal { i + 1 } else { n };
                let max = (0..seen)
                    .map(|j| s[[i, j]])
                    .fold(f64::NEG_INFINITY, f64::max);
                let total: f64 = (0..seen).map(|j| (s[[i, j]] - max).exp()).sum();
                for j in 0..seen {
                    p[[i, j]] = (s[[i, j]] - max).exp() / total;
                }
            }
            let o = p.dot(&vm);
            let dv = p.t().dot(&dom);
            let dp = dom.dot(&vm.t());
            let delta = (&o * &dom).sum_axis(Axis(1));
            let ds = &p * &(&dp - &delta.insert_axis(Axis(1)));
            let dq = ds.dot(&km) * scale;
            let dk = ds.t().dot(&qm) * scale;
            for (g, val) in grads.iter_mut().zip([dq, dk, dv]) {
                g.index_axis_mut(Axis(0), b)
                    .index_axis_mut(Axis(0), hh)
                    .assign(&val);
            }
        }
    }
    grads
}

#[test]
fn fused_attention_backward_matches_the_gradients() {
    use tritium_kernels::attention::attention_backward;
    let cases = [
        (1, 2, 40, 16, false),
        (1, 1, 40, 16, true),
        (2, 1, 16, 32, true),
    ];
    for (z, h, n, d, causal) in cases {
        let shape = (z, h, n, d);
        let (q, k, v, d_o) = (
            random4(shape, 4),
            random4(shape, 5),
            random4(shape, 6),
            random4(shape, 7),
        );
        let scale = 1.0 / (d as f32).sqrt();
        let f64s = |a: &Array4<f32>| a.mapv(f64::from);
        let want = reference_grads(
            &f64s(&q),
            &f64s(&k),
            &f64s(&v),
            &f64s(&d_o),
            scale as f64,
            causal,
        );
        let config = AttentionConfig {
            block_m: 16,
            block_n: 16,
            causal,
        };
        for device in all_devices() {
            let what = format!("{shape:?} causal={causal} on {device:?}");
            let (o, lse) = attention(&device, q.view(), k.view(), v.view(), scale, config).unwrap();
            let grads = attention_backward(
                &device,
                q.view(),
                k.view(),
                v.view(),
                o.view(),
                d_o.view(),
                lse.view(),
                scale,
                config,
            )
            .unwrap();
            let (dq, dk, dv) = grads;
            for (name, got, want) in [
                ("dq", dq, &want[0]),
                ("dk", dk, &want[1]),
                ("dv", dv, &want[2]),
            ] {
                assert_close(&got, want, 1e-3, 1e-4, &format!("{what}: {name}"));
            }
        }
    }
}

/// The dumps of tutorial 06's forward pass compiled for `n` positions and head dim `d`
/// (64 × 32 blocks).
fn forward_dumps(what: &str, n: usize, d: usize) -> crate::common::Dumps {
    use tritium_kernels::attention::attention_forward;
    let h = 1;
    let (q, k, v) = (
        random4((1, h, n, d), 1),
        random4((1, h, n, d), 2),
        random4((1, h, n, d), 3),
    );
    let mut out = Array4::<f32>::zeros((1, h, n, d));
    let mut lse = Array3::<f32>::zeros((1, h, n));
    crate::common::dumps_of(what, |options| {
        attention_forward::launch_with(
            &tritium::Device::cpu(),
            [n / 64, h],
            options,
            &mut out,
            &mut lse,
            q.view(),
            k.view(),
            v.view(),
            0.125,
            n as i32,
            64,
            32,
            d,
            false,
        )
        .unwrap()
    })
}

/// The K loop requests the next key and value blocks while its dots run: their pointers
/// come from block pointers (offsets carried by the loop), and `kᵀ` is read by columns.
/// The prefetches go to L2 (`llvm.prefetch` locality 2).
#[test]
fn the_key_loop_prefetches_the_next_blocks() {
    let dumps = forward_dumps("attention-prefetch", 256, 64);
    let to_l2 = dumps.get("opt.ll").matches("i32 0, i32 2, i32 1)").count();
    assert!(to_l2 > 0, "no prefetch of the next key and value blocks");
}

/// The softmax step of the K loop, `p = exp2(qk - m_ij[:, None])`, runs in vector
/// registers: `exp2` is arithmetic (FMAs, no libm call per lane) and every scratch buffer
/// has its own alias scope, so the loop that writes `p` may read `m_ij` and `qk` without
/// a dependence check (without the scopes, LLVM saw one `scratch` object and left the
/// loop scalar).
#[test]
fn the_softmax_step_is_vectorized() {
    let dumps = forward_dumps("attention-vector-exp2", 128, 64);
    let ir = dumps.get("opt.ll");
    assert!(!ir.contains("@exp2f"), "exp2 calls libm");
    // Hosts without FMA would call `fmaf` per lane, which the vectorizer may refuse.
    #[cfg(target_arch = "x86_64")]
    if !std::arch::is_x86_feature_detected!("fma") {
        return;
    }
    assert!(ir.contains("@llvm.fma.v"), "no vector exp2");
    assert!(
        !ir.contains("call float @llvm.fma.f32("),
        "exp2 is computed one lane at a time somewhere"
    );
}

/// fp8 attention through the `attention` wrapper, which passes `v` transposed as the
/// kernel takes it for fp8: on every device within fp8's rounding of `p` and of the
/// output (E4M3: 2^-4 relative each) of the f64 reference on the same fp8 inputs.
#[test]
fn fp8_attention_takes_v_transposed_and_matches_the_reference() {
    use tritium::dsl::trace::F8E4M3;
    let shape = (1, 2, 48, 16);
    let [q, k, v] = [4, 5, 6].map(|seed| random4(shape, seed).mapv(F8E4M3::from_f32));
    let wide = |a: &Array4<F8E4M3>| a.mapv(|x| f64::from(x.to_f32()));
    let scale = 0.25;
    for causal in [false, true] {
        let (want, want_lse) = reference(&wide(&q), &wide(&k), &wide(&v), scale, causal);
        let config = AttentionConfig {
            block_m: 16,
            block_n: 16,
            causal,
        };
        for device in all_devices() {
            let what = format!("causal={causal} on {device:?}");
            let (out, lse) =
                attention(&device, q.view(), k.view(), v.view(), scale as f32, config).unwrap();
            assert_close(&out.mapv(|x| x.to_f32()), &want, 0.15, 0.02, &what);
            assert_close(&lse, &want_lse, 1e-5, 1e-5, &format!("{what}: lse"));
        }
    }
}
