//! Checked mode (`LaunchOptions::bounds_check`) on the compiled backends: the CPU, the
//! CUDA lowering on the emulator (1 and 4 warps), and CUDA device 0 when there is one.
//! Every case is one table row; each backend must report the fault the CPU reports (op,
//! source location, program, buffers) and touch no memory outside the buffers.

use std::ops::Range;
use tritium_backend::{launch, Device, Error, KernelArgs, KernelKey, LaunchOptions};
use tritium_dsl::ir::CmpPred;
use tritium_dsl::trace::flow::for_range;
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, scalar_param, Specialization, Tile, Tracer};
use tritium_dsl::DType;

/// Elements of `x` and of the `out` buffer the kernels get (a window of a larger vector,
/// whose elements outside the window must never change).
const X: usize = 18;
const OUT: usize = 18;
/// `out` starts this many elements into its vector; the vector has `GUARD` more after it.
const GUARD: usize = 16;
const SENTINEL: f32 = -7.0;

/// The scalar `k` a case passes.
#[derive(Clone, Copy)]
enum K {
    Value(i64),
    /// The element offset from `x` to `out`: `x + k` is `out`'s first element.
    XToOut,
    /// `out + k` is the address 2^64 - 4, whose 4-byte end wraps around to 0.
    Wrap,
}

/// Where the reported address must be.
enum At {
    /// In these elements (possibly negative or past the end) of this buffer.
    Elems(&'static str, Range<i64>),
    /// Exactly here.
    Addr(u64),
}

struct Fault {
    kind: &'static str,
    at: At,
    program: [u64; 3],
}

struct Case {
    name: &'static str,
    grid: [u64; 3],
    k: K,
    /// The kernel over `x: *f32` (`X` elements), `out: *f32` (`OUT`) and `k: i64`.
    body: fn(Tile, Tile, Tile),
    /// The fault, or `None` when the launch must succeed.
    fault: Option<Fault>,
    /// The first elements of `out` afterwards (the rest of `out` is not compared).
    out: &'static [f32],
}

fn cases() -> Vec<Case> {
    use At::Elems;
    let fault = |kind, at, program| Some(Fault { kind, at, program });
    vec![
        Case {
            name: "load_tile_past_the_end",
            grid: [1, 1, 1],
            k: K::Value(0),
            body: |x, out, _| store(out, load(x + arange(0, 32), NoArg, NoArg).sum(0), NoArg),
            fault: fault("load", Elems("x", 18..32), [0, 0, 0]),
            // Out-of-bounds loads give 0 and the program goes on: 0 + 1 + … + 17.
            out: &[153.0],
        },
        Case {
            // Chunks of 4 elements are one vector load when every element is accessed:
            // the chunk [16, 20) straddles the end of `x`.
            name: "vector_load_straddling_the_end",
            grid: [1, 1, 1],
            k: K::Value(0),
            body: |x, out, _| {
                let offs = arange(0, 512);
                let v = load(x + offs, compare(offs, CmpPred::Lt, 20), NoArg);
                store(out, v.sum(0), NoArg)
            },
            fault: fault("load", Elems("x", 18..20), [0, 0, 0]),
            out: &[153.0],
        },
        Case {
            name: "store_tile_past_the_end",
            grid: [1, 1, 1],
            k: K::Value(0),
            body: |_, out, _| store(out + arange(0, 32), 1.0, NoArg),
            fault: fault("store", Elems("out", 18..32), [0, 0, 0]),
            out: &[1.0; OUT],
        },
        Case {
            // As above: the chunk [16, 20) straddles the end of `out`.
            name: "vector_store_straddling_the_end",
            grid: [1, 1, 1],
            k: K::Value(0),
            body: |_, out, _| {
                let offs = arange(0, 512);
                store(out + offs, 2.0, compare(offs, CmpPred::Lt, 20))
            },
            fault: fault("store", Elems("out", 18..20), [0, 0, 0]),
            out: &[2.0; OUT],
        },
        Case {
            name: "atomic_tile_past_the_end",
            grid: [1, 1, 1],
            k: K::Value(0),
            body: |_, out, _| {
                atomic_add(out + arange(0, 32), 3.0, NoArg);
            },
            fault: fault("atomic", Elems("out", 18..32), [0, 0, 0]),
            out: &[SENTINEL + 3.0; OUT],
        },
        Case {
            name: "scalar_load_before_the_start",
            grid: [1, 1, 1],
            k: K::Value(-1),
            body: |x, out, k| store(out, load(x + k, NoArg, NoArg), NoArg),
            fault: fault("load", Elems("x", -1..0), [0, 0, 0]),
            out: &[0.0],
        },
        Case {
            name: "scalar_store_past_the_end",
            grid: [1, 1, 1],
            k: K::Value(OUT as i64 + 3),
            body: |_, out, k| store(out + k, 4.0, NoArg),
            fault: fault("store", Elems("out", 21..22), [0, 0, 0]),
            out: &[SENTINEL],
        },
        Case {
            name: "scalar_atomic_past_the_end",
            grid: [1, 1, 1],
            k: K::Value(OUT as i64),
            body: |_, out, k| {
                atomic_max(out + k, 5.0, NoArg);
            },
            fault: fault("atomic", Elems("out", 18..19), [0, 0, 0]),
            out: &[SENTINEL],
        },
        Case {
            name: "masked_off_lanes_are_not_accesses",
            grid: [1, 1, 1],
            k: K::Value(0),
            body: |_, out, _| {
                let offs = arange(0, 512);
                store(out + offs, 6.0, compare(offs, CmpPred::Lt, OUT as i32))
            },
            fault: None,
            out: &[6.0; OUT],
        },
        Case {
            // Programs 0 to 2 fill `out`; only program (1, 2, 0) (the sixth) writes past it.
            name: "program_id_of_the_fault",
            grid: [2, 3, 1],
            k: K::Value(0),
            body: |_, out, _| {
                let p = program_id(1) * 2 + program_id(0);
                let offs = p * 8 + arange(0, 8);
                let inside = compare(offs, CmpPred::Lt, OUT as i32);
                store(
                    out + offs,
                    1.0,
                    logic(inside, false, compare(p, CmpPred::Eq, 5)),
                )
            },
            fault: fault("store", Elems("out", 40..48), [1, 2, 0]),
            out: &[1.0; OUT],
        },
        Case {
            // The third iteration's pointers (carried by the loop) are past `out`.
            name: "pointers_carried_by_a_loop",
            grid: [1, 1, 1],
            k: K::Value(0),
            body: |_, out, _| {
                for_range(0, 3, 1, out + arange(0, 8), |_, p| {
                    store(p, 1.0, NoArg);
                    p + 8
                });
            },
            fault: fault("store", Elems("out", 18..24), [0, 0, 0]),
            out: &[1.0; OUT],
        },
        Case {
            // The address is inside `out`, but the pointer derives from `x` only.
            name: "inside_a_buffer_the_pointer_does_not_derive_from",
            grid: [1, 1, 1],
            k: K::XToOut,
            body: |x, _, k| store(x + k, 8.0, NoArg),
            fault: fault("store", Elems("out", 0..1), [0, 0, 0]),
            out: &[SENTINEL],
        },
        Case {
            name: "end_of_the_address_space",
            grid: [1, 1, 1],
            k: K::Wrap,
            body: |_, out, k| store(out + k, 9.0, NoArg),
            // Below address 0: checked mode's wrapped-address marker, 2^63, which no
            // buffer holds (`llvm::Emit::checked_offset`).
            fault: fault("store", At::Addr(1 << 63), [0, 0, 0]),
            out: &[SENTINEL],
        },
    ]
}

/// A fault as the error message reports it.
#[derive(Debug)]
struct Reported {
    location: String,
    kind: String,
    addr: u64,
    program: String,
    buffers: Vec<(String, u64, u64)>,
}

fn hex(s: &str) -> u64 {
    u64::from_str_radix(s.trim().trim_start_matches("0x"), 16)
        .unwrap_or_else(|e| panic!("`{s}`: {e}"))
}

/// Parses "out-of-bounds {kind} at address {addr} by program ({x}, {y}, {z}) (buffers:
/// `x` [lo, hi), …)".
fn reported(e: Error) -> Reported {
    let Error::Runtime {
        kernel,
        location,
        message,
    } = e
    else {
        panic!("expected a runtime error, got {e}");
    };
    assert_eq!(kernel, "checked", "{message}");
    let parse = || -> Option<Reported> {
        let rest = message.strip_prefix("out-of-bounds ")?;
        let (kind, rest) = rest.split_once(" at address ")?;
        let (addr, rest) = rest.split_once(" by program ")?;
        let (program, list) = rest.split_once(" (buffers: ")?;
        let parts: Vec<&str> = list.strip_suffix(')')?.split('`').collect();
        let buffers = parts[1..]
            .chunks(2)
            .map(|c| {
                let range = c[1].trim().trim_end_matches(',').trim_start_matches('[');
                let (lo, hi) = range.trim_end_matches(')').split_once(", ").unwrap();
                (c[0].to_string(), hex(lo), hex(hi))
            })
            .collect();
        Some(Reported {
            location: location.clone(),
            kind: kind.to_string(),
            addr: hex(addr),
            program: program.to_string(),
            buffers,
        })
    };
    parse().unwrap_or_else(|| panic!("unexpected message: {message}"))
}

/// The launch's result and `out`'s whole vector (the window and its guards).
fn run(case: &Case, device: &Device, num_warps: u32) -> (tritium_backend::Result<()>, Vec<f32>) {
    run_with(case, device, num_warps, true)
}

fn run_with(
    case: &Case,
    device: &Device,
    num_warps: u32,
    bounds_check: bool,
) -> (tritium_backend::Result<()>, Vec<f32>) {
    // `x` too is a window: a load past it would read 1000s.
    let mut xs: Vec<f32> = (0..GUARD + X + GUARD).map(|_| 1000.0).collect();
    let x = &mut xs[GUARD..GUARD + X];
    x.iter_mut().enumerate().for_each(|(i, v)| *v = i as f32);
    let mut out = vec![SENTINEL; GUARD + OUT + GUARD];
    let window = &mut out[GUARD..GUARD + OUT];
    let k = match case.k {
        K::Value(k) => k,
        K::XToOut => (window.as_ptr() as i64 - x.as_ptr() as i64) / 4,
        K::Wrap => -(window.as_ptr() as i64 / 4) - 1,
    };
    let mut args = KernelArgs::new();
    args.ptr("x", x);
    args.ptr("out", window);
    args.scalar("k", k);
    let options = LaunchOptions {
        bounds_check: Some(bounds_check),
        num_warps,
        ..Default::default()
    };
    // Unchecked runs are `launch_unchecked`'s: the default launch would check the
    // accesses its bounds proof leaves.
    // SAFETY: `x` and `out` are windows of vectors with GUARD elements on each side, which
    // every case's accesses stay inside.
    let options = match bounds_check {
        true => options,
        false => unsafe { options.unchecked() },
    };
    let key = KernelKey {
        name: "checked",
        constexprs: case.name.to_string(),
    };
    let body = case.body;
    let r = launch(
        device,
        case.grid,
        &options,
        key,
        args,
        &|s: &Specialization| {
            let t = Tracer::begin("checked")?;
            let x = ptr_param("x", DType::F32);
            let out = ptr_param("out", DType::F32);
            let k = scalar_param("k", DType::I64, 2, s);
            body(x, out, k);
            t.finish()
        },
    );
    (r, out)
}

/// Checks one run against the case; returns the fault reported.
fn check(case: &Case, what: &str, r: tritium_backend::Result<()>, out: &[f32]) -> Option<Reported> {
    let what = format!("{} on {what}", case.name);
    assert!(
        out[..GUARD]
            .iter()
            .chain(&out[GUARD + OUT..])
            .all(|v| *v == SENTINEL),
        "{what}: memory outside `out` changed: {out:?}"
    );
    assert_eq!(&out[GUARD..GUARD + case.out.len()], case.out, "{what}: out");
    let Some(want) = &case.fault else {
        r.unwrap_or_else(|e| panic!("{what}: {e}"));
        return None;
    };
    let got = reported(r.expect_err(&what));
    assert_eq!(got.kind, want.kind, "{what}: {got:?}");
    let [x, y, z] = want.program;
    assert_eq!(got.program, format!("({x}, {y}, {z})"), "{what}: {got:?}");
    assert!(got.location.contains("checked.rs:"), "{what}: {got:?}");
    match &want.at {
        At::Addr(a) => assert_eq!(got.addr, *a, "{what}: {got:?}"),
        At::Elems(name, elems) => {
            let (_, lo, _) = (got.buffers.iter())
                .find(|b| b.0 == *name)
                .unwrap_or_else(|| panic!("{what}: no buffer `{name}` in {got:?}"));
            let bytes = got.addr.wrapping_sub(*lo) as i64;
            assert!(
                bytes % 4 == 0 && elems.contains(&(bytes / 4)),
                "{what}: address {:#x} is element {} of `{name}`, not in {elems:?}",
                got.addr,
                bytes as f64 / 4.0
            );
        }
    }
    Some(got)
}

#[test]
fn out_of_bounds_accesses_fault_alike_on_every_compiled_backend() {
    let gpu = match Device::cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("skipped checked mode on CUDA: {e}");
            None
        }
    };
    for case in cases() {
        let (r, out) = run(&case, &Device::cpu(), 4);
        let cpu = check(&case, "the CPU", r, &out);
        let mut others = vec![
            ("the CUDA emulator, 1 warp", Device::cuda_emulator(), 1),
            ("the CUDA emulator, 4 warps", Device::cuda_emulator(), 4),
        ];
        match (&gpu, case.k) {
            (Some(d), K::Value(_)) => others.push(("CUDA", d.clone(), 4)),
            // The offset is computed from host addresses; staged buffers move.
            (Some(_), _) => eprintln!("skipped {} on CUDA: it needs host addresses", case.name),
            (None, _) => {}
        }
        for (what, device, warps) in others {
            let (r, out) = run(&case, &device, warps);
            let got = check(&case, what, r, &out);
            let (Some(cpu), Some(got)) = (&cpu, got) else {
                continue;
            };
            assert_eq!(got.location, cpu.location, "{} on {what}", case.name);
            // The same buffers (names and sizes) in the same order.
            let shape = |r: &Reported| -> Vec<(String, u64)> {
                (r.buffers.iter())
                    .map(|(n, lo, hi)| (n.clone(), hi - lo))
                    .collect()
            };
            assert_eq!(shape(&got), shape(cpu), "{} on {what}", case.name);
        }
    }
}

/// The in-memory caches keep checked and unchecked builds of one kernel apart: unchecked
/// (`launch_unchecked`), the same launch writes past `out` (into the guard, inside the
/// vector); checked, it faults; unchecked again, it writes past `out` again.
#[test]
fn checked_and_unchecked_builds_are_cached_apart() {
    let case = Case {
        name: "cached_apart",
        grid: [1, 1, 1],
        k: K::Value(0),
        body: |_, out, _| store(out + arange(0, 32), 1.0, NoArg),
        fault: None,
        out: &[],
    };
    for device in [Device::cpu(), Device::cuda_emulator()] {
        for checked in [false, true, false] {
            let (r, out) = run_with(&case, &device, 4, checked);
            let past = &out[GUARD + OUT..GUARD + 32];
            if checked {
                let e = r.expect_err("checked");
                assert!(
                    e.to_string().contains("out-of-bounds store"),
                    "{device:?}: {e}"
                );
                assert!(past.iter().all(|v| *v == SENTINEL), "{device:?}: {past:?}");
            } else {
                r.unwrap_or_else(|e| panic!("{device:?}: {e}"));
                assert!(past.iter().all(|v| *v == 1.0), "{device:?}: {past:?}");
            }
        }
    }
}
