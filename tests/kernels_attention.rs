//! Triton tutorial 06's fused attention (forward, block pointers) on every device against
//! a plain f64 softmax-attention, causal and not, on sequence lengths that are not
//! multiples of the blocks, in f32 and f16.

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
        let shape = (z, h, n, d);
        let (q, k, v) = (random4(shape, 1), random4(shape, 2), random4(shape, 3));
        let scale = 1.0 / (d as f32).sqrt();
        let f64s = |a: &Array4<f32>| a.mapv(f64::from);
        let (want, want_lse) = reference(&f64s(&q), &f64s(&k), &f64s(&v), scale as f64, causal);
        // f16 inputs: the reference sees the same rounded inputs.
        let half = |a: &Array4<f32>| a.mapv(half::f16::from_f32);
        let (qh, kh, vh) = (half(&q), half(&k), half(&v));
        let widen = |a: &Array4<half::f16>| a.mapv(|x| f64::from(x.to_f32()));
        let (want_h, _) = reference(&widen(&qh), &widen(&kh), &widen(&vh), scale as f64, causal);
        for device in all_devices() {
            let what = format!("{shape:?} causal={causal} on {device:?}");
            let (out, lse) =
                attention(&device, q.view(), k.view(), v.view(), scale, config(causal)).unwrap();
            assert_close(&out, &want, 1e-4, 1e-5, &format!("{what}: f32 out"));
            assert_close(&lse, &want_lse, 1e-5, 1e-5, &format!("{what}: lse"));
            let (out, _) = attention(
                &device,
                qh.view(),
                kh.view(),
                vh.view(),
                scale,
                config(causal),
            )
            .unwrap();
            let out = out.mapv(|x| x.to_f32());
            assert_close(&out, &want_h, 1e-2, 2e-3, &format!("{what}: f16 out"));
        }
    }
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

/// The forward pass compiles to PTX for sm_80 and sm_90, in f16 with tensor-core `mma`.
#[test]
fn fused_attention_compiles_to_ptx() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    use tritium_kernels::attention::attention_forward;
    let f = attention_forward::trace::<half::f16>(&Specialization::default(), 64, 32, 64, true)
        .unwrap();
    for sm in [80, 90] {
        let copts = CudaCompileOptions {
            sm,
            ..Default::default()
        };
        let ptx = compile_ptx(&f, "attention", &copts).unwrap().text;
        assert!(
            ptx.contains("mma.sync.aligned.m16n8k16"),
            "sm_{sm}: no tensor-core mma"
        );
    }
}
