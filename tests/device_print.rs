//! `device_print` (Triton's): every lane of every argument is a line
//! `pid (x, y, z) idx (i, j) prefix: value`, the same text on every device (the order
//! between programs, and between GPU threads, is not fixed: lines are compared sorted).

use crate::common::all_devices;
use tritium::backend::capture_device_prints;
use tritium::prelude::*;

/// The devices whose prints can be captured: a GPU's `vprintf` output goes from the driver
/// to the process's standard output, past `capture_device_prints`.
fn host_devices() -> Vec<Device> {
    let all = all_devices().into_iter();
    all.filter(|d| !matches!(d, Device::Cuda(_))).collect()
}

#[kernel]
fn show(x: Ptr<i32>, y: Ptr<f32>) {
    let r = arange(0, 2)[(.., None)];
    let c = arange(0, 3)[(None, ..)];
    let v = load(x + r * 3 + c);
    device_print("v: ", v);
    device_print("pair", program_id(0), load(y + arange(0, 2)));
    device_print("hex", v, hex = true);
    device_print("", v > 0);
}

/// The lines `show` prints for program `p`, sorted.
fn expected(x: &[i32], y: &[f32], programs: i32) -> Vec<String> {
    let mut lines = Vec::new();
    for p in 0..programs {
        let pid = format!("pid ({p}, 0, 0)");
        for i in 0..2 {
            for j in 0..3 {
                let v = x[i * 3 + j];
                lines.push(format!("{pid} idx ({i}, {j}) v: {v}"));
                lines.push(format!("{pid} idx ({i}, {j}) hex: 0x{:08x}", v as u32));
                lines.push(format!("{pid} idx ({i}, {j}): {}", v > 0));
            }
        }
        lines.push(format!("{pid} pair (operand 0): {p}"));
        for (k, v) in y.iter().enumerate() {
            lines.push(format!("{pid} idx ({k}) pair (operand 1): {v:?}"));
        }
    }
    lines.sort();
    lines
}

#[test]
fn every_device_prints_the_same_lines() {
    let x = [-3, -2, -1, 0, 1, 2];
    let y = [1.5f32, -0.25];
    for device in host_devices() {
        let (r, text) = capture_device_prints(|| show::launch(&device, 2, &x[..], &y[..]));
        r.unwrap_or_else(|e| panic!("{device:?}: {e}"));
        let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
        lines.sort();
        assert_eq!(lines, expected(&x, &y, 2), "{device:?}");
    }
}

/// Prints a scalar of `T` (the values of every dtype go through one formatter).
#[kernel]
fn show_one<T: Element>(x: Ptr<T>) {
    device_print("x", load(x));
}

#[test]
fn each_dtype_prints_as_rust_formats_it() {
    use half::{bf16, f16};
    fn one<T: Element + Copy>(x: T, device: &Device) -> String {
        let (r, text) = capture_device_prints(|| show_one::launch(device, 1, &[x][..]));
        r.unwrap_or_else(|e| panic!("{device:?}: {e}"));
        text.trim_end().to_string()
    }
    for device in host_devices() {
        let rows: [(String, &str); 8] = [
            (one(-7i8, &device), "-7"),
            (one(u16::MAX, &device), "65535"),
            (one(i64::MIN, &device), "-9223372036854775808"),
            (one(f16::from_f32(0.1), &device), "0.099975586"),
            (one(bf16::from_f32(-2.5), &device), "-2.5"),
            (one(f32::NAN, &device), "NaN"),
            (one(f64::NEG_INFINITY, &device), "-inf"),
            (one(0.1f64, &device), "0.1"),
        ];
        for (got, want) in rows {
            assert_eq!(got, format!("pid (0, 0, 0) x: {want}"), "{device:?}");
        }
    }
}

/// On NVPTX a print is one `vprintf` per lane and a checked assert records a fault; both
/// compile for sm_80 and sm_90 (a GPU run is in `cuda.rs` when a GPU is present).
#[test]
fn prints_and_asserts_compile_to_ptx() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    let f = show::trace(&Specialization::default()).unwrap();
    let g = crate::device_assert::copy_below_trace(16);
    for sm in [80, 90] {
        let copts = CudaCompileOptions {
            sm,
            bounds_check: true,
            ..Default::default()
        };
        let ptx = compile_ptx(&f, "show", &copts).unwrap().text;
        assert!(ptx.contains("call.uni") || ptx.contains("call "), "{ptx}");
        assert!(ptx.contains("vprintf"), "no vprintf in:\n{ptx}");
        // PTX writes the format strings as byte lists.
        let format = "pid (%d, %d, %d) idx (%d, %d) v: %lld\n";
        let bytes: Vec<String> = format.bytes().map(|b| b.to_string()).collect();
        assert!(
            ptx.contains(&bytes.join(", ")),
            "no format {format:?} in:\n{ptx}"
        );
        let ptx = compile_ptx(&g, "copy_below", &copts).unwrap().text;
        assert!(
            ptx.contains("atom.global.cas") || ptx.contains("atom.cas"),
            "{ptx}"
        );
    }
}
