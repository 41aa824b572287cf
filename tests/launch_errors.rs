//! Bad launches are `Result` errors that name what was wrong.

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

#[test]
fn checked_mode_reports_out_of_bounds_store_with_source_line() {
    // The kernel is told n = 16 but the output holds 8: lanes 8..16 would write past it.
    let x = Array1::<f32>::ones(16);
    let mut out = Array1::<f32>::zeros(8);
    let opts = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    for d in [Device::cpu(), Device::interpreter()] {
        let e = add::launch_with(&d, 1, &opts, &mut out, &x, &x, 16, 16).unwrap_err();
        let m = message(e);
        assert!(
            m.contains("add") && m.contains("kernels/src/vector_add.rs:"),
            "{d:?}: {m}"
        );
        assert!(m.contains("store"), "{d:?}: {m}");
    }
}

#[test]
fn checked_mode_reports_out_of_bounds_load() {
    let x = Array1::<f32>::ones(4);
    let y = Array1::<f32>::ones(16);
    let mut out = Array1::<f32>::zeros(16);
    let opts = LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    };
    let e = add::launch_with(&Device::cpu(), 1, &opts, &mut out, &x, &y, 16, 16).unwrap_err();
    let m = message(e);
    assert!(
        m.contains("out-of-bounds load") && m.contains("vector_add.rs:"),
        "{m}"
    );
}
