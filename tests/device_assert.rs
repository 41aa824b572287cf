//! `device_assert` (Triton's): in checked mode and on the interpreter a failing lane is an
//! error naming the message, the assert's line, the lane and the program, the same on every
//! device; outside checked mode it compiles to nothing.

use crate::common::all_devices;
use tritium::prelude::*;
use tritium::{Device, Error, LaunchOptions};

/// Copies `x` to `out`, asserting every element is below `limit` (except where `skip`
/// marks an element, through the assert's `mask`).
#[kernel]
fn copy_below(out: Ptr<i32>, x: Ptr<i32>, limit: i32, skip: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let v = load(x + offs);
    device_assert(v < limit, "value below limit", mask = offs != skip);
    store(out + offs, v);
}

/// The line of `device_assert` in [`copy_below`].
const COPY_ASSERT_LINE: u32 = 15;

/// A 2-D tile's assert (the lane is a multi-index) and a scalar one.
#[kernel]
fn grid_checks(out: Ptr<f32>, x: Ptr<f32>, n: i32) {
    device_assert(n > 0, "n is positive");
    let r = arange(0, 4)[(.., None)];
    let c = arange(0, 8)[(None, ..)];
    let v = load(x + r * 8 + c);
    device_assert(v == v, "");
    store(out + r * 8 + c, v * 2.0);
}

/// [`copy_below`] traced with `BLOCK` (for the PTX test).
pub fn copy_below_trace(block: usize) -> tritium::dsl::ir::Function {
    copy_below::trace(&tritium::dsl::trace::Specialization::default(), block).unwrap()
}

fn checked(on: bool) -> LaunchOptions {
    LaunchOptions {
        bounds_check: Some(on),
        ..Default::default()
    }
}

/// The runtime error of `r`, as (location, message).
fn runtime(r: tritium::Result<()>, device: &Device) -> (String, String) {
    match r {
        Err(Error::Runtime {
            location, message, ..
        }) => (location, message),
        other => panic!("{device:?}: expected a failed device_assert, got {other:?}"),
    }
}

#[test]
fn a_failing_lane_names_message_line_lane_and_program_on_every_device() {
    let n = 64;
    let x: Vec<i32> = (0..n).collect();
    // (limit, skip, the failure expected): element 37 is lane 5 of program 2 (BLOCK 16).
    type Case = (i32, i32, Option<&'static str>);
    let cases: [Case; 4] = [
        (1000, -1, None),
        (
            37,
            -1,
            Some("value below limit (lane [5] of program (2, 0, 0))"),
        ),
        (
            37,
            40,
            Some("value below limit (lane [5] of program (2, 0, 0))"),
        ),
        // Only element 37 fails, and the mask skips it.
        (38, 37, None),
    ];
    for device in all_devices() {
        for (limit, skip, failure) in cases {
            // A later program may fail first when programs run in parallel, so each
            // failing case has exactly one failing element.
            let x: Vec<i32> = x.iter().map(|&v| if v > 37 { -v } else { v }).collect();
            let mut out = vec![0i32; n as usize];
            let o = checked(true);
            let r = copy_below::launch_with(&device, 4, &o, &mut out, &x, limit, skip, 16);
            match failure {
                None => {
                    r.unwrap_or_else(|e| panic!("{device:?} limit {limit}: {e}"));
                    assert_eq!(out, x, "{device:?}");
                }
                Some(want) => {
                    let (location, message) = runtime(r, &device);
                    assert!(
                        location.ends_with(&format!("device_assert.rs:{COPY_ASSERT_LINE}:5")),
                        "{device:?}: {location}"
                    );
                    assert_eq!(
                        message,
                        format!("device_assert failed: {want}"),
                        "{device:?}"
                    );
                }
            }
        }
    }
}

#[test]
fn outside_checked_mode_a_failing_assert_compiles_to_nothing() {
    let x: Vec<i32> = (0..64).collect();
    for device in [Device::cpu(), Device::cuda_emulator()] {
        let mut out = vec![0i32; 64];
        copy_below::launch_with(&device, 4, &checked(false), &mut out, &x, 0, -1, 16)
            .unwrap_or_else(|e| panic!("{device:?}: {e}"));
        assert_eq!(out, x, "{device:?}");
    }
}

#[test]
fn tile_lanes_are_multi_indices_and_scalar_asserts_have_none() {
    for device in all_devices() {
        let mut x: Vec<f32> = (0..32).map(|v| v as f32).collect();
        let mut out = vec![0f32; 32];
        grid_checks::launch_with(&device, 1, &checked(true), &mut out, &x, 1)
            .unwrap_or_else(|e| panic!("{device:?}: {e}"));
        assert_eq!(out[31], 62.0);
        // `v == v` fails on NaN: row 2, column 3.
        x[2 * 8 + 3] = f32::NAN;
        let r = grid_checks::launch_with(&device, 1, &checked(true), &mut out, &x, 1);
        let (_, message) = runtime(r, &device);
        assert_eq!(
            message, "device_assert failed (lane [2, 3] of program (0, 0, 0))",
            "{device:?}"
        );
        let r = grid_checks::launch_with(&device, 1, &checked(true), &mut out, &x, 0);
        let (_, message) = runtime(r, &device);
        assert_eq!(
            message, "device_assert failed: n is positive (lane [] of program (0, 0, 0))",
            "{device:?}"
        );
    }
}
