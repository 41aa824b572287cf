//! The GPU benchmark's kernels compiled to PTX without a GPU, for `scripts/gpu_report.py`
//! (`scripts/dev gpu-report`), which assembles them with `ptxas` and sets them beside
//! Triton's own tutorial kernels compiled offline for the same target and config.
//!
//! ```text
//! cargo run --release --example ptx_report DIR   # DIR/<key>.sm_<sm>.ptx and DIR/manifest.tsv
//! ```
//!
//! Each manifest row is `key  sm  num_warps  num_stages  shared_bytes  ptx`: the key names
//! the kernel and config as the report's Triton side parses it (`matmul/f16/128x256x64/w8/s3`,
//! `matmul/fp8e5/128x256x128/w8/s3`,
//! `attention/f16/d64/128x64/w4/s3/causal`), `shared_bytes` is the dynamic shared memory a
//! launch provides (which `ptxas` does not see). Each kernel is specialized as a launch at
//! the bench's sizes specializes it (Triton's launcher does the same for its kernels): unit
//! strides are constants, and the other integers (multiples of 16) and the pointers (16-byte
//! aligned) are promised divisible by 16.

use std::fmt::Write as _;
use std::path::PathBuf;
use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
use tritium::dsl::ir::Function;
use tritium::dsl::trace::{Specialization, F8E4M3, F8E5M2};
use tritium_kernels::{attention, attention_descriptor, matmul, softmax, vector_add};

type F16 = half::f16;

/// One kernel and config of the report.
struct Case {
    key: String,
    kernel: Function,
    warps: u32,
    stages: u32,
    /// The architectures it is compiled for.
    sms: &'static [u32],
}

/// Every architecture of the report.
const ALL_SMS: &[u32] = &[80, 90];

/// What a launch of a kernel with `params` runtime parameters specializes at the bench's
/// sizes: those in `ones` equal 1, the others but the floats in `floats` are multiples of 16
/// (pointers: 16-byte aligned).
fn launch_spec(params: usize, ones: &[usize], floats: &[usize]) -> Specialization {
    Specialization {
        ones: (0..params).map(|i| ones.contains(&i)).collect(),
        sixteens: (0..params)
            .map(|i| !ones.contains(&i) && !floats.contains(&i))
            .collect(),
    }
}

/// The GPU bench's kernels, and the configs of Triton's tutorials the issue compares.
fn cases() -> Result<Vec<Case>, String> {
    let e = |e: tritium::dsl::Error| e.to_string();
    let s = launch_spec(5, &[], &[]);
    let mut all = vec![
        Case {
            key: "vector_add/f32/1024/w4/s1".into(),
            kernel: vector_add::add::trace::<f32>(&s, 1024).map_err(e)?,
            warps: 4,
            stages: 1,
            sms: ALL_SMS,
        },
        Case {
            key: "softmax/f32/1024/w4/s1".into(),
            kernel: softmax::softmax::trace::<f32>(&s, 1024).map_err(e)?,
            warps: 4,
            stages: 1,
            sms: ALL_SMS,
        },
    ];
    // Triton tutorial 03's two largest CUDA configs, then the bench's others.
    for (bm, bn, bk, warps, stages) in [
        (128, 256, 64, 8, 3),
        (128, 128, 32, 4, 4),
        (128, 128, 64, 8, 3),
        (64, 128, 32, 4, 4),
    ] {
        all.push(Case {
            key: format!("matmul/f16/{bm}x{bn}x{bk}/w{warps}/s{stages}"),
            kernel: matmul::matmul_grouped::trace::<F16, F16>(
                &launch_spec(12, &[7, 9, 11], &[]),
                bm,
                bn,
                bk,
                8,
            )
            .map_err(e)?,
            warps,
            stages,
            sms: ALL_SMS,
        });
    }
    // Tutorial 03's fp8 config on Hopper (E5M2 as its benchmark casts, `b` passed as
    // `b.T`: K-major, so `stride_bk` is the unit stride), the f16 result.
    all.push(Case {
        key: "matmul/fp8e5/128x256x128/w8/s3".into(),
        kernel: matmul::matmul_grouped::trace::<F8E5M2, F16>(
            &launch_spec(12, &[7, 8, 11], &[]),
            128,
            256,
            128,
            8,
        )
        .map_err(e)?,
        warps: 8,
        stages: 3,
        sms: &[90],
    });
    // Tutorial 09's persistent matmul at tutorial 03's largest config, 132 programs (an
    // H100's SMs): the K loop nested in the loop over tiles.
    all.push(Case {
        key: "matmul_persistent/f16/128x256x64/w8/s3".into(),
        kernel: matmul::matmul_persistent::trace::<F16, F16>(
            &launch_spec(12, &[7, 9, 11], &[]),
            128,
            256,
            64,
            8,
            132,
        )
        .map_err(e)?,
        warps: 8,
        stages: 3,
        sms: ALL_SMS,
    });
    // Tutorial 03 through tensor descriptors at its largest config: on Hopper the blocks
    // are copied by TMA and waited for on `mbarrier`s.
    all.push(Case {
        key: "matmul_descriptor/f16/128x256x64/w8/s3".into(),
        kernel: matmul::matmul_descriptor::trace::<F16, F16>(
            &launch_spec(6, &[], &[]),
            128,
            256,
            64,
            8,
        )
        .map_err(e)?,
        warps: 8,
        stages: 3,
        sms: ALL_SMS,
    });
    // Tutorial 09's persistent matmul through descriptors, one program per H100 SM: on
    // Hopper every tile's blocks by TMA.
    all.push(Case {
        key: "matmul_descriptor_persistent/f16/128x256x64/w8/s3".into(),
        kernel: matmul::matmul_descriptor_persistent::trace::<F16, F16>(
            &launch_spec(6, &[], &[]),
            128,
            256,
            64,
            8,
            132,
        )
        .map_err(e)?,
        warps: 8,
        stages: 3,
        sms: &[90][..],
    });
    // Tutorial 06's configs, and issue 45's D = 128 Hopper config (128 × 128, 8 warps: on
    // sm_80 it spills, as Triton's does, and no one runs it there).
    for (d, bm, bn, warps, sms) in [
        (64, 128, 64, 4, ALL_SMS),
        (128, 128, 64, 8, ALL_SMS),
        (128, 128, 128, 8, &[90][..]),
    ] {
        for causal in [false, true] {
            let mode = if causal { "causal" } else { "full" };
            all.push(Case {
                key: format!("attention/f16/d{d}/{bm}x{bn}/w{warps}/s3/{mode}"),
                kernel: attention::attention_forward::trace::<F16>(
                    &launch_spec(7, &[], &[5]),
                    bm,
                    bn,
                    d,
                    causal,
                )
                .map_err(e)?,
                warps,
                stages: 3,
                sms,
            });
        }
    }
    // Tutorial 06's fp8 path (E5M2; `v` given transposed): both products on QGMMA. E4M3
    // (no Triton row: the tutorial runs E5M2) has no infinity to keep.
    // D = 128 at the Hopper config of the f16 rows (128 × 128, 8 warps).
    for (ty, causal, (d, bn, warps)) in [
        ("fp8e5", false, (64, 64, 4)),
        ("fp8e5", true, (64, 64, 4)),
        ("fp8e4", false, (64, 64, 4)),
        ("fp8e5", false, (128, 128, 8)),
    ] {
        let mode = if causal { "causal" } else { "full" };
        let spec = launch_spec(7, &[], &[5]);
        let kernel = match ty {
            "fp8e5" => attention::attention_forward::trace::<F8E5M2>(&spec, 128, bn, d, causal),
            _ => attention::attention_forward::trace::<F8E4M3>(&spec, 128, bn, d, causal),
        };
        all.push(Case {
            key: format!("attention/{ty}/d{d}/128x{bn}/w{warps}/s3/{mode}"),
            kernel: kernel.map_err(e)?,
            warps,
            stages: 3,
            sms: &[90][..],
        });
    }
    // Tutorial 06's Hopper form (tensor descriptors, keys as `desc_k.load(..).T`): the
    // key and value blocks copied by TMA.
    for (d, bm, bn, warps) in [(64, 128, 64, 4), (128, 128, 128, 8)] {
        for causal in [false, true] {
            let mode = if causal { "causal" } else { "full" };
            all.push(Case {
                key: format!("attention_descriptor/f16/d{d}/{bm}x{bn}/w{warps}/s3/{mode}"),
                kernel: attention_descriptor::attention_descriptor::trace::<F16>(
                    &launch_spec(8, &[], &[5]),
                    bm,
                    bn,
                    d,
                    causal,
                )
                .map_err(e)?,
                warps,
                stages: 3,
                sms: &[90][..],
            });
        }
    }
    Ok(all)
}

fn main() {
    let Some(dir) = std::env::args().nth(1).map(PathBuf::from) else {
        eprintln!("usage: ptx_report DIR");
        std::process::exit(2);
    };
    let cases = cases().unwrap_or_else(|e| {
        eprintln!("ptx_report: tracing failed: {e}");
        std::process::exit(1);
    });
    std::fs::create_dir_all(&dir).expect("a directory for the PTX");
    let mut manifest = String::from("key\tsm\tnum_warps\tnum_stages\tshared_bytes\tptx\n");
    let mut failed = false;
    for sm in [80, 90] {
        for case in cases.iter().filter(|c| c.sms.contains(&sm)) {
            let options = CudaCompileOptions {
                sm,
                num_warps: case.warps,
                num_stages: case.stages,
                ..Default::default()
            };
            let ptx = match compile_ptx(&case.kernel, "k", &options) {
                Ok(p) => p,
                Err(e) => {
                    eprintln!("ptx_report: {} (sm_{sm}) failed: {e}", case.key);
                    failed = true;
                    continue;
                }
            };
            let file = format!("{}.sm_{sm}.ptx", case.key.replace('/', "_"));
            std::fs::write(dir.join(&file), &ptx.text).expect("the PTX written");
            if sm == 80 {
                let tir = format!("{}.tir", case.key.replace('/', "_"));
                let text = tritium::dsl::ir::print_function(&case.kernel);
                std::fs::write(dir.join(tir), text).expect("the tile IR written");
            }
            // Hopper's PTX targets `sm_90a` (its `wgmma`), which ptxas must be told.
            let target = if sm >= 90 {
                format!("{sm}a")
            } else {
                sm.to_string()
            };
            writeln!(
                manifest,
                "{}\t{target}\t{}\t{}\t{}\t{file}",
                case.key, case.warps, case.stages, ptx.shared_bytes
            )
            .expect("a String takes writes");
        }
    }
    std::fs::write(dir.join("manifest.tsv"), manifest).expect("the manifest written");
    println!("ptx_report: PTX and manifest.tsv in {}", dir.display());
    if failed {
        std::process::exit(1);
    }
}
