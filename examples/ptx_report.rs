//! What `ptxas` makes of the GPU benchmark's kernels, without a GPU: each kernel and config
//! of `benches/cuda.rs` compiled to PTX for sm_90, then `ptxas -v` (from `$PTXAS`, `PATH`,
//! or `/usr/local/cuda/bin`; the `nvidia-cuda-nvcc-cu12` wheel has one) for its registers,
//! spills and stack, beside counts of the PTX instructions that matter to a matmul.
//!
//! ```text
//! cargo run --release --example ptx_report [DIR]   # PTX files kept in DIR when given
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
use tritium::dsl::ir::Function;
use tritium::dsl::trace::Specialization;
use tritium_kernels::{attention, matmul, softmax, vector_add};

type F16 = half::f16;

/// The benchmark's kernels and configs: (row name, traced kernel, warps).
fn kernels() -> Vec<(String, Function, u32)> {
    let s = Specialization::default();
    let mut all = vec![
        (
            "vector add B=1024".to_string(),
            vector_add::add::trace::<f32>(&s, 1024).unwrap(),
            4,
        ),
        (
            "softmax 1024 cols".to_string(),
            softmax::softmax::trace::<f32>(&s, 1024).unwrap(),
            4,
        ),
    ];
    for (bm, bn, bk, warps) in [
        (128, 128, 32, 4),
        (128, 128, 64, 8),
        (128, 256, 32, 8),
        (64, 128, 32, 4),
    ] {
        all.push((
            format!("matmul f16 {bm}×{bn}×{bk} w={warps}"),
            matmul::matmul::trace::<F16, F16>(&s, bm, bn, bk).unwrap(),
            warps,
        ));
    }
    for d in [64, 128] {
        for (bm, bn, warps) in [(64, 64, 4), (128, 64, 8), (128, 32, 4)] {
            all.push((
                format!("attention d={d} {bm}×{bn} w={warps}"),
                attention::attention_forward::trace::<F16>(&s, bm, bn, d, false).unwrap(),
                warps,
            ));
        }
    }
    all
}

fn ptxas() -> Option<PathBuf> {
    let named = std::env::var_os("PTXAS").map(PathBuf::from);
    let on_path = std::env::var_os("PATH").and_then(|p| {
        std::env::split_paths(&p)
            .map(|d| d.join("ptxas"))
            .find(|c| c.is_file())
    });
    let cuda = Some(PathBuf::from("/usr/local/cuda/bin/ptxas")).filter(|p| p.is_file());
    named.or(on_path).or(cuda)
}

/// `ptxas -v`'s registers, spilled bytes (stores + loads) and stack bytes.
fn resources(ptxas: &Path, ptx: &Path) -> Result<(u32, u32, u32), String> {
    let out = Command::new(ptxas)
        .args(["-arch=sm_90", "-v", "-o", "/dev/null"])
        .arg(ptx)
        .output()
        .map_err(|e| format!("{}: {e}", ptxas.display()))?;
    let text = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        return Err(text.lines().last().unwrap_or("failed").to_string());
    }
    // "Used 255 registers, used 1 barriers, 208 bytes cumulative stack size" and
    // "208 bytes stack frame, 216 bytes spill stores, 204 bytes spill loads".
    let number_of = |text: &str, what: &str| -> u32 {
        (text.split([',', ':']))
            .find_map(|part| part.trim().strip_suffix(what).map(str::trim))
            .and_then(|n| n.rsplit(' ').next().and_then(|n| n.parse().ok()))
            .unwrap_or(0)
    };
    let regs = number_of(&text, "registers");
    let stack = number_of(&text, "bytes stack frame");
    let spill = number_of(&text, "bytes spill stores") + number_of(&text, "bytes spill loads");
    Ok((regs, spill, stack))
}

fn count(ptx: &str, op: &str) -> usize {
    ptx.lines()
        .filter(|l| l.trim_start().starts_with(op))
        .count()
}

fn main() {
    let dir = std::env::args()
        .nth(1)
        .map(PathBuf::from)
        .unwrap_or_else(|| {
            std::env::temp_dir().join(format!("tritium-ptx-{}", std::process::id()))
        });
    std::fs::create_dir_all(&dir).expect("a directory for the PTX");
    let ptxas = ptxas();
    if ptxas.is_none() {
        println!("ptx_report: no ptxas (set PTXAS): PTX instruction counts only");
    }
    println!(
        "{:<32} {:>5} {:>7} {:>6} {:>6} {:>8} {:>8} {:>8} {:>6}",
        "kernel (sm_90)", "regs", "spill B", "stack", "mma", "ld.sh", "st.sh", "ld.glob", "cvt"
    );
    for (name, f, warps) in kernels() {
        let options = CudaCompileOptions {
            sm: 90,
            num_warps: warps,
            ..Default::default()
        };
        let ptx = match compile_ptx(&f, "k", &options) {
            Ok(p) => p.text,
            Err(e) => {
                println!("{name:<32} failed: {e}");
                continue;
            }
        };
        let file = dir.join(format!("{}.ptx", name.replace([' ', '×', '='], "_")));
        std::fs::write(&file, &ptx).expect("the PTX written");
        let (regs, spill, stack) = match &ptxas {
            Some(p) => match resources(p, &file) {
                Ok(r) => (r.0.to_string(), r.1.to_string(), r.2.to_string()),
                Err(e) => (format!("ptxas: {e}"), String::new(), String::new()),
            },
            None => ("-".into(), "-".into(), "-".into()),
        };
        println!(
            "{name:<32} {regs:>5} {spill:>7} {stack:>6} {:>6} {:>8} {:>8} {:>8} {:>6}",
            count(&ptx, "mma.sync"),
            count(&ptx, "ld.shared"),
            count(&ptx, "st.shared"),
            count(&ptx, "ld.global"),
            count(&ptx, "cvt."),
        );
    }
    println!("PTX in {}", dir.display());
}
