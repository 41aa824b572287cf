//! Expansion tests: kernels written with `#[kernel]`/`#[device]` trace to the expected IR.

use tritium::dsl::ir::{print_function, Function};
use tritium::dsl::trace::{Float, Specialization, Tile};
use tritium::dsl::DType;
use tritium::{device, kernel};

/// Vector add (Triton tutorial 01), generic over the float dtype.
#[kernel]
pub fn vadd<T: Float>(out: Ptr<T>, x: Ptr<T>, y: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
    let pid = program_id(0);
    let offs = pid * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let a = load(x + offs, mask = mask, other = 0.0);
    let b = load(y + offs, mask);
    store(out + offs, a + b, mask = mask);
}

#[device]
fn row_max(x: Tile, #[constexpr] axis: usize) -> Tile {
    max(x, axis)
}

#[kernel]
fn softmax(out: Ptr<f32>, input: Ptr<f32>, stride: i32, n_cols: i32, #[constexpr] BLOCK: usize) {
    let row = program_id(0);
    let cols = arange(0, BLOCK);
    let mask = cols < n_cols;
    let x = load(
        input + row * stride + cols,
        mask = mask,
        other = f32::NEG_INFINITY,
    );
    let x = x - row_max(x, 0);
    let e = exp(x);
    let y = e / sum(e, 0);
    store(out + row * stride + cols, y, mask = mask);
}

#[kernel]
fn matmul(
    c: Ptr<f32>,
    a: Ptr<f32>,
    b: Ptr<f32>,
    k_total: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let rm = arange(0, BM);
    let rn = arange(0, BN);
    let rk = arange(0, BK);
    let mut acc = zeros([BM, BN], DType::F32);
    let mut a_ptrs = a + rm[(.., None)] * k_total + rk[(None, ..)];
    let mut b_ptrs = b + rk[(.., None)] * BN as i32 + rn[(None, ..)];
    for _k in range(0, cdiv(k_total, BK as i32)) {
        let ta = load(a_ptrs);
        let tb = load(b_ptrs);
        acc = dot(ta, tb, acc);
        a_ptrs += BK as i32;
        b_ptrs = b_ptrs + (BK * BN) as i32;
    }
    store(c + rm[(.., None)] * BN as i32 + rn[(None, ..)], acc);
}

#[kernel]
fn control(out: Ptr<i32>, n: i32, #[constexpr] UNROLL: usize, #[constexpr] FLAG: bool) {
    let mut i = scalar(0, DType::I32);
    let mut total = scalar(0, DType::I32);
    while i < n {
        if i % 2 == 0 {
            total += i;
        } else if i > 10 && FLAG {
            total = total - 1;
        }
        i = i + 1;
    }
    // A Rust `if` on a constexpr is resolved while tracing.
    let extra = if UNROLL > 2 { total * 2 } else { total };
    for k in static_range(0, UNROLL) {
        total = total + k as i32;
    }
    for _ in (0..n).step_by(2) {
        store(out, extra);
    }
    store(out + 1, total);
}

/// A helper with its own control flow: the closures it generates compile without warnings
/// outside a kernel module too.
#[device]
fn clamp_sum(x: Tile, n: Tile, #[constexpr] STEPS: usize) -> Tile {
    let mut acc = x;
    for _ in 0..n {
        acc += 1;
    }
    for s in static_range(0, STEPS) {
        acc += s as i32;
    }
    if acc > 100 {
        acc = minimum(acc, 100);
    }
    acc
}

/// Triton-style counters: a literal assigned in a runtime loop becomes a tile.
#[kernel]
fn counter(out: Ptr<f32>, n: i32) {
    let mut i = 0;
    let mut total = 0.0;
    while i < n {
        total += 0.5;
        i += 1;
    }
    store(out, total);
}

#[kernel]
fn uses_helper(device: Ptr<i32>, n: i32, #[constexpr] options: usize) {
    let v = clamp_sum(load(device), n, options);
    store(device, v);
}

fn text(f: tritium::dsl::Result<Function>) -> String {
    print_function(&f.unwrap_or_else(|e| panic!("trace failed: {e}")))
}

#[test]
fn vadd_traces() {
    let t = text(vadd::trace::<f32>(&Specialization::default(), 128));
    assert!(t.contains("arange"), "{t}");
    assert!(t.contains("load"), "{t}");
    assert!(t.contains("store"), "{t}");
    assert!(
        t.contains("trace.rs"),
        "locations point at the kernel source:\n{t}"
    );
    assert_eq!(vadd::NAME, "vadd");
    let t16 = text(vadd::trace::<half::f16>(&Specialization::default(), 64));
    assert!(t16.contains("f16"), "{t16}");
}

#[test]
fn softmax_traces() {
    let t = text(softmax::trace(&Specialization::default(), 256));
    assert!(t.contains("reduce"), "{t}");
}

#[test]
fn matmul_traces_a_loop() {
    let t = text(matmul::trace(&Specialization::default(), 16, 16, 8));
    assert!(t.contains("for"), "{t}");
    assert!(t.contains("dot"), "{t}");
}

#[test]
fn control_flow_traces() {
    let t = text(control::trace(&Specialization::default(), 3, true));
    assert!(t.contains("while"), "{t}");
    assert!(t.contains("if"), "{t}");
    assert!(t.contains("for"), "{t}");
    let t2 = text(control::trace(&Specialization::default(), 1, false));
    assert_ne!(t, t2);
}

#[test]
fn locations_are_the_users() {
    let t = text(vadd::trace::<f32>(&Specialization::default(), 128));
    // `let pid = program_id(0);` is on line 11 of this file.
    assert!(t.contains("trace.rs\":11:15)"), "{t}");
}

#[test]
fn helper_traces_and_names_do_not_clash() {
    let t = text(uses_helper::trace(&Specialization::default(), 2));
    assert!(t.contains("for"), "{t}");
    assert!(t.contains("if"), "{t}");
    // `launch`'s own parameters were renamed around the kernel's `device` and `options`.
    let mut out = vec![5i32];
    uses_helper::launch(
        &tritium::backend::Device::interpreter(),
        [1],
        &mut out,
        3,
        2,
    )
    .unwrap();
    assert_eq!(out, [5 + 3 + 1]);
}

#[test]
fn literal_counters_are_carried() {
    let mut out = vec![0f32];
    counter::launch(&tritium::backend::Device::interpreter(), [1], &mut out, 6).unwrap();
    assert_eq!(out, [3.0]);
}

#[test]
fn vadd_launches_on_the_interpreter() {
    let n = 1000usize;
    let x: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let y: Vec<f32> = (0..n).map(|i| 2.0 * i as f32).collect();
    let mut out = vec![0f32; n];
    let dev = tritium::backend::Device::interpreter();
    vadd::launch(&dev, [n.div_ceil(128)], &mut out, &x, &y, n as i32, 128).unwrap();
    assert!(out.iter().enumerate().all(|(i, v)| *v == 3.0 * i as f32));
    // A read-only borrow where the kernel writes is refused.
    let err = vadd::launch(&dev, [1], &out, &x, &y, n as i32, 128).unwrap_err();
    assert!(err.to_string().contains("&mut"), "{err}");
}

#[test]
#[ignore = "prints the traced IR of the control-flow kernel"]
fn print_control() {
    println!(
        "{}",
        text(control::trace(&Specialization::default(), 3, true))
    );
    println!(
        "{}",
        text(matmul::trace(&Specialization::default(), 16, 16, 8))
    );
}
