//! Porting from Triton: the idioms production kernels use work as written, and where
//! Rust's meaning differs from Triton's (integer `/`) the difference is an error, never a
//! silently different number.

use crate::common::all_devices;
use ndarray::Array1;
use tritium::prelude::*;
use tritium::Error;

/// The trace error's location and message, on every device.
fn trace_errors(launch: impl Fn(&Device) -> tritium::Result<()>) -> Vec<(String, String)> {
    all_devices()
        .iter()
        .map(|d| match launch(d) {
            Err(Error::Dsl(tritium::dsl::Error::Trace { location, message })) => {
                (location, message)
            }
            other => panic!("expected a trace error on {d:?}, got {other:?}"),
        })
        .collect()
}

/// The line of this file that contains `text`.
fn line_of(text: &str) -> usize {
    include_str!("porting.rs")
        .lines()
        .position(|l| l.contains(text) && !l.contains("line_of"))
        .expect("the text is in this file")
        + 1
}

/// Liger-Kernel's RMSNorm backward, ported literally: `-(1 / n_cols)` is a float in
/// Triton and 0 in Rust's integer arithmetic.
#[kernel]
fn rms_scale_literal(out: Ptr<f32>, x: Ptr<f32>, n_cols: i32, #[constexpr] BLOCK: usize) {
    let offs = arange(0, BLOCK);
    let mask = offs < n_cols;
    let xv = load(x + offs, mask = mask, other = 0.0);
    let term = -(1 / n_cols) * xv;
    store(out + offs, term, mask = mask);
}

/// The three spellings that say which division is meant.
#[kernel]
fn rms_scale_spelled(out: Ptr<f32>, x: Ptr<f32>, n_cols: i32, #[constexpr] WHICH: u32) {
    let offs = arange(0, 8);
    let xv = load(x + offs);
    let scale = match WHICH {
        0 => -fdiv(1, n_cols),
        1 => -(1.0 / n_cols.to(DType::F32)),
        _ => -(1 / n_cols).to(DType::F32),
    };
    store(out + offs, scale * xv);
}

#[test]
fn integer_division_promoted_to_float_is_a_trace_error() {
    let x = Array1::<f32>::ones(8);
    let errors = trace_errors(|d| {
        let mut out = Array1::<f32>::zeros(8);
        rms_scale_literal::launch(d, 1, &mut out, &x, 4, 8)
    });
    let div_line = line_of("let term = -(1 / n_cols)");
    for (location, message) in errors {
        assert!(
            location.contains(&format!("porting.rs:{div_line}")),
            "{location}"
        );
        assert!(
            message.contains(&format!("integer division at tests/porting.rs:{div_line}"))
                && message.contains("fdiv(a, b)")
                && message.contains("(a / b).to(DType::F32)"),
            "{message}"
        );
    }
}

#[test]
fn spelled_divisions_give_what_they_say() {
    let x = Array1::<f32>::ones(8);
    for d in all_devices() {
        for (which, want) in [(0, -0.25f32), (1, -0.25), (2, 0.0)] {
            let mut out = Array1::<f32>::zeros(8);
            rms_scale_spelled::launch(&d, 1, &mut out, &x, 4, which).unwrap();
            assert!(out.iter().all(|&v| v == want), "{d:?} {which}: {out}");
        }
    }
}

/// Unsuffixed literals on the left of an operator take the other operand's type, as in
/// Triton: a tile's dtype (f16 here), or the plain Rust type of a constexpr.
#[kernel]
fn weak_literals(out: Ptr<f32>, x: Ptr<half::f16>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = arange(0, 2 * BLOCK / 2);
    let xv = load(x + offs);
    let half_sq = 0.5 * xv * xv;
    let y = half_sq.to(DType::F32) - (1.0 / n) + (1 - n);
    store(out + offs, y + (3 & n) + 0 * half_sq.to(DType::F32));
}

#[test]
fn literals_take_the_type_of_the_other_operand() {
    let s = tritium::dsl::trace::Specialization::default();
    let f = weak_literals::trace(&s, 8).unwrap();
    let text = tritium::dsl::ir::print_function(&f);
    assert!(
        text.lines()
            .any(|l| l.contains("= mul") && l.contains(": tile<8xf16>")),
        "0.5 * x multiplies in f16: {text}"
    );
    let x: Array1<half::f16> = (0..8).map(|i| half::f16::from_f32(i as f32)).collect();
    for d in all_devices() {
        let mut out = Array1::<f32>::zeros(8);
        weak_literals::launch(&d, 1, &mut out, &x, 4, 8).unwrap();
        let want: Vec<f32> = (0..8)
            .map(|i| 0.5 * (i * i) as f32 - 0.25 - 3.0 + 0.0)
            .collect();
        assert_eq!(out.to_vec(), want, "{d:?}");
    }
}

/// Liger-Kernel's cross-entropy shape: rows whose label is `ignore_index` write zeros
/// and `return`; the others go on (a runtime `return`), and `SKIP_ALL` returns at once (a
/// constexpr one).
#[kernel]
fn ignore_rows(
    out: Ptr<f32>,
    x: Ptr<f32>,
    labels: Ptr<i32>,
    ignore_index: i32,
    n_cols: i32,
    #[constexpr] BLOCK: usize,
    #[constexpr] SKIP_ALL: bool,
) {
    if SKIP_ALL {
        return;
    }
    let row = program_id(0);
    let label = load(labels + row);
    let offs = arange(0, BLOCK);
    let mask = offs < n_cols;
    if label == ignore_index {
        for start in range(0, n_cols, BLOCK) {
            store(out + row * n_cols + start + offs, 0.0, mask = mask);
        }
        return;
    } else if label < 0 {
        store(out + row * n_cols + offs, -1.0, mask = mask);
        return;
    }
    let v = load(x + row * n_cols + offs, mask = mask, other = 0.0);
    store(
        out + row * n_cols + offs,
        v * 2.0 + clamp_low(v, label),
        mask = mask,
    );
}

/// A `#[device]` function that returns early with a value.
#[device]
fn clamp_low(v: Tile, label: Tile) -> Tile {
    if label > 2 {
        return v;
    }
    maximum(v, 0.0)
}

#[test]
fn early_return_guards_what_follows() {
    let (rows, cols) = (5usize, 8usize);
    let x = Array1::from_iter((0..rows * cols).map(|i| i as f32 - 20.0));
    let labels = ndarray::arr1(&[1, 7, -3, 3, 7]);
    for d in all_devices() {
        for skip in [false, true] {
            let mut out = Array1::<f32>::from_elem(rows * cols, 9.0);
            ignore_rows::launch(
                &d,
                rows as u32,
                &mut out,
                &x,
                &labels,
                7,
                cols as i32,
                8,
                skip,
            )
            .unwrap();
            for r in 0..rows {
                for c in 0..cols {
                    let v = x[r * cols + c];
                    let want = match (skip, labels[r]) {
                        (true, _) => 9.0,
                        (_, 7) => 0.0,
                        (_, l) if l < 0 => -1.0,
                        (_, l) if l > 2 => 3.0 * v,
                        _ => 2.0 * v + v.max(0.0),
                    };
                    assert_eq!(out[r * cols + c], want, "{d:?} skip {skip} row {r} col {c}");
                }
            }
        }
    }
}

/// Triton's attribute spellings: `x.dtype`, `p.dtype.element_ty`, `.cast(dtype)`.
#[kernel]
fn triton_spellings(out: Ptr<half::f16>, x: Ptr<f32>) {
    let offs = arange(0, 8);
    let v = load(x + offs);
    let acc = zeros([8], v.dtype) + v.cast(DType::F16).to(v.dtype);
    store(out + offs, acc.to(out.dtype.element_ty));
}

#[test]
fn triton_attribute_spellings_work() {
    let x = Array1::from_iter((0..8).map(|i| i as f32 * 0.5));
    for d in all_devices() {
        let mut out = Array1::from_elem(8, half::f16::ZERO);
        triton_spellings::launch(&d, 1, &mut out, &x).unwrap();
        let got: Vec<f32> = out.iter().map(|v| v.to_f32()).collect();
        assert_eq!(got, x.to_vec(), "{d:?}");
    }
}

/// A deferred `let` given its value by an `if / else if / else` chain on runtime values.
#[kernel]
fn deferred_chain(out: Ptr<f32>, x: Ptr<f32>) {
    let offs = arange(0, 4);
    let v = load(x + offs);
    let first = load(x);
    let m;
    if first > 1.0 {
        m = v * 2.0;
    } else if first > 0.0 {
        m = v + 1.0;
    } else {
        m = v - 1.0;
    }
    store(out + offs, m);
}

#[test]
fn deferred_variables_take_values_through_else_if_chains() {
    for d in all_devices() {
        for (first, want) in [
            (2.0f32, [4.0, 2.0, 2.0, 2.0]),
            (0.5, [1.5, 2.0, 2.0, 2.0]),
            (-1.0, [-2.0, 0.0, 0.0, 0.0]),
        ] {
            let x = ndarray::arr1(&[first, 1.0, 1.0, 1.0]);
            let mut out = Array1::<f32>::zeros(4);
            deferred_chain::launch(&d, 1, &mut out, &x).unwrap();
            assert_eq!(out.to_vec(), want, "{d:?} first {first}");
        }
    }
}

/// Liger-Kernel's cross-entropy: the online max and normalizer start as Rust numbers and
/// a runtime loop assigns them tiles; a runtime `if` assigns a plain number or a tile.
#[kernel]
fn online_logsumexp(out: Ptr<f32>, x: Ptr<f32>, n_cols: i32, #[constexpr] BLOCK: usize) {
    let row = program_id(0);
    let offs = arange(0, BLOCK);
    let mut m = f32::NEG_INFINITY;
    let mut d = 0.0;
    for start in range(0, n_cols, BLOCK) {
        let mask = start + offs < n_cols;
        let xb = load(
            x + row * n_cols + start + offs,
            mask = mask,
            other = f32::NEG_INFINITY,
        );
        let m_new = maximum(m, max(xb, 0));
        d = d * exp(m - m_new) + sum(exp(xb - m_new), 0);
        m = m_new;
    }
    let mut bias = 0.0;
    if row > 0 {
        bias = load(x);
    } else {
        bias = 1.0;
    }
    store(out + row, m + log(d) + bias);
}

#[test]
fn plain_start_values_become_tiles_under_runtime_flow() {
    let (rows, cols) = (3usize, 40usize);
    let x = Array1::from_iter((0..rows * cols).map(|i| ((i * 7) % 11) as f32 * 0.25));
    for d in all_devices() {
        let mut out = Array1::<f32>::zeros(rows);
        online_logsumexp::launch(&d, rows as u32, &mut out, &x, cols as i32, 16).unwrap();
        for r in 0..rows {
            let row = &x.as_slice().unwrap()[r * cols..(r + 1) * cols];
            let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
            let lse = m + row.iter().map(|v| (v - m).exp()).sum::<f32>().ln();
            let want = lse + if r > 0 { x[0] } else { 1.0 };
            assert!(
                (out[r] - want).abs() < 1e-5,
                "{d:?} row {r}: {} vs {want}",
                out[r]
            );
        }
    }
}

/// A runtime `if` whose branches give plain numbers is Triton's `where`; so is one giving a
/// deferred variable plain numbers.
#[kernel]
fn runtime_if_of_numbers(out: Ptr<f32>, x: Ptr<f32>) {
    let offs = arange(0, 4);
    let first = load(x);
    let scale = if first > 0.0 { 2.0 } else { -1.0 };
    let shift;
    if first > 1.0 {
        shift = 10;
    } else {
        shift = 20;
    }
    store(out + offs, load(x + offs) * scale + shift);
}

#[test]
fn runtime_if_of_plain_numbers_gives_a_tile() {
    for d in all_devices() {
        for (first, scale, shift) in [
            (2.0f32, 2.0f32, 10.0f32),
            (0.5, 2.0, 20.0),
            (-1.0, -1.0, 20.0),
        ] {
            let x = ndarray::arr1(&[first, 1.0, 2.0, 3.0]);
            let mut out = Array1::<f32>::zeros(4);
            runtime_if_of_numbers::launch(&d, 1, &mut out, &x).unwrap();
            let want: Vec<f32> = x.iter().map(|v| v * scale + shift).collect();
            assert_eq!(out.to_vec(), want, "{d:?} first {first}");
        }
    }
}

/// Liger-Kernel's RMSNorm: the weight is loaded only under a constexpr `if`, and read only
/// under the same condition.
#[kernel]
fn maybe_weighted(out: Ptr<f32>, x: Ptr<f32>, w: Ptr<f32>, #[constexpr] HAS_WEIGHT: bool) {
    let offs = arange(0, 4);
    let mut v = load(x + offs);
    let weight;
    if HAS_WEIGHT {
        weight = load(w + offs);
    }
    if HAS_WEIGHT {
        v = v * weight;
    }
    store(out + offs, v);
}

/// Reads a variable the path taken left unassigned.
#[kernel]
fn reads_unassigned(out: Ptr<f32>, x: Ptr<f32>, #[constexpr] RUNTIME: bool) {
    let offs = arange(0, 4);
    let v = load(x + offs);
    let scale;
    if RUNTIME {
        if load(x) > 0.0 {
            scale = v * 2.0;
        }
    } else if false {
        scale = v;
    }
    store(out + offs, v * scale);
}

#[test]
fn variables_assigned_on_some_paths() {
    let x = ndarray::arr1(&[1.0f32, 2.0, 3.0, 4.0]);
    let w = ndarray::arr1(&[2.0f32, 2.0, 2.0, 2.0]);
    for d in all_devices() {
        for has in [false, true] {
            let mut out = Array1::<f32>::zeros(4);
            maybe_weighted::launch(&d, 1, &mut out, &x, &w, has).unwrap();
            let want = if has { &x * 2.0 } else { x.clone() };
            assert_eq!(out, want, "{d:?} {has}");
        }
    }
    let read_line = line_of("store(out + offs, v * scale);");
    for runtime in [false, true] {
        for (location, message) in trace_errors(|d| {
            let mut out = Array1::<f32>::zeros(4);
            reads_unassigned::launch(d, 1, &mut out, &x, runtime)
        }) {
            assert!(
                location.contains(&format!("porting.rs:{read_line}")),
                "{location}"
            );
            assert!(
                message.contains("`scale` is read here") && message.contains("unassigned"),
                "{message}"
            );
        }
    }
}

/// Liger-Kernel's `liger_cross_entropy_kernel`, ported line by line (docs/porting.md walks
/// through it): strides, a constexpr float and flag, an early `return` for
/// `ignore_index`, an online softmax started from `float("-inf")` and `0.0`, masks with
/// `other`, `where`, keyword arguments, and a float divided by an integer count.
#[kernel]
#[allow(clippy::too_many_arguments)]
fn liger_cross_entropy(
    x_ptr: Ptr<f32>,
    x_stride: i64,
    y_ptr: Ptr<i64>,
    y_stride: i64,
    loss_ptr: Ptr<f32>,
    loss_stride: i64,
    n_cols: i32,
    n_non_ignore: i32,
    ignore_index: i64,
    #[constexpr] LABEL_SMOOTHING: f32,
    #[constexpr] MEAN: bool,
    #[constexpr] BLOCK_SIZE: usize,
) {
    let pid = program_id(0).to(DType::I64);
    let y_ptr = y_ptr + pid * y_stride;
    let y = load(y_ptr);
    let x_ptr = x_ptr + pid * x_stride;
    if y == ignore_index {
        for i in range(0, n_cols, BLOCK_SIZE) {
            let x_offsets = i + arange(0, BLOCK_SIZE);
            store(x_ptr + x_offsets, 0.0, mask = x_offsets < n_cols);
        }
        return;
    }
    let loss_ptr = loss_ptr + pid * loss_stride;
    let mut m = f32::NEG_INFINITY;
    let mut d = 0.0;
    let ori_x_y = load(x_ptr + y);
    let mut scaled_x_sum = 0.0;
    let eps = LABEL_SMOOTHING / n_cols;
    for i in range(0, n_cols, BLOCK_SIZE) {
        let x_offsets = i + arange(0, BLOCK_SIZE);
        let x_block = load(
            x_ptr + x_offsets,
            mask = x_offsets < n_cols,
            other = f32::NEG_INFINITY,
        );
        let block_max = max(x_block, 0);
        if LABEL_SMOOTHING > 0.0 {
            scaled_x_sum += sum(where_(x_offsets < n_cols, -eps * x_block, 0.0), 0);
        }
        let m_new = maximum(m, block_max);
        d = d * exp(m - m_new) + sum(exp(x_block - m_new), 0);
        m = m_new;
    }
    let lse = m + log(d);
    for i in range(0, n_cols, BLOCK_SIZE) {
        let x_offsets = i + arange(0, BLOCK_SIZE);
        let x_block = load(
            x_ptr + x_offsets,
            mask = x_offsets < n_cols,
            other = f32::NEG_INFINITY,
        );
        let mut x_block = exp(x_block - m) / d;
        x_block += -eps;
        x_block = where_(x_offsets != y, x_block, x_block - (1.0 - LABEL_SMOOTHING));
        if MEAN {
            x_block = x_block / n_non_ignore;
        }
        store(x_ptr + x_offsets, x_block, mask = x_offsets < n_cols);
    }
    let mut loss = lse - ori_x_y;
    if LABEL_SMOOTHING > 0.0 {
        let smooth_loss = scaled_x_sum + LABEL_SMOOTHING * lse;
        loss = loss * (1.0 - LABEL_SMOOTHING) + smooth_loss;
    }
    if MEAN {
        loss = loss / n_non_ignore;
    }
    store(loss_ptr, loss);
}

/// Liger's forward in plain Rust: the loss per row and the gradient written over `x`.
fn cross_entropy_reference(
    x: &mut [f32],
    cols: usize,
    labels: &[i64],
    ignore: i64,
    smoothing: f32,
    mean: bool,
) -> Vec<f32> {
    let n_non_ignore = labels.iter().filter(|&&l| l != ignore).count() as f32;
    let scale = if mean { n_non_ignore } else { 1.0 };
    let mut losses = vec![0.0; labels.len()];
    for (r, &label) in labels.iter().enumerate() {
        let row = &mut x[r * cols..(r + 1) * cols];
        if label == ignore {
            row.iter_mut().for_each(|v| *v = 0.0);
            continue;
        }
        let m = row.iter().cloned().fold(f32::NEG_INFINITY, f32::max);
        let d: f32 = row.iter().map(|v| (v - m).exp()).sum();
        let lse = m + d.ln();
        let eps = smoothing / cols as f32;
        let scaled: f32 = row.iter().map(|v| -eps * v).sum();
        let mut loss = lse - row[label as usize];
        if smoothing > 0.0 {
            loss = loss * (1.0 - smoothing) + scaled + smoothing * lse;
        }
        losses[r] = loss / scale;
        for (c, v) in row.iter_mut().enumerate() {
            let mut g = (*v - m).exp() / d - eps;
            if c as i64 == label {
                g -= 1.0 - smoothing;
            }
            *v = g / scale;
        }
    }
    losses
}

#[test]
fn liger_cross_entropy_ports_line_by_line() {
    let (rows, cols) = (4usize, 50usize);
    let labels = ndarray::arr1(&[3i64, -100, 49, 0]);
    let x0: Vec<f32> = (0..rows * cols)
        .map(|i| ((i * 37) % 23) as f32 * 0.2 - 2.0)
        .collect();
    for d in all_devices() {
        for (smoothing, mean) in [(0.0f32, false), (0.1, true)] {
            let mut x = Array1::from_vec(x0.clone());
            let mut loss = Array1::<f32>::zeros(rows);
            liger_cross_entropy::launch(
                &d,
                rows as u32,
                &mut x,
                cols as i64,
                &labels,
                1,
                &mut loss,
                1,
                cols as i32,
                3,
                -100,
                smoothing,
                mean,
                16,
            )
            .unwrap();
            let mut want_x = x0.clone();
            let want_loss = cross_entropy_reference(
                &mut want_x,
                cols,
                labels.as_slice().unwrap(),
                -100,
                smoothing,
                mean,
            );
            let what = format!("{d:?} smoothing {smoothing} mean {mean}");
            crate::common::assert_close(&loss, &Array1::from_vec(want_loss), 1e-5, 1e-5, &what);
            crate::common::assert_close(&x, &Array1::from_vec(want_x), 1e-5, 1e-6, &what);
        }
    }
}
