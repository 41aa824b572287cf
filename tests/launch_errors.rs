//! Bad launches are `Result` errors that name what was wrong.

use crate::common::cuda_device;
use ndarray::Array1;
use tritium::{Device, Error, LaunchOptions};
use tritium_kernels::vector_add::add;

fn message(e: Error) -> String {
    e.to_string()
}

#[test]
fn written_pointer_passed_as_shared_borrow_is_an_error() {
    let x = Array1::<f32>::ones(8);
    let y = Array1::<f32>::ones(8);
    let out = Array1::<f32>::zeros(8);
    let e = add::launch(&Device::cpu(), 1, &out, &x, &y, 8, 8).unwrap_err();
    let m = message(e);
    assert!(
        m.contains("`out` is written by the kernel") && m.contains("&mut"),
        "{m}"
    );
}

#[test]
fn empty_grid_is_an_error() {
    let x = Array1::<f32>::ones(8);
    let mut out = Array1::<f32>::zeros(8);
    let e = add::launch(&Device::cpu(), 0, &mut out, &x, &x, 8, 8).unwrap_err();
    assert!(message(e).contains("grid axis 0 is 0"));
}

#[test]
fn cuda_without_cuda_is_an_error_not_a_panic() {
    if tritium::backend::cuda::unavailable_reason().is_none() {
        eprintln!("skipped cuda_without_cuda_is_an_error_not_a_panic: a CUDA device is present");
        return;
    }
    let e = Device::cuda(0).unwrap_err();
    assert!(message(e).contains("CUDA"));
}

/// The devices whose compiled code checks accesses in checked mode (CUDA when present).
fn checked_devices() -> Vec<Device> {
    let mut all = vec![Device::cpu(), Device::cuda_emulator()];
    all.extend(cuda_device("checked mode"));
    all
}

/// The location and message of a checked-mode fault.
fn runtime_error(e: Error) -> (String, String) {
    match e {
        Error::Runtime {
            location, message, ..
        } => (location, message),
        other => panic!("expected a runtime error, got {other}"),
    }
}

/// `message` without its addresses (`0x…`), which differ between runs and devices.
fn without_addresses(message: &str) -> String {
    message
        .split(' ')
        .map(|w| match w.find("0x") {
            Some(i) => {
                let rest = w[i + 2..].trim_start_matches(|c: char| c.is_ascii_hexdigit());
                format!("{}ADDR{rest}", &w[..i])
            }
            None => w.to_string(),
        })
        .collect::<Vec<_>>()
        .join(" ")
}

#[test]
fn checked_mode_reports_out_of_bounds_store_with_source_line() {
    // The kernel is told n = 16 but the output holds 8: lanes 8..16 would write past it.
    let x = Array1::<f32>::ones(16);
    let opts = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    let mut cpu = None;
    for d in checked_devices().into_iter().chain([Device::interpreter()]) {
        // A window of a larger array: what lies after it must not change.
        let mut all = Array1::<f32>::from_elem(16, -1.0);
        let mut out = all.slice_mut(ndarray::s![..8]);
        let e = add::launch_with(&d, 1, &opts, &mut out, &x, &x, 16, 16).unwrap_err();
        let m = message(e);
        assert!(
            m.contains("add") && m.contains("kernels/src/vector_add.rs:"),
            "{d:?}: {m}"
        );
        assert!(m.contains("store"), "{d:?}: {m}");
        assert!(
            all.iter().skip(8).all(|v| *v == -1.0),
            "{d:?} wrote past `out`"
        );
        if d == Device::interpreter() {
            continue;
        }
        // Compiled backends all report the op, the program and the buffers as the CPU does.
        let m = without_addresses(&m);
        assert!(
            m.contains("out-of-bounds store at address ADDR by program (0, 0, 0) (buffers: `out` [ADDR, ADDR), `x` [ADDR, ADDR), `y` [ADDR, ADDR))"),
            "{d:?}: {m}"
        );
        match &cpu {
            None => cpu = Some(m),
            Some(c) => assert_eq!(&m, c, "{d:?} reports differently from the CPU"),
        }
    }
}

#[test]
fn checked_mode_reports_out_of_bounds_load() {
    let x = Array1::<f32>::ones(4);
    let y = Array1::<f32>::ones(16);
    let opts = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    let mut cpu = None;
    for d in checked_devices() {
        let mut out = Array1::<f32>::zeros(16);
        let e = add::launch_with(&d, 1, &opts, &mut out, &x, &y, 16, 16).unwrap_err();
        let (location, m) = runtime_error(e);
        assert!(
            m.starts_with("out-of-bounds load at address") && location.contains("vector_add.rs:"),
            "{d:?}: {location}: {m}"
        );
        // Out-of-bounds lanes load 0 and the program goes on: `out` is `x + y` where `x`
        // exists, `y` elsewhere.
        let want = Array1::from_iter((0..16).map(|i| if i < 4 { 2.0 } else { 1.0 }));
        assert_eq!(out, want, "{d:?}");
        let got = (location, without_addresses(&m));
        match &cpu {
            None => cpu = Some(got),
            Some(c) => assert_eq!(&got, c, "{d:?} reports differently from the CPU"),
        }
    }
}

#[test]
fn grid_whose_program_count_overflows_is_an_error() {
    let x = Array1::<f32>::ones(8);
    let mut out = Array1::<f32>::zeros(8);
    for device in [
        Device::cpu(),
        Device::interpreter(),
        Device::cuda_emulator(),
    ] {
        for grid in [[i32::MAX, i32::MAX, 2], [1 << 20, 1 << 20, 1 << 9]] {
            let e = add::launch(&device, grid, &mut out, &x, &x, 8, 8).unwrap_err();
            let m = message(e);
            assert!(
                m.contains("programs") && m.contains("2^48"),
                "{device:?} {grid:?}: {m}"
            );
        }
    }
}

#[test]
fn written_argument_overlapping_another_is_an_error() {
    use ndarray::s;
    let y = Array1::<f32>::ones(8);
    for device in [
        Device::cpu(),
        Device::interpreter(),
        Device::cuda_emulator(),
    ] {
        // Interleaved views of one array: `out` (even elements) and `x` (odd ones) have
        // overlapping spans, so a kernel writing `out` as if contiguous writes `x`.
        let mut a = Array1::<f32>::from_iter((0..16).map(|v| v as f32));
        let (out, x) = a.multi_slice_mut((s![..;2], s![1..;2]));
        let e = add::launch(&device, 1, out, x.view(), &y, 8, 8).unwrap_err();
        let m = message(e);
        assert!(m.contains("`out` overlaps `x`"), "{device:?}: {m}");
        // Halves that do not overlap are fine.
        let mut b = Array1::<f32>::from_iter((0..16).map(|v| v as f32));
        let (out, x) = b.multi_slice_mut((s![..8], s![8..]));
        add::launch(&device, 1, out, x.view(), &y, 8, 8).unwrap();
        assert_eq!(
            b.slice(s![..8]).to_vec(),
            (9..17).map(|v| v as f32).collect::<Vec<_>>(),
            "{device:?}"
        );
    }
}

#[test]
fn zero_length_input_is_an_out_of_bounds_error_not_a_crash() {
    let x = Array1::<f32>::zeros(0);
    let y = Array1::<f32>::ones(8);
    let mut out = Array1::<f32>::zeros(8);
    let e = add::launch(&Device::interpreter(), 1, &mut out, &x, &y, 8, 8).unwrap_err();
    let m = message(e);
    assert!(
        m.contains("outside every buffer") && m.contains("`x` [0x4, 0x4)"),
        "{m}"
    );
    let options = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    for device in checked_devices() {
        let e = add::launch_with(&device, 1, &options, &mut out, &x, &y, 8, 8).unwrap_err();
        let m = message(e);
        // A GPU names its own copy of `x`, at a device address: an empty range either way.
        let x_range = m
            .split_once("`x` [")
            .and_then(|(_, r)| r.split_once(')'))
            .and_then(|(r, _)| r.split_once(", "));
        assert!(
            m.contains("out-of-bounds load") && x_range.is_some_and(|(lo, hi)| lo == hi),
            "{device:?}: {m}"
        );
    }
}

/// A kernel that asserts on its constexpr with Rust's `assert!`, and with `static_assert`.
#[tritium::kernel]
fn asserting(out: tritium::Ptr<f32>, #[constexpr] BLOCK: usize, #[constexpr] CHECK: bool) {
    use tritium::prelude::*;
    if CHECK {
        assert!(
            BLOCK % 16 == 0,
            "BLOCK must be a multiple of 16, got {BLOCK}"
        );
    } else {
        static_assert(BLOCK % 16 == 0, "BLOCK must be a multiple of 16");
    }
    static_print(BLOCK);
    let r = arange(0, BLOCK);
    static_print(r);
    store(out + r, r.to(DType::F32));
}

#[test]
fn a_panic_or_static_assert_while_tracing_is_an_error_at_its_line() {
    for device in [
        Device::cpu(),
        Device::interpreter(),
        Device::cuda_emulator(),
    ] {
        let mut out = Array1::<f32>::zeros(16);
        let m = message(asserting::launch(&device, 1, &mut out, 8, true).unwrap_err());
        assert!(
            m.contains("launch_errors.rs:")
                && m.contains("panicked while tracing kernel `asserting`: BLOCK must be a multiple of 16, got 8"),
            "{device:?}: {m}"
        );
        let m = message(asserting::launch(&device, 1, &mut out, 8, false).unwrap_err());
        assert!(
            m.contains("launch_errors.rs:")
                && m.contains("static_assert failed: BLOCK must be a multiple of 16"),
            "{device:?}: {m}"
        );
        // The thread traces again afterwards, and valid constexprs pass both checks.
        for check in [true, false] {
            asserting::launch(&device, 1, &mut out, 16, check).unwrap();
            assert_eq!(
                out.to_vec(),
                (0..16).map(|v| v as f32).collect::<Vec<_>>(),
                "{device:?}"
            );
        }
    }
}

#[test]
fn an_argument_of_another_kind_names_what_was_passed() {
    // What a hand-built launch (or a binding from another language) can get wrong: `n` as
    // an f32 scalar, and `x` as a buffer of i32.
    let x = Array1::<f32>::ones(8);
    let xi = Array1::<i32>::ones(8);
    for device in [
        Device::cpu(),
        Device::interpreter(),
        Device::cuda_emulator(),
    ] {
        for (bad_n, bad_x) in [(true, false), (false, true)] {
            let mut out = Array1::<f32>::zeros(8);
            let mut args = tritium::backend::KernelArgs::new();
            args.ptr("out", &mut out);
            if bad_x {
                args.ptr("x", &xi);
            } else {
                args.ptr("x", &x);
            }
            args.ptr("y", &x);
            if bad_n {
                args.scalar("n", 8.0f32);
            } else {
                args.scalar("n", 8i32);
            }
            let key = tritium::backend::KernelKey {
                name: add::NAME,
                constexprs: "BLOCK=8;T=f32".into(),
            };
            let e =
                tritium::backend::launch(&device, 1, &LaunchOptions::default(), key, args, &|s| {
                    add::trace::<f32>(s, 8)
                })
                .unwrap_err();
            let m = message(e);
            let want = if bad_n {
                "argument `n` is a scalar of f32 but the kernel expects a scalar of i32"
            } else {
                "argument `x` has dtype i32 but the kernel expects f32"
            };
            assert!(m.contains(want), "{device:?}: {m}");
        }
    }
}

/// An empty `arange`, from a constexpr of 0.
#[tritium::kernel]
fn empty_range(out: tritium::Ptr<i32>, #[constexpr] N: usize) {
    let r = arange(0, N);
    store(out + r, r);
}

#[test]
fn trace_errors_name_the_kernel_and_the_line() {
    let mut out = Array1::<i32>::zeros(4);
    for device in [
        Device::cpu(),
        Device::interpreter(),
        Device::cuda_emulator(),
    ] {
        let m = message(empty_range::launch(&device, 1, &mut out, 0).unwrap_err());
        assert!(
            m.contains("launch_errors.rs:")
                && m.contains("kernel `empty_range`: arange(0, 0) is empty"),
            "{device:?}: {m}"
        );
    }
}

/// `out[i] = x[i * step]`: with `step` the view's own stride the kernel walks its
/// elements; with `step = 1` it walks the gaps between them.
#[tritium::kernel]
fn gather_every(
    out: tritium::Ptr<f32>,
    x: tritium::Ptr<f32>,
    step: i32,
    n: i32,
    #[constexpr] BLOCK: usize,
) {
    let i = arange(0, BLOCK);
    let m = i < n;
    store(out + i, load(x + i * step, mask = m, other = 0.0), mask = m);
}

/// Checked mode checks elements of strided views, not only their spans: an access between
/// a view's elements (inside its span) is a fault on every device, the interpreter included,
/// while accesses to its elements pass (views of every kind: strided, a column of a
/// matrix, reversed).
#[test]
fn checked_mode_rejects_accesses_between_a_strided_views_elements() {
    use ndarray::{s, Array2};
    let data = Array1::from_iter((0..24).map(|v| v as f32));
    let matrix = Array2::from_shape_fn((6, 4), |(r, c)| (4 * r + c) as f32);
    let opts = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    let mut devices = checked_devices();
    devices.push(Device::interpreter());
    let views = [
        ("every third element", data.slice(s![..;3])),
        ("a column of a matrix", matrix.slice(s![.., 1])),
        ("reversed, every other", data.slice(s![..;-2])),
    ];
    for d in devices {
        for (what, view) in &views {
            let n = view.len();
            let stride = view.strides()[0] as i32;
            let mut out = Array1::<f32>::zeros(n);
            if stride > 0 {
                gather_every::launch_with(&d, 1, &opts, &mut out, view, stride, n as i32, 8)
                    .unwrap_or_else(|e| panic!("{d:?}, {what}: {e}"));
                assert_eq!(out, view.to_owned(), "{d:?}, {what}");
            }
            let e = gather_every::launch_with(&d, 1, &opts, &mut out, view, 1, n as i32, 8)
                .expect_err("element 1 is between the view's elements");
            let (_, m) = runtime_error(e);
            assert!(
                m.contains("load") && m.contains("`x`"),
                "{d:?}, {what}: {m}"
            );
        }
    }
}

/// `out[0] = x[off]`, `off` a runtime scalar.
#[tritium::kernel]
fn read_at(out: tritium::prelude::Ptr<f32>, x: tritium::prelude::Ptr<f32>, off: i64) {
    store(out, load(x + off));
}

/// `out[i] = x[off + i]` for a tile of 4.
#[tritium::kernel]
fn read_tile_at(out: tritium::prelude::Ptr<f32>, x: tritium::prelude::Ptr<f32>, off: i64) {
    let i = arange(0, 4);
    store(out + i, load(x + off + i));
}

/// `x + 2^62` f32 elements is `x` again modulo 2^64: checked mode must not take the
/// wrapped address for an element of `x` (nor one just below 2^63 for a valid address).
#[test]
fn checked_mode_catches_offsets_that_wrap_around_the_address_space() {
    let x = Array1::from_vec(vec![7.0f32; 4]);
    let opts = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    for d in checked_devices().into_iter().chain([Device::interpreter()]) {
        for off in [
            1i64 << 62,
            (1i64 << 62) + 1,
            -(1i64 << 62),
            i64::MAX,
            i64::MIN,
        ] {
            let mut out = Array1::<f32>::from_elem(1, -1.0);
            let e = read_at::launch_with(&d, 1, &opts, &mut out, &x, off).unwrap_err();
            let m = message(e);
            let out_of_bounds =
                m.contains("out-of-bounds load") || m.contains("outside every buffer");
            assert!(out_of_bounds, "{d:?} off {off}: {m}");
            assert!(
                out[0] == 0.0 || out[0] == -1.0,
                "{d:?} off {off}: read {}",
                out[0]
            );
        }
        let mut out = Array1::<f32>::from_elem(4, -1.0);
        let e = read_tile_at::launch_with(&d, 1, &opts, &mut out, &x, 1 << 62).unwrap_err();
        let m = message(e);
        let out_of_bounds = m.contains("out-of-bounds load") || m.contains("outside every buffer");
        assert!(out_of_bounds, "{d:?} tile: {m}");
        assert!(out.iter().all(|v| *v != 7.0), "{d:?} tile read x: {out}");
        // In-range offsets still read.
        let mut out = Array1::<f32>::zeros(1);
        read_at::launch_with(&d, 1, &opts, &mut out, &x, 3).unwrap();
        assert_eq!(out[0], 7.0, "{d:?}");
    }
}
