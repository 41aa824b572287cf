//! The GPU benchmark table, each row side by side with its baselines in one run:
//!
//! - vector add (2^26 f32) against the device's copy bandwidth (`cuMemcpyDtoD`) and
//!   Triton's tutorial 01;
//! - fused softmax (4096 rows) against Triton's tutorial 02 and `torch.softmax`;
//! - f16 matmul 4096³ (f32 accumulation) against cuBLAS `cublasGemmEx`, loaded by cudarc,
//!   and Triton's tutorial 03;
//! - fp8 (E5M2) matmul 4096³, `b` K-major as tutorial 03's fp8 benchmark passes it,
//!   against that benchmark (Triton's tutorial 03 over its fp8 configs);
//! - the persistent matmul (f16 4096³, one program per SM) against Triton's tutorial 09;
//! - tutorial 03 through tensor descriptors (TMA on Hopper) against the same Triton kernel,
//!   and tutorial 09's persistent form of it against Triton's;
//! - fused attention forward (f16, 4 × 32 heads × 4096, head dims 64 and 128, causal and
//!   not) against Triton's tutorial 06, and its Hopper form through tensor descriptors
//!   (TMA on Hopper) against the same Triton kernel;
//! - fp8 (E5M2) attention D = 64, `v` passed transposed, against tutorial 06's fp8 path at
//!   the same config.
//!
//! The Triton and PyTorch peers run in `python3 benches/triton_peers.py` (the path is
//! relative to the package's directory, or `TRITIUM_PEERS`), timed the same way, before
//! Tritium's rows; without Triton or PyTorch those columns say why.
//!
//! ```text
//! cargo bench --bench cuda                                    # on a machine with a GPU
//! ../shared/tools/gpu-pack.sh --benches && bash .gpu/run.sh   # built on one without
//! ```
//!
//! Without `--bench` (as `cargo test` runs it) or without a GPU it says why and exits.
//! Times are the best of several rounds of back-to-back launches on the device's default
//! stream, closed by a synchronization; bandwidths count each byte read or written once.

use cudarc::cublas::{result as cublas, sys as cublas_sys};
use half::f16;
use ndarray::{Array1, Array2};
use std::collections::HashMap;
use std::process::Command;
use std::time::{Duration, Instant};
use tritium::backend::cuda::{CudaDevice, CudaTensor};
use tritium::{Device, LaunchOptions};
use tritium_kernels::attention::attention_forward;
use tritium_kernels::attention_descriptor::attention_descriptor;
use tritium_kernels::matmul::matmul_grouped;
use tritium_kernels::softmax::softmax;
use tritium_kernels::vector_add::add;

/// Best time per call of `calls` back-to-back calls of `f`, over `rounds` rounds.
fn best_per_call(gpu: &CudaDevice, rounds: usize, calls: usize, mut f: impl FnMut()) -> Duration {
    f();
    gpu.synchronize().unwrap();
    (0..rounds)
        .map(|_| {
            let t = Instant::now();
            for _ in 0..calls {
                f();
            }
            gpu.synchronize().unwrap();
            t.elapsed() / calls as u32
        })
        .min()
        .unwrap()
}

/// `launch`'s best time per call (3 rounds of 5), or `None` after printing row `name`'s
/// launch error.
fn time_launch(
    gpu: &CudaDevice,
    name: &str,
    mut launch: impl FnMut() -> tritium::Result<()>,
) -> Option<Duration> {
    if let Err(e) = launch() {
        println!("{name:<40} failed: {e}");
        return None;
    }
    Some(best_per_call(gpu, 3, 5, || launch().unwrap()))
}

fn us(t: Duration) -> f64 {
    t.as_secs_f64() * 1e6
}

fn header() {
    println!(
        "{:<40} {:>12} {:>12} {:>8} {:>10}",
        "kernel (baseline)", "tritium µs", "base µs", "ratio", "tritium"
    );
}

fn row(name: &str, t: Duration, base: Duration, rate: String) {
    println!(
        "{name:<40} {:>12.1} {:>12.1} {:>8.2} {:>10}",
        us(t),
        us(base),
        base.as_secs_f64() / t.as_secs_f64(),
        rate
    );
}

fn tflops(flops: f64, t: Duration) -> String {
    format!("{:.0} TF/s", flops / t.as_secs_f64() / 1e12)
}

fn gbps(bytes: usize, t: Duration) -> String {
    format!("{:.0} GB/s", bytes as f64 / t.as_secs_f64() / 1e9)
}

fn vector_add(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    let n = 1usize << 26;
    let x = Array1::from_iter((0..n).map(|i| (i % 97) as f32));
    let dx = CudaTensor::from_ndarray(device, &x)?;
    let dy = CudaTensor::from_ndarray(device, &x)?;
    let mut out = CudaTensor::<f32>::zeros(device, &[n])?;
    let mut copy = CudaTensor::<f32>::zeros(device, &[n])?;
    let t_copy = best_per_call(gpu, 5, 20, || copy.copy_from(&dx).unwrap());
    let copy_rate = 2.0 * (4 * n) as f64 / t_copy.as_secs_f64();
    for (block, warps) in [(1024, 4), (2048, 4), (4096, 8)] {
        let opts = LaunchOptions {
            num_warps: warps,
            ..Default::default()
        };
        let grid = n.div_ceil(block);
        let t = best_per_call(gpu, 5, 20, || {
            add::launch_with(device, grid, &opts, &mut out, &dx, &dy, n as i32, block).unwrap()
        });
        let rate = 3.0 * (4 * n) as f64 / t.as_secs_f64();
        // The ratio of rates: a kernel moving 3 bytes per 2 of the copy at the same speed is 1.0.
        println!(
            "{:<40} {:>12.1} {:>12.1} {:>8.2} {:>10}",
            format!("vector add 2^26 f32 B={block} w={warps} (copy)"),
            us(t),
            us(t_copy),
            rate / copy_rate,
            gbps(12 * n, t)
        );
        peer_row(
            peers,
            &format!("vector add B={block} w={warps} (Triton 01)"),
            "add",
            t,
            gbps(12 * n, t),
        );
    }
    let got = out.to_ndarray()?;
    assert_eq!(got.into_dimensionality().unwrap(), &x + &x);
    Ok(())
}

/// The peers' times in µs by key (`benches/triton_peers.py`'s lines), or why there are none.
fn peers() -> Result<HashMap<String, f64>, String> {
    let script =
        std::env::var("TRITIUM_PEERS").unwrap_or_else(|_| "benches/triton_peers.py".into());
    let out = Command::new("python3")
        .arg(&script)
        .output()
        .map_err(|e| format!("python3 {script}: {e}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(err.lines().last().unwrap_or("failed").to_string());
    }
    let mut times = HashMap::new();
    for line in text.lines() {
        match line.split_once(' ') {
            Some((key, us)) if us.parse::<f64>().is_ok() => {
                times.insert(key.to_string(), us.parse().unwrap());
            }
            _ => println!("peers: {line}"),
        }
    }
    Ok(times)
}

/// A Tritium row against the peer `key`, or a line saying the peer is missing.
fn peer_row(peers: &HashMap<String, f64>, name: &str, key: &str, t: Duration, rate: String) {
    match peers.get(key) {
        Some(&base) => row(name, t, Duration::from_secs_f64(base / 1e6), rate),
        None => println!("{name:<40} {:>12.1}   no peer time ({key})", us(t)),
    }
}

fn fused_softmax(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    let rows = 4096;
    for cols in [256, 1024, 4096, 8192] {
        let x = Array2::from_shape_fn((rows, cols), |(i, j)| {
            ((i * 7 + j * 13) % 101) as f32 / 50.0
        });
        let dx = CudaTensor::from_ndarray(device, &x)?;
        let mut out = CudaTensor::<f32>::zeros(device, &[rows, cols])?;
        let block = cols.next_power_of_two();
        // Triton's tutorial picks more warps for longer rows (4, 8 from 2048, 16 from
        // 8192); each count from 1 up to one element per thread is timed, the tutorial's
        // marked, so one run on a GPU shows which this code generator wants.
        let tutorial = match block {
            b if b >= 8192 => 16,
            b if b >= 2048 => 8,
            _ => 4,
        };
        let c = cols as i32;
        for num_warps in [1u32, 2, 4, 8, 16]
            .into_iter()
            .filter(|w| w * 32 <= block as u32)
        {
            let opts = LaunchOptions {
                num_warps,
                ..Default::default()
            };
            let t = best_per_call(gpu, 5, 20, || {
                softmax::launch_explicit(device, rows, &opts, &mut out, &dx, c, c, c, block)
                    .unwrap()
            });
            let mark = if num_warps == tutorial { "*" } else { "" };
            for (peer, key) in [("Triton 02", "triton"), ("torch.softmax", "torch")] {
                peer_row(
                    peers,
                    &format!("softmax {rows}×{cols} w={num_warps}{mark} ({peer})"),
                    &format!("softmax.{cols}.{key}"),
                    t,
                    gbps(8 * rows * cols, t),
                );
            }
        }
    }
    Ok(())
}

/// The f16 matmul rows' `a` (`m × k`) and `b` (`k × n`): values in [-0.5, 0.5).
fn f16_operands(m: usize, n: usize, k: usize) -> (Array2<f16>, Array2<f16>) {
    let a = Array2::from_shape_fn((m, k), |(i, j)| {
        f16::from_f32(((i + 3 * j) % 17) as f32 / 17.0 - 0.5)
    });
    let b = Array2::from_shape_fn((k, n), |(i, j)| {
        f16::from_f32(((5 * i + j) % 13) as f32 / 13.0 - 0.5)
    });
    (a, b)
}

fn f16_matmul(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    let (m, n, k) = (4096usize, 4096usize, 4096usize);
    let (a, b) = f16_operands(m, n, k);
    let da = CudaTensor::from_ndarray(device, &a)?;
    let db = CudaTensor::from_ndarray(device, &b)?;
    let mut dc = CudaTensor::<f16>::zeros(device, &[m, n])?;
    let dref = CudaTensor::<f16>::zeros(device, &[m, n])?;
    let flops = 2.0 * (m * n * k) as f64;

    // SAFETY: only looks for the library.
    if !unsafe { cublas_sys::is_culib_present() } {
        println!("f16 matmul: cuBLAS (libcublas.so) not found; no baseline");
        return Ok(());
    }
    let handle =
        cublas::create_handle().map_err(|e| tritium::Error::Device(format!("cuBLAS: {e:?}")))?;
    let (alpha, beta) = (1.0f32, 0.0f32);
    // cuBLAS: row-major C = A·B is column-major Cᵀ = Bᵀ·Aᵀ.
    // SAFETY: cuBLAS is loaded (checked above), the handle is used on this thread only,
    // and every pointer is a live device allocation of the sizes given; it runs on the
    // default stream, after the tensors' uploads and before `to_ndarray` reads `c`.
    let cublas_gemm = |c: u64| unsafe {
        cublas::gemm_ex(
            handle,
            cublas_sys::cublasOperation_t::CUBLAS_OP_N,
            cublas_sys::cublasOperation_t::CUBLAS_OP_N,
            n as i32,
            m as i32,
            k as i32,
            (&alpha as *const f32).cast(),
            db.device_ptr() as *const _,
            cublas_sys::cudaDataType_t::CUDA_R_16F,
            n as i32,
            da.device_ptr() as *const _,
            cublas_sys::cudaDataType_t::CUDA_R_16F,
            k as i32,
            (&beta as *const f32).cast(),
            c as *mut _,
            cublas_sys::cudaDataType_t::CUDA_R_16F,
            n as i32,
            cublas_sys::cublasComputeType_t::CUBLAS_COMPUTE_32F,
            cublas_sys::cublasGemmAlgo_t::CUBLAS_GEMM_DEFAULT_TENSOR_OP,
        )
        .unwrap()
    };
    gpu.synchronize()?;
    let ref_ptr = dref.device_ptr();
    let t_cublas = best_per_call(gpu, 3, 5, || cublas_gemm(ref_ptr));
    let want = dref.to_ndarray()?;
    // Tutorial 03's two largest CUDA configs and two more (`scripts/dev gpu-report` shows
    // the same four offline).
    for (bm, bn, bk, warps, stages) in [
        (128, 256, 64, 8, 3),
        (128, 128, 32, 4, 4),
        (128, 128, 64, 8, 3),
        (64, 128, 32, 4, 4),
    ] {
        let opts = LaunchOptions {
            num_warps: warps,
            num_stages: stages,
            ..Default::default()
        };
        // Tutorial 03 as Triton runs it: one grid axis, tiles in groups of 8 block rows.
        let grid = m.div_ceil(bm) * n.div_ceil(bn);
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        let launch = || {
            matmul_grouped::launch_with(
                device, grid, &opts, &mut dc, &da, &db, mi, ni, ki, ki, 1, ni, 1, ni, 1, bm, bn,
                bk, 8,
            )
        };
        let name = format!("matmul f16 4096³ {bm}×{bn}×{bk} w={warps} s={stages} (cuBLAS)");
        let Some(t) = time_launch(gpu, &name, launch) else {
            continue;
        };
        row(&name, t, t_cublas, tflops(flops, t));
        peer_row(
            peers,
            &format!("matmul f16 4096³ {bm}×{bn}×{bk} w={warps} (Triton 03)"),
            "matmul.triton",
            t,
            tflops(flops, t),
        );
        let got = dc.to_ndarray()?;
        let worst = got
            .iter()
            .zip(want.iter())
            .map(|(g, w)| (g.to_f32() - w.to_f32()).abs() / w.to_f32().abs().max(1.0))
            .fold(0f32, f32::max);
        if worst > 1e-2 {
            println!(
                "{:<40} differs from cuBLAS: worst relative error {worst}",
                ""
            );
        }
    }
    println!(
        "{:<40} {:>12} {:>12.1} {:>8} {:>10}",
        "cuBLAS gemmEx f16→f16, f32 compute",
        "",
        us(t_cublas),
        "",
        tflops(flops, t_cublas)
    );
    // SAFETY: the handle was created above and is no longer used.
    unsafe { cublas::destroy_handle(handle) }.ok();
    Ok(())
}

/// Tutorial 03's fp8 benchmark: E5M2 `a` and `b` (`b` K-major: stored as `bᵀ`, unit
/// `stride_bk`), f32 accumulation, an f16 result, against Triton's run of the same (no
/// cuBLAS row: its fp8 GEMM is cublasLt's). Sampled entries are checked against the
/// host's product.
fn fp8_matmul(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    use tritium::dsl::trace::F8E5M2;
    let (m, n, k) = (4096usize, 4096usize, 4096usize);
    let value = |x: usize| F8E5M2::from_f32((x % 13) as f32 / 4.0 - 1.5);
    let a = Array2::from_shape_fn((m, k), |(i, j)| value(i + 3 * j));
    // `b[kk][j]` is `bt[j][kk]`.
    let bt = Array2::from_shape_fn((n, k), |(j, kk)| value(5 * kk + j));
    let da = CudaTensor::from_ndarray(device, &a)?;
    let db = CudaTensor::from_ndarray(device, &bt)?;
    let mut dc = CudaTensor::<f16>::zeros(device, &[m, n])?;
    let flops = 2.0 * (m * n * k) as f64;
    for (bm, bn, bk, warps, stages) in [(128, 256, 128, 8, 3), (128, 128, 128, 4, 4)] {
        let opts = LaunchOptions {
            num_warps: warps,
            num_stages: stages,
            ..Default::default()
        };
        let grid = m.div_ceil(bm) * n.div_ceil(bn);
        let (mi, ni, ki) = (m as i32, n as i32, k as i32);
        let launch = || {
            matmul_grouped::launch_with(
                device, grid, &opts, &mut dc, &da, &db, mi, ni, ki, ki, 1, 1, ki, ni, 1, bm, bn,
                bk, 8,
            )
        };
        let name = format!("matmul fp8e5 4096³ {bm}×{bn}×{bk} w={warps} s={stages} (Triton 03)");
        let Some(t) = time_launch(gpu, &name, launch) else {
            continue;
        };
        peer_row(peers, &name, "matmul_fp8.triton", t, tflops(flops, t));
        let got = dc.to_ndarray()?;
        let worst = (0..64)
            .map(|s| {
                let (i, j) = ((s * 997) % m, (s * 1543) % n);
                let want: f64 = (0..k)
                    .map(|kk| f64::from(a[[i, kk]].to_f32()) * f64::from(bt[[j, kk]].to_f32()))
                    .sum();
                let want = f64::from(f16::from_f64(want).to_f32());
                (f64::from(got[[i, j]].to_f32()) - want).abs() / want.abs().max(1.0)
            })
            .fold(0f64, f64::max);
        if worst > 1e-2 {
            println!(
                "{:<40} differs from the host's product: worst relative error {worst}",
                ""
            );
        }
    }
    Ok(())
}

/// Tutorial 09's persistent matmul, f16 4096³ at its f16 config (128 × 256 × 64, 8 warps,
/// 3 stages), one program per SM (the count the peers report, else 132: an H100's),
/// against Triton's tutorial 09.
fn persistent_matmul(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    use tritium_kernels::matmul::matmul_persistent;
    let sms = peers.get("sms").map_or(132, |s| *s as usize);
    let name = format!("matmul persistent f16 4096³ {sms} programs (Triton 09)");
    let row = (name.as_str(), "matmul_persistent.triton");
    tiled_matmul_row(device, gpu, peers, row, &mut |opts, c, a, b, [m, n, k]| {
        matmul_persistent::launch_with(
            device, sms, opts, c, a, b, m, n, k, k, 1, n, 1, n, 1, 128, 256, 64, 8, sms,
        )
    })
}

/// Tutorial 03 through tensor descriptors, f16 4096³ at 128 × 256 × 64, 8 warps, 3 stages:
/// on Hopper its operands are copied by TMA (`matmul_descriptor`), against the same kernel
/// in Triton (`matmul_kernel_descriptor`, its descriptors built in the kernel).
fn descriptor_matmul(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    use tritium_kernels::matmul::matmul_descriptor;
    let row = (
        "matmul descriptors (TMA) f16 4096³",
        "matmul_descriptor.triton",
    );
    tiled_matmul_row(device, gpu, peers, row, &mut |opts, c, a, b, [m, n, k]| {
        let grid = (m as usize).div_ceil(128) * (n as usize).div_ceil(256);
        matmul_descriptor::launch_with(device, grid, opts, c, a, b, m, n, k, 128, 256, 64, 8)
    })
}

/// Tutorial 09's persistent matmul through tensor descriptors, f16 4096³ at 128 × 256 ×
/// 64, 8 warps, 3 stages, one program per SM: on Hopper every tile's blocks by TMA,
/// against the same Triton kernel (`matmul_kernel_descriptor_persistent`).
fn descriptor_persistent_matmul(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    use tritium_kernels::matmul::matmul_descriptor_persistent;
    let sms = peers.get("sms").map_or(132, |s| *s as usize);
    let name = format!("matmul descriptors (TMA) persistent f16 4096³ {sms} programs");
    let row = (name.as_str(), "matmul_descriptor_persistent.triton");
    tiled_matmul_row(device, gpu, peers, row, &mut |opts, c, a, b, [m, n, k]| {
        matmul_descriptor_persistent::launch_with(
            device, sms, opts, c, a, b, m, n, k, 128, 256, 64, 8, sms,
        )
    })
}

/// How a matmul row launches its kernel: `c = a @ b` of row-major f16 tensors with the
/// row's options and sizes `[m, n, k]`.
type MatmulLaunch<'a> = dyn FnMut(
        &LaunchOptions,
        &mut CudaTensor<f16>,
        &CudaTensor<f16>,
        &CudaTensor<f16>,
        [i32; 3],
    ) -> tritium::Result<()>
    + 'a;

/// The row `(name, peer key)` of an f16 4096³ matmul at tutorial 03's largest config
/// (128 × 256 × 64, 8 warps, 3 stages) made by `launch`, against its Triton peer; its
/// result checked against the grouped matmul's at the same config.
fn tiled_matmul_row(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
    (name, peer): (&str, &str),
    launch: &mut MatmulLaunch<'_>,
) -> tritium::Result<()> {
    let (m, n, k) = (4096usize, 4096usize, 4096usize);
    let (a, b) = f16_operands(m, n, k);
    let da = CudaTensor::from_ndarray(device, &a)?;
    let db = CudaTensor::from_ndarray(device, &b)?;
    let mut dc = CudaTensor::<f16>::zeros(device, &[m, n])?;
    let mut dref = CudaTensor::<f16>::zeros(device, &[m, n])?;
    let opts = LaunchOptions {
        num_warps: 8,
        num_stages: 3,
        ..Default::default()
    };
    let sizes = [m as i32, n as i32, k as i32];
    let [mi, ni, ki] = sizes;
    matmul_grouped::launch_with(
        device,
        m.div_ceil(128) * n.div_ceil(256),
        &opts,
        &mut dref,
        &da,
        &db,
        mi,
        ni,
        ki,
        ki,
        1,
        ni,
        1,
        ni,
        1,
        128,
        256,
        64,
        8,
    )?;
    let Some(t) = time_launch(gpu, name, || launch(&opts, &mut dc, &da, &db, sizes)) else {
        return Ok(());
    };
    let flops = 2.0 * (m * n * k) as f64;
    peer_row(peers, name, peer, t, tflops(flops, t));
    if dc.to_ndarray()? != dref.to_ndarray()? {
        println!("{:<40} differs from the grouped matmul's result", "");
    }
    Ok(())
}

/// Tutorial 06's forward pass on f16 `[4, 32, 4096, D]` tensors against Triton's.
fn fused_attention(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    let (z, h, n) = (4usize, 32usize, 4096usize);
    for d in [64usize, 128] {
        let shape = [z, h, n, d];
        let input = |seed: usize| {
            ndarray::Array4::from_shape_fn((z, h, n, d), |(a, b, i, j)| {
                f16::from_f32(((a * 7 + b * 5 + i * 3 + j + seed) % 23) as f32 / 23.0 - 0.5)
            })
        };
        let (q, k, v) = (
            CudaTensor::from_ndarray(device, &input(1))?,
            CudaTensor::from_ndarray(device, &input(2))?,
            CudaTensor::from_ndarray(device, &input(3))?,
        );
        let mut out = CudaTensor::<f16>::zeros(device, &shape)?;
        let mut lse = CudaTensor::<f32>::zeros(device, &[z, h, n])?;
        let scale = (d as f32).powf(-0.5);
        for causal in [false, true] {
            let flops = 4.0 * (z * h * n * n * d) as f64 * if causal { 0.5 } else { 1.0 };
            for (bm, bn, warps) in [(64, 64, 4), (128, 64, 8), (128, 32, 4)] {
                let opts = LaunchOptions {
                    num_warps: warps,
                    ..Default::default()
                };
                let grid = [n.div_ceil(bm), z * h];
                let launch = || {
                    attention_forward::launch_with(
                        device, grid, &opts, &mut out, &mut lse, &q, &k, &v, scale, n as i32, bm,
                        bn, d, causal,
                    )
                };
                let kind = if causal { "causal" } else { "full" };
                let name = format!("attention d={d} {kind} {bm}×{bn} w={warps} (Triton 06)");
                let Some(t) = time_launch(gpu, &name, launch) else {
                    continue;
                };
                peer_row(
                    peers,
                    &name,
                    &format!("attention.{d}.{kind}"),
                    t,
                    tflops(flops, t),
                );
            }
            // Tutorial 06's Hopper form (tensor descriptors: TMA on Hopper) at the issue's
            // Hopper configs, against Triton's same kernel and config.
            let (bm, bn, warps) = if d == 64 { (128, 64, 4) } else { (128, 128, 8) };
            let opts = LaunchOptions {
                num_warps: warps,
                ..Default::default()
            };
            let (grid, zh) = ([n / bm, z * h], (z * h) as i32);
            let launch = || {
                attention_descriptor::launch_with(
                    device, grid, &opts, &mut out, &mut lse, &q, &k, &v, scale, zh, n as i32, bm,
                    bn, d, causal,
                )
            };
            let kind = if causal { "causal" } else { "full" };
            let name = format!("attention descriptors d={d} {kind} {bm}×{bn} w={warps}");
            if let Some(t) = time_launch(gpu, &name, launch) {
                let peer = format!("attention_descriptor.{d}.{kind}");
                peer_row(peers, &name, &peer, t, tflops(flops, t));
            }
        }
    }
    Ok(())
}

/// Tutorial 06's fp8 path (E5M2 `q`, `k`, `v`, `v` passed transposed, an E5M2 output)
/// at Tritium's Hopper config (D = 64, 128 × 64, 4 warps), against Triton's run of the
/// same kernel and config; sampled rows checked against the host's attention.
fn fp8_attention(
    device: &Device,
    gpu: &CudaDevice,
    peers: &HashMap<String, f64>,
) -> tritium::Result<()> {
    use tritium::dsl::trace::F8E5M2;
    let (z, h, n, d) = (4usize, 32usize, 4096usize, 64usize);
    let value = |x: usize| F8E5M2::from_f32((x % 23) as f32 / 23.0 - 0.5);
    let input = |seed: usize| {
        ndarray::Array4::from_shape_fn((z, h, n, d), |(a, b, i, j)| {
            value(a * 7 + b * 5 + i * 3 + j + seed)
        })
    };
    let (q, k, v) = (input(1), input(2), input(3));
    // `[Z, H, D, N]`, as the kernel takes fp8 `v`.
    let vt = v
        .clone()
        .permuted_axes([0, 1, 3, 2])
        .as_standard_layout()
        .to_owned();
    let (dq, dk, dvt) = (
        CudaTensor::from_ndarray(device, &q)?,
        CudaTensor::from_ndarray(device, &k)?,
        CudaTensor::from_ndarray(device, &vt)?,
    );
    let mut out = CudaTensor::<F8E5M2>::zeros(device, &[z, h, n, d])?;
    let mut lse = CudaTensor::<f32>::zeros(device, &[z, h, n])?;
    let scale = (d as f32).powf(-0.5);
    let (bm, bn, warps) = (128, 64, 4);
    for causal in [false, true] {
        let flops = 4.0 * (z * h * n * n * d) as f64 * if causal { 0.5 } else { 1.0 };
        let opts = LaunchOptions {
            num_warps: warps,
            num_stages: 3,
            ..Default::default()
        };
        let grid = [n.div_ceil(bm), z * h];
        let launch = || {
            attention_forward::launch_with(
                device, grid, &opts, &mut out, &mut lse, &dq, &dk, &dvt, scale, n as i32, bm, bn,
                d, causal,
            )
        };
        let kind = if causal { "causal" } else { "full" };
        let name = format!("attention fp8e5 d={d} {kind} {bm}×{bn} w={warps} (Triton 06)");
        let Some(t) = time_launch(gpu, &name, launch) else {
            continue;
        };
        peer_row(
            peers,
            &name,
            &format!("attention_fp8.{d}.{kind}"),
            t,
            tflops(flops, t),
        );
        // Rows of head 0 against the host's softmax attention on the same fp8 inputs.
        let got = out.to_ndarray()?;
        let mut worst = 0f64;
        for i in [0, 1, 777, n - 1] {
            let seen = if causal { i + 1 } else { n };
            let s: Vec<f64> = (0..seen)
                .map(|j| {
                    let dot: f64 = (0..d)
                        .map(|c| {
                            f64::from(q[[0, 0, i, c]].to_f32())
                                * f64::from(k[[0, 0, j, c]].to_f32())
                        })
                        .sum();
                    dot * f64::from(scale)
                })
                .collect();
            let max = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
            let w: Vec<f64> = s.iter().map(|x| (x - max).exp()).collect();
            let total: f64 = w.iter().sum();
            for c in 0..d {
                let want: f64 = (0..seen)
                    .map(|j| w[j] / total * f64::from(v[[0, 0, j, c]].to_f32()))
                    .sum();
                let err = (f64::from(got[[0, 0, i, c]].to_f32()) - want).abs();
                worst = worst.max(err / (0.1 + want.abs()));
            }
        }
        println!("  sampled rows: worst error {worst:.3} of (0.1 + |value|) (fp8 rounding)");
    }
    Ok(())
}

fn main() -> tritium::Result<()> {
    if !std::env::args().any(|a| a == "--bench") {
        println!("bench cuda: run with --bench (cargo bench --bench cuda) to time it");
        return Ok(());
    }
    let device = match Device::cuda(0) {
        Ok(d) => d,
        Err(e) => {
            println!("bench cuda: skipped: {e}");
            return Ok(());
        }
    };
    let Device::Cuda(gpu) = &device else {
        return Err(tritium::Error::Device(
            "Device::cuda(0) gave no CUDA device".into(),
        ));
    };
    println!("{gpu:?}");
    let peers = peers().unwrap_or_else(|why| {
        println!("peers: {why}");
        HashMap::new()
    });
    header();
    vector_add(&device, gpu, &peers)?;
    fused_softmax(&device, gpu, &peers)?;
    f16_matmul(&device, gpu, &peers)?;
    fp8_matmul(&device, gpu, &peers)?;
    persistent_matmul(&device, gpu, &peers)?;
    descriptor_matmul(&device, gpu, &peers)?;
    descriptor_persistent_matmul(&device, gpu, &peers)?;
    fused_attention(&device, gpu, &peers)?;
    fp8_attention(&device, gpu, &peers)?;
    Ok(())
}
