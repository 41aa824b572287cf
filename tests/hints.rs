//! Triton's hints `multiple_of`, `max_contiguous` and `max_constancy`: recorded in the IR
//! on integer tiles, results unchanged on every device, and trusted by the CUDA generator,
//! whose vector loads skip the run-time test that a chunk's pointers are consecutive.

use crate::common::{all_devices, random_f32};
use tritium::prelude::*;

/// `out[i] = x[index[i]]`, with `index` promised to hold aligned runs of 4 consecutive
/// integers when `HINT`.
#[kernel]
fn gather_runs(
    out: Ptr<f32>,
    x: Ptr<f32>,
    index: Ptr<i32>,
    #[constexpr] BLOCK: usize,
    #[constexpr] HINT: bool,
) {
    let offs = arange(0, BLOCK);
    let idx = load(index + offs);
    let idx = if HINT {
        max_contiguous(multiple_of(idx, 4), 4)
    } else {
        idx
    };
    store(out + offs, load(x + idx));
}

/// Runs of 4 consecutive indices starting at multiples of 4, in shuffled order.
fn runs(n: usize) -> Vec<i32> {
    (0..n / 4)
        .flat_map(|r| {
            let start = ((r * 7) % (n / 4)) * 4;
            (0..4).map(move |k| (start + k) as i32)
        })
        .collect()
}

#[test]
fn hints_change_no_result_on_any_device() {
    let n = 256;
    let x = random_f32(n, 8);
    let index = runs(n);
    let want: Vec<f32> = index.iter().map(|&i| x[i as usize]).collect();
    for device in all_devices() {
        for hint in [false, true] {
            let mut out = vec![0f32; n];
            gather_runs::launch(&device, 1, &mut out[..], &x[..], &index[..], n, hint).unwrap();
            assert_eq!(out, want, "{device:?}, hint {hint}");
        }
    }
}

#[test]
fn hints_are_in_the_ir() {
    use tritium::dsl::trace::Specialization;
    let f = gather_runs::trace(&Specialization::default(), 256, true).unwrap();
    let text = tritium::dsl::ir::print_function(&f);
    assert!(
        text.contains("hint") && text.contains("kind = max_contiguous, values = 4"),
        "{text}"
    );
    assert!(text.contains("kind = multiple_of, values = 4"), "{text}");
    let back = tritium::dsl::ir::parse_function(&text).unwrap();
    assert_eq!(tritium::dsl::ir::print_function(&back), text);
}

/// With the promise, the PTX tests fewer pointer equalities before its vector loads.
#[test]
fn cuda_vector_loads_trust_max_contiguous() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    let s = Specialization::default();
    let compares = |hint| {
        // 1024 elements over 128 threads: chunks of 4 (`ld.global.v4.f32`).
        let f = gather_runs::trace(&s, 1024, hint).unwrap();
        let ptx = compile_ptx(&f, "k", &CudaCompileOptions::default())
            .unwrap()
            .text;
        // 64-bit compares: the pointer tests (`setp.eq.s64`, or `setp.ne.s64` inverted).
        ptx.lines()
            .filter(|l| l.contains("setp.") && l.contains(".s64"))
            .count()
    };
    let (plain, hinted) = (compares(false), compares(true));
    assert!(
        hinted < plain,
        "{hinted} pointer compares with the hint, {plain} without"
    );
}
