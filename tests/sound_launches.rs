//! Launches are sound by default (issue 43): a launch whose kernel would touch bytes
//! outside its buffers is an error on every device, nothing written outside them, while a
//! right launch runs the unchecked code its bounds proof allows.

use crate::common::cuda_device;
use ndarray::{s, Array1};
use tritium::backend::pipeline::{stats, TargetKind};
use tritium::prelude::*;

#[kernel]
fn sound_add(out: Ptr<f32>, x: Ptr<f32>, y: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    store(
        out + offs,
        load(x + offs, mask = mask) + load(y + offs, mask = mask),
        mask = mask,
    );
}

/// `out[i] = x[i + skip]`: with `skip = 2^62` the byte offset wraps around the address
/// space back onto `x` itself.
#[kernel]
fn sound_skip(out: Ptr<f32>, x: Ptr<f32>, skip: i64, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    store(
        out + offs,
        load(x + (offs.to(DType::I64) + skip), mask = mask),
        mask = mask,
    );
}

fn devices() -> Vec<Device> {
    let mut d = vec![
        Device::cpu(),
        Device::cuda_emulator(),
        Device::interpreter(),
    ];
    d.extend(cuda_device("sound launches"));
    d
}

/// Buffers of 16 elements within arrays of 32 whose other elements are canaries.
struct Guarded {
    out: Array1<f32>,
    x: Array1<f32>,
    y: Array1<f32>,
}

const CANARY: f32 = -7.0;

impl Guarded {
    fn new() -> Self {
        let fill = |v: f32| {
            let mut a = Array1::from_elem(32, CANARY);
            a.slice_mut(s![8..24]).fill(v);
            a
        };
        Guarded {
            out: fill(0.0),
            x: fill(1.0),
            y: fill(2.0),
        }
    }

    /// Whether every canary survived.
    fn intact(&self) -> bool {
        let edges =
            |a: &Array1<f32>| (a.iter().take(8).chain(a.iter().skip(24))).all(|v| *v == CANARY);
        edges(&self.out) && edges(&self.x) && edges(&self.y)
    }
}

#[test]
fn bad_launches_are_errors_on_every_device_with_nothing_written_outside() {
    // (case, out length, x length, n, grid)
    let cases: [(&str, usize, usize, i32, u64); 4] = [
        ("short output", 15, 16, 16, 1),
        ("short input", 16, 4, 16, 1),
        ("zero-length input", 16, 0, 8, 1),
        ("n past the end", 16, 16, 17, 2),
    ];
    for d in devices() {
        for (case, out_len, x_len, n, grid) in cases {
            let mut g = Guarded::new();
            let (x, y) = (g.x.slice(s![8..8 + x_len]), g.y.slice(s![8..24]));
            let mut out = g.out.slice_mut(s![8..8 + out_len]);
            let r = sound_add::launch(&d, grid, &mut out, x, y, n, 16);
            let e = r.expect_err(&format!("{d:?}, {case}: the launch succeeded"));
            let m = e.to_string();
            let oob = m.contains("out-of-bounds") || m.contains("outside every buffer");
            assert!(
                oob && m.contains("tests/sound_launches.rs:"),
                "{d:?}, {case}: {m}"
            );
            assert!(g.intact(), "{d:?}, {case}: a canary changed");
        }
    }
}

#[test]
fn an_address_wrapping_around_onto_the_buffer_is_an_error() {
    for d in devices() {
        let x = Array1::from_iter((0..16).map(|i| i as f32));
        let mut out = Array1::<f32>::zeros(16);
        let e = sound_skip::launch(&d, 1, &mut out, &x, 1 << 62, 16, 16).unwrap_err();
        let m = e.to_string();
        let oob = m.contains("out-of-bounds load")
            || m.contains("load of f32 (4 bytes) at address 0x8000000000000000");
        assert!(oob, "{d:?}: {m}");
        assert!(out.iter().all(|v| *v == 0.0), "{d:?}: wrote {out}");
        // A right skip is proven and reads what it should.
        sound_skip::launch(&d, 1, &mut out, x.slice(s![..]), 0, 16, 16).unwrap();
        assert_eq!(out, x, "{d:?}");
    }
}

#[test]
fn a_right_launch_runs_the_unchecked_kernel_and_a_wrong_one_a_checked_variant() {
    let compiles = || stats().kernel_on(TargetKind::Cpu, "sound_add").compiles;
    let before = compiles();
    let (x, y) = (Array1::from_elem(40, 1.0f32), Array1::from_elem(40, 2.0f32));
    let mut out = Array1::<f32>::zeros(40);
    for n in [40, 33, 17] {
        sound_add::launch(&Device::cpu(), 3, &mut out, &x, &y, n, 16).unwrap();
    }
    assert!(out.iter().all(|v| *v == 3.0));
    let right = compiles() - before;
    // Some other test may compile the kernel's default too: at most once here.
    assert!(right <= 1, "right launches compiled {right} kernels");
    let mut short = Array1::<f32>::zeros(39);
    assert!(sound_add::launch(&Device::cpu(), 3, &mut short, &x, &y, 40, 16).is_err());
    assert!(
        compiles() > before + right - 1,
        "the wrong launch compiled its checked variant"
    );
    // The promise of `launch_unchecked` holds here, so it runs the same kernel.
    let mut out = Array1::<f32>::zeros(40);
    // SAFETY: every access of this launch lies inside its buffers (n = 40 of 40).
    unsafe { sound_add::launch_unchecked(&Device::cpu(), 3, &mut out, &x, &y, 40, 16) }.unwrap();
    assert!(out.iter().all(|v| *v == 3.0));
}

/// `out[i] = x[idx[i]]`: the load through `idx` is a gather no launch proves.
#[kernel]
fn sound_gather(out: Ptr<f32>, x: Ptr<f32>, idx: Ptr<i32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let i = load(idx + offs, mask = mask, other = 0);
    store(out + offs, load(x + i, mask = mask), mask = mask);
}

#[test]
fn only_the_gather_is_checked_and_a_bad_index_is_an_error_on_every_device() {
    use tritium::dsl::ir::SiteProof;
    let f = sound_gather::trace(&Default::default(), 16).unwrap();
    let proof = tritium::dsl::ir::bounds_proof(&f);
    let kinds: Vec<bool> = proof
        .sites()
        .iter()
        .map(|s| matches!(s, SiteProof::Proof(_)))
        .collect();
    // The `idx` load and the store are proven; the gather is not.
    assert_eq!(kinds, [true, false, true]);
    assert_eq!(proof.unprovable(), [1]);
    let x = Array1::from_iter((0..16).map(|i| i as f32 * 10.0));
    for d in devices() {
        let idx = Array1::from_iter((0..16).map(|i| 15 - i));
        let mut out = Array1::<f32>::zeros(16);
        sound_gather::launch(&d, 1, &mut out, &x, &idx, 16, 16).unwrap();
        assert_eq!(
            out,
            Array1::from_iter((0..16).map(|i| (15 - i) as f32 * 10.0)),
            "{d:?}"
        );
        let mut bad = idx.clone();
        bad[3] = 16;
        let e = sound_gather::launch(&d, 1, &mut out, &x, &bad, 16, 16).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("out-of-bounds load") || m.contains("outside every buffer"),
            "{d:?}: {m}"
        );
    }
}

/// On CUDA a default launch whose proof covers every site runs the PTX an unchecked one
/// does: not an instruction added; a kernel with an unprovable site checks that one only.
#[test]
fn proven_kernels_get_the_unchecked_ptx() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::backend::SiteChecks;
    let s = tritium::dsl::trace::Specialization::default();
    let ptx = |f: &tritium::dsl::ir::Function, sites| {
        let copts = CudaCompileOptions {
            sm: 80,
            sites,
            ..Default::default()
        };
        compile_ptx(f, "k", &copts).unwrap().text
    };
    for f in [
        tritium_kernels::vector_add::add::trace::<f32>(&s, 1024).unwrap(),
        tritium_kernels::grouped_gemm::grouped_matmul::trace::<half::f16>(&s, 4, 64, 64, 32)
            .unwrap(),
        tritium_kernels::matmul::matmul_grouped::trace::<half::f16, f32>(&s, 64, 64, 32, 8)
            .unwrap(),
        tritium_kernels::attention::attention_forward::trace::<half::f16>(&s, 64, 32, 64, true)
            .unwrap(),
    ] {
        assert_eq!(
            ptx(&f, SiteChecks::Unprovable),
            ptx(&f, SiteChecks::None),
            "{}",
            f.name
        );
    }
    let f = sound_gather::trace(&s, 16).unwrap();
    let (default, unchecked) = (ptx(&f, SiteChecks::Unprovable), ptx(&f, SiteChecks::None));
    let extra = format!("k_param_{}", f.params.len());
    assert!(default.contains(&extra) && !unchecked.contains(&extra));
    // One checked access: one fault record claimed by compare-exchange.
    assert_eq!(
        default.matches("atom.global.cas.b64").count(),
        1,
        "{default}"
    );
}

#[kernel]
#[autotune(configs = [config(BLOCK = 16), config(BLOCK = 32)], key = [n])]
fn sound_tuned_add(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    store(out + offs, load(x + offs, mask = mask) * 2.0, mask = mask);
}

#[test]
fn an_autotuned_kernel_is_sound_by_default_and_has_launch_unchecked() {
    let x = Array1::from_iter((0..40).map(|i| i as f32));
    let grid = |m: &sound_tuned_add::Meta| 40usize.div_ceil(m.BLOCK);
    let mut out = Array1::<f32>::zeros(40);
    sound_tuned_add::launch(&Device::cpu(), grid, &mut out, &x, 40).unwrap();
    assert_eq!(out, &x * 2.0);
    let mut short = Array1::<f32>::zeros(39);
    assert!(sound_tuned_add::launch(&Device::cpu(), grid, &mut short, &x, 40).is_err());
    let mut out = Array1::<f32>::zeros(40);
    // SAFETY: 40 elements of 40 in every buffer, whatever BLOCK the tuner picks.
    unsafe { sound_tuned_add::launch_unchecked(&Device::cpu(), grid, &mut out, &x, 40) }.unwrap();
    assert_eq!(out, &x * 2.0);
}

/// `out[i] = x[idx[i]]` through the shipped gather: the builtin may read `x[0..bound)`.
#[kernel]
fn sound_builtin_gather(out: Ptr<f32>, x: Ptr<f32>, idx: Ptr<i32>, bound: i32) {
    let i = load(idx + arange(0, 16));
    let r = custom(
        "__builtin_gather_load",
        x,
        i,
        bound,
        out = full([16], -1.0, DType::F32),
    );
    store(out + arange(0, 16), r);
}

/// `dst[idx[i]] += 1` through the shipped atomic on `dst[0..bound)`.
#[kernel]
fn sound_builtin_scatter(dst: Ptr<f32>, idx: Ptr<i32>, bound: i32) {
    let i = load(idx + arange(0, 16));
    let _old = custom(
        "__builtin_indirect_atomic",
        dst,
        i,
        full([16], 1.0, DType::F32),
        bound,
        0,
        out = zeros([16], DType::F32),
    );
}

/// Rows `idx[r]` of `x` (rows of 4 at `stride`, `rows` of them) through the shipped
/// index select.
#[kernel]
fn sound_builtin_rows(out: Ptr<f32>, x: Ptr<f32>, idx: Ptr<i32>, stride: i32, rows: i32) {
    let i = load(idx + arange(0, 4));
    let r = custom(
        "__builtin_index_select",
        x,
        i,
        stride,
        rows,
        out = zeros([4, 4], DType::F32),
    );
    store(
        out + arange(0, 4)[(.., None)] * 4 + arange(0, 4)[(None, ..)],
        r,
    );
}

/// The builtins' whole extents (`x[0..bound)`, `dst[0..bound)`, `rows × stride`) are
/// proven at launch like any access; an extent past its buffer is an error on every
/// device, whatever the index tile holds, with nothing written outside the buffers.
#[test]
fn builtins_given_an_extent_past_their_buffer_are_errors_on_every_device() {
    use tritium::dsl::ir::SiteProof;
    let s = Default::default();
    for f in [
        sound_builtin_gather::trace(&s).unwrap(),
        sound_builtin_scatter::trace(&s).unwrap(),
        sound_builtin_rows::trace(&s).unwrap(),
    ] {
        let proof = tritium::dsl::ir::bounds_proof(&f);
        let kinds: Vec<&str> = (f.fault_sites().iter()).map(|s| s.1).collect();
        assert!(kinds.iter().any(|k| k.contains("__builtin_")), "{kinds:?}");
        assert!(
            (proof.sites().iter()).all(|s| matches!(s, SiteProof::Proof(_))),
            "{}: {:?}",
            f.name,
            proof.sites()
        );
    }
    let idx = Array1::from_iter((0..16).map(|i| (i * 5) % 16));
    let oob = |m: &str| m.contains("out-of-bounds") || m.contains("outside every buffer");
    for d in devices() {
        // The gather: x holds 16 elements between canaries.
        let mut g = Guarded::new();
        let x = g.x.slice(s![8..24]);
        let mut out = g.out.slice_mut(s![8..24]);
        sound_builtin_gather::launch(&d, 1, &mut out, x, &idx, 16).unwrap();
        assert!(out.iter().all(|v| *v == 1.0), "{d:?}: {out}");
        // Every index is inside x, but the extent x[0..17) is not.
        let e = sound_builtin_gather::launch(&d, 1, &mut out, x, &idx, 17).unwrap_err();
        let m = e.to_string();
        assert!(
            oob(&m) && m.contains("`__builtin_gather_load`"),
            "{d:?}: {m}"
        );
        if d == Device::cpu() {
            eprintln!("{m}");
        }
        assert!(g.intact(), "{d:?}: a canary changed");
        // The atomic on y's 16 elements.
        let mut y = g.y.slice_mut(s![8..24]);
        sound_builtin_scatter::launch(&d, 1, &mut y, &idx, 16).unwrap();
        assert!(y.iter().all(|v| *v == 3.0), "{d:?}: {y}");
        let e = sound_builtin_scatter::launch(&d, 1, &mut y, &idx, 17).unwrap_err();
        assert!(oob(&e.to_string()), "{d:?}: {e}");
        // The call did not run (it is the only access through y).
        assert!(y.iter().all(|v| *v == 3.0), "{d:?}: {y}");
        assert!(g.intact(), "{d:?}: a canary changed");
        // Rows of 4 at stride 4: four rows fit x, five do not; a negative stride reaches
        // before it.
        let rows = Array1::from(vec![3, 0, 1, 2]);
        let mut out = Array1::<f32>::zeros(16);
        sound_builtin_rows::launch(&d, 1, &mut out, x, &rows, 4, 4).unwrap();
        for bad in [(4, 5), (-4, 2)] {
            let e = sound_builtin_rows::launch(&d, 1, &mut out, x, &rows, bad.0, bad.1);
            let e = e.unwrap_err();
            assert!(oob(&e.to_string()), "{d:?} {bad:?}: {e}");
        }
        assert!(g.intact(), "{d:?}: a canary changed");
    }
}

/// Copies `x` to `out`, `times` times more `shift` elements further on, then once more
/// `last` elements on: with `last >= 16` every lane of the last store is past the end.
#[kernel]
fn sound_shifted(out: Ptr<f32>, x: Ptr<f32>, shift: i32, times: i32, last: i32) {
    let offs = arange(0, 16);
    store(out + offs, load(x + offs) + 1.0);
    for _ in 0..times {
        store(out + offs + shift, load(x + offs));
    }
    store(out + offs + last, load(x + offs));
}

/// An unconditional access whose every lane is out of bounds makes the launch an error
/// before anything runs (the first store did not happen), naming the argument and the
/// bytes; one partly out of bounds, or inside a loop, is checked when it runs.
#[test]
fn an_access_out_of_bounds_in_every_lane_is_refused_before_the_launch_runs() {
    let x = Array1::from_iter((0..16).map(|i| i as f32));
    for d in [Device::cpu(), Device::cuda_emulator()] {
        let mut out = Array1::<f32>::zeros(16);
        let e = sound_shifted::launch(&d, 1, &mut out, &x, 0, 0, 16).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("refused before the launch ran")
                && m.contains("bytes [64, 128) from `out`, whose buffer holds bytes [0, 64)"),
            "{d:?}: {m}"
        );
        assert!(out.iter().all(|v| *v == 0.0), "{d:?}: it ran: {out}");
        // Half the lanes out: checked when it runs (the first store ran).
        let e = sound_shifted::launch(&d, 1, &mut out, &x, 0, 0, 8).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("out-of-bounds store") && !m.contains("refused"),
            "{d:?}: {m}"
        );
        // Every lane out inside a loop: fine where the loop does not run, an error when
        // it runs.
        sound_shifted::launch(&d, 1, &mut out, &x, 16, 0, 0).unwrap();
        assert_eq!(out, x, "{d:?}");
        let e = sound_shifted::launch(&d, 1, &mut out, &x, 16, 1, 0).unwrap_err();
        let m = e.to_string();
        assert!(
            m.contains("out-of-bounds store") && !m.contains("refused"),
            "{d:?}: {m}"
        );
    }
}

/// Tutorial 08 (grouped GEMM: matrices through pointer tables, sizes and strides read from
/// arrays, a `while` loop over tiles) is proven at launch with what its tables and arrays
/// hold: a right launch checks no access. An entry shorter than its sizes say leaves the
/// accesses through it checked: an error on every device, nothing written outside.
#[test]
fn grouped_gemm_is_proven_and_an_entry_past_its_buffer_is_an_error_on_every_device() {
    use tritium::backend::launch::checked_sites;
    use tritium::backend::KernelArgs;
    use tritium_kernels::grouped_gemm::grouped_matmul;
    let (bm, bn, bk, programs) = (16, 16, 16, 3);
    // (m, k, n)
    let problems = [
        (20usize, 9usize, 13usize),
        (16, 33, 16),
        (3, 40, 1),
        (0, 4, 5),
    ];
    let data = |n: usize, seed: usize| -> Vec<f32> {
        (0..n)
            .map(|i| ((i * 7 + seed * 3) % 11) as f32 - 5.0)
            .collect()
    };
    let a: Vec<Vec<f32>> = (problems.iter().enumerate())
        .map(|(g, &(m, k, _))| data(m * k, g))
        .collect();
    let b: Vec<Vec<f32>> = (problems.iter().enumerate())
        .map(|(g, &(_, k, n))| data(k * n, g + 10))
        .collect();
    let want: Vec<Vec<f32>> = (problems.iter().enumerate())
        .map(|(g, &(m, k, n))| {
            let at = |i: usize, j: usize| (0..k).map(|l| a[g][i * k + l] * b[g][l * n + j]).sum();
            (0..m * n).map(|e| at(e / n, e % n)).collect()
        })
        .collect();
    let sizes: Vec<i32> = (problems.iter())
        .flat_map(|&(m, k, n)| [m as i32, n as i32, k as i32])
        .collect();
    let lds: Vec<i32> = (problems.iter())
        .flat_map(|&(_, k, n)| [k as i32, n as i32, n as i32])
        .collect();
    let groups = problems.len() as i32;
    let f = grouped_matmul::trace::<f32>(&Default::default(), programs, bm, bn, bk).unwrap();
    let sites = f.fault_sites();
    // Each output lies 8 canaries after the start of a vector of canaries.
    let outputs = |short: Option<usize>| -> Vec<Vec<f32>> {
        (problems.iter().enumerate())
            .map(|(g, &(m, _, n))| vec![CANARY; m * n + 16 - usize::from(short == Some(g)) * n])
            .collect()
    };
    // `a_short`: group 1's `a` a row short; `c_short`: group 0's output a row short.
    for (case, a_short, c_short) in [
        ("right", false, None),
        ("a short", true, None),
        ("c short", false, Some(0)),
    ] {
        let a_rows: Vec<&[f32]> = (a.iter().enumerate())
            .map(|(g, a)| match g == 1 && a_short {
                true => &a[..a.len() - problems[1].1],
                false => &a[..],
            })
            .collect();
        let (at, bt) = (PtrTable::of(a_rows.iter().copied()), PtrTable::of(b.iter()));
        {
            // The proof of a default launch with these arguments.
            let mut c = outputs(c_short);
            let ct = PtrTable::of((c.iter_mut()).map(|c| {
                let n = c.len();
                &mut c[8..n - 8]
            }));
            let mut args = KernelArgs::new();
            args.ptr::<i64>("group_a_ptrs", &at);
            args.ptr::<i64>("group_b_ptrs", &bt);
            args.ptr::<i64>("group_c_ptrs", &ct);
            args.ptr::<i32>("group_gemm_sizes", &sizes[..]);
            args.ptr::<i32>("g_lds", &lds[..]);
            args.scalar("group_size", groups);
            let checked: Vec<String> = (checked_sites(&f, programs, &args).unwrap().iter())
                .map(|s| format!("{} {}", sites[*s as usize].0.line, sites[*s as usize].1))
                .collect();
            let want_checked: &[&str] = match case {
                "right" => &[],
                "a short" => &["54 load"],
                _ => &["68 store"],
            };
            assert_eq!(checked, want_checked, "{case}");
        }
        for d in devices() {
            let mut c = outputs(c_short);
            let ct = PtrTable::of((c.iter_mut()).map(|c| {
                let n = c.len();
                &mut c[8..n - 8]
            }));
            let r = grouped_matmul::launch::<f32>(
                &d,
                programs,
                &at,
                &bt,
                &ct,
                &sizes[..],
                &lds[..],
                groups,
                programs,
                bm,
                bn,
                bk,
            );
            drop(ct);
            let outside = |c: &[f32]| {
                let n = c.len();
                (c[..8].iter().chain(&c[n - 8..])).all(|v| *v == CANARY)
            };
            assert!(
                c.iter().all(|c| outside(c)),
                "{d:?}, {case}: a canary changed"
            );
            if case == "right" {
                r.unwrap();
                for (g, (c, want)) in c.iter().zip(&want).enumerate() {
                    assert_eq!(&c[8..c.len() - 8], &want[..], "{d:?}: problem {g}");
                }
                continue;
            }
            let e = r.expect_err(&format!("{d:?}, {case}: the launch succeeded"));
            let m = e.to_string();
            assert!(
                matches!(e, tritium::Error::Runtime { .. }) && m.contains("grouped_gemm.rs:"),
                "{d:?}, {case}: {m}"
            );
        }
    }
}

/// `out[r, c] = 2 · x[r, c]` for rows `r` (one per program) and columns `c < n`, each
/// tensor through its own row and column strides (in elements).
#[kernel]
#[allow(clippy::too_many_arguments)]
fn scale_strided(
    out: Ptr<f32>,
    x: Ptr<f32>,
    out_row: i32,
    out_col: i32,
    x_row: i32,
    x_col: i32,
    n: i32,
    #[constexpr] BLOCK: usize,
) {
    let r = program_id(0);
    let c = arange(0, BLOCK);
    let m = c < n;
    let v = load(x + r * x_row + c * x_col, mask = m);
    store(out + r * out_row + c * out_col, v * 2.0, mask = m);
}

/// A strided view whose span has gaps (a column block, every other column, reversed rows,
/// a transposed block) is proven at launch where every lane lands on one of its elements,
/// so the launch runs unchecked code; where a lane may land in a gap (a row read one
/// element too far, a strided view read densely) that access stays checked: an error on
/// every device, nothing written outside the view's elements.
#[test]
fn strided_views_are_proven_where_every_lane_lands_on_an_element() {
    use ndarray::{Array2, ArrayView2, ArrayViewMut2};
    use tritium::backend::launch::checked_sites;
    use tritium::backend::KernelArgs;
    /// One launch: `x` and `out` as views of a 5 × 12 matrix, each with the (row, column)
    /// strides the kernel is given, `n` columns, and the sites its proof leaves checked.
    struct Case {
        name: &'static str,
        x: for<'a> fn(&'a Array2<f32>) -> ArrayView2<'a, f32>,
        x_strides: (i32, i32),
        out: for<'a> fn(&'a mut Array2<f32>) -> ArrayViewMut2<'a, f32>,
        out_strides: (i32, i32),
        n: usize,
        checked: &'static [&'static str],
    }
    let (rows, width) = (5usize, 12usize);
    let base = Array2::from_shape_fn((rows, width), |(r, c)| (r * 100 + c) as f32);
    let right = Case {
        name: "a column block",
        x: |b| b.slice(s![.., 2..9]),
        x_strides: (12, 1),
        out: |o| o.slice_mut(s![.., ..8]),
        out_strides: (12, 1),
        n: 7,
        checked: &[],
    };
    let cases = [
        Case {
            name: "a row read one too far",
            n: 8,
            checked: &["load"],
            ..right
        },
        Case {
            name: "one column (its axis of one element dropped), the lanes past it masked",
            x: |b| b.slice(s![.., 4..5]),
            n: 1,
            ..right
        },
        Case {
            name: "one column read two wide",
            x: |b| b.slice(s![.., 4..5]),
            n: 2,
            checked: &["load"],
            ..right
        },
        Case {
            name: "every other column",
            x: |b| b.slice(s![.., ..;2]),
            x_strides: (12, 2),
            n: 6,
            ..right
        },
        Case {
            name: "every other column read densely",
            x: |b| b.slice(s![.., ..;2]),
            n: 6,
            checked: &["load"],
            ..right
        },
        Case {
            name: "rows reversed",
            x: |b| b.slice(s![..;-1, 2..9]),
            x_strides: (-12, 1),
            ..right
        },
        Case {
            name: "a transposed block",
            x: |b| b.slice(s![.., 1..4]).reversed_axes(),
            x_strides: (1, 12),
            n: 5,
            ..right
        },
        Case {
            name: "written to a column block",
            x: |b| b.view(),
            out: |o| o.slice_mut(s![.., 3..10]),
            ..right
        },
        Case {
            name: "written one past a column block",
            x: |b| b.view(),
            out: |o| o.slice_mut(s![.., 3..10]),
            n: 8,
            checked: &["store"],
            ..right
        },
    ];
    let f = scale_strided::trace(&Default::default(), 16).unwrap();
    let sites = f.fault_sites();
    for case in std::iter::once(&right).chain(&cases) {
        let (name, n) = (case.name, case.n);
        let ((xr, xc), (or, oc)) = (case.x_strides, case.out_strides);
        let x = (case.x)(&base);
        let grid = x.nrows();
        let mut out_all = Array2::from_elem((rows, width), CANARY);
        let checked: Vec<&str> = {
            let mut args = KernelArgs::new();
            args.ptr::<f32>("out", (case.out)(&mut out_all));
            args.ptr::<f32>("x", x.view());
            for (name, v) in [
                ("out_row", or),
                ("out_col", oc),
                ("x_row", xr),
                ("x_col", xc),
            ] {
                args.scalar(name, v);
            }
            args.scalar("n", n as i32);
            (checked_sites(&f, grid, &args).unwrap().iter())
                .map(|s| sites[*s as usize].1)
                .collect()
        };
        assert_eq!(checked, case.checked, "{name}");
        // What a right launch writes: `2 · x` where the kernel stores, canaries elsewhere.
        let mut want = Array2::from_elem((rows, width), CANARY);
        if case.checked.is_empty() {
            let mut w = (case.out)(&mut want);
            for r in 0..grid {
                for c in 0..n {
                    w[[r, c]] = 2.0 * x[[r, c]];
                }
            }
        }
        for d in devices() {
            let mut out_all = Array2::from_elem((rows, width), CANARY);
            let out = (case.out)(&mut out_all);
            let r = scale_strided::launch(&d, grid, out, x.view(), or, oc, xr, xc, n as i32, 16);
            if case.checked.is_empty() {
                r.unwrap_or_else(|e| panic!("{d:?}, {name}: {e}"));
                assert_eq!(out_all, want, "{d:?}, {name}");
                continue;
            }
            let m = r
                .expect_err(&format!("{d:?}, {name}: the launch succeeded"))
                .to_string();
            let named = m.contains("out-of-bounds") || m.contains("between its elements");
            assert!(named, "{d:?}, {name}: {m}");
            // Nothing outside the output view's elements changed.
            (case.out)(&mut out_all).fill(CANARY);
            assert!(out_all.iter().all(|v| *v == CANARY), "{d:?}, {name}");
        }
    }
}
