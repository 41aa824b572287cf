//! Pointers read from memory (Triton's grouped GEMM: `load(ptrs + g).to(pointer_type(DType::F32))`)
//! through `PtrTable` arguments: results on every device against plain Rust, writes
//! through the table, and what checked mode, the interpreter, race detection and the
//! launch checks say about accesses outside the table's arrays.

use crate::common::{all_devices, random_f32};
use tritium::prelude::*;
use tritium::{Error, Result};

fn checked() -> LaunchOptions {
    LaunchOptions {
        bounds_check: Some(true),
        ..Default::default()
    }
}

/// The devices that check every access: compiled ones in checked mode, the interpreter
/// always.
fn checking_devices() -> [(Device, LaunchOptions); 3] {
    [
        (Device::cpu(), checked()),
        (Device::cuda_emulator(), checked()),
        (Device::interpreter(), LaunchOptions::default()),
    ]
}

/// Program `g` sums the first `lens[g]` elements of the array at `ptrs[g]`.
#[kernel]
fn sum_each(out: Ptr<f32>, ptrs: Ptr<i64>, lens: Ptr<i32>, #[constexpr] BLOCK: usize) {
    let g = program_id(0);
    let x = load(ptrs + g).to(pointer_type(DType::F32));
    let n = load(lens + g);
    let offs = arange(0, BLOCK);
    let v = load(x + offs, mask = offs < n, other = 0.0);
    store(out + g, sum(v, 0));
}

/// Program `g` scales the array at `ptrs[g]` (of `lens[g]` elements) by `g + 1`, in place.
#[kernel]
fn scale_each(ptrs: Ptr<u64>, lens: Ptr<i32>, #[constexpr] BLOCK: usize) {
    let g = program_id(0);
    let x = load(ptrs + g).to(pointer_type(DType::F32));
    let n = load(lens + g);
    let offs = arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask);
    store(x + offs, v * (g + 1).to(DType::F32), mask = mask);
}

/// `out[i] = x[i + 1]`, with the pointer taken apart into its address and put back.
#[kernel]
fn shifted_copy(out: Ptr<f32>, x: Ptr<f32>, #[constexpr] BLOCK: usize) {
    let offs = arange(0, BLOCK);
    let addr = (x + offs).to(DType::I64) + 4;
    store(out + offs, load(addr.to(pointer_type(DType::F32))));
}

/// Every program stores its id into element 0 of the table's first array.
#[kernel]
fn racy_through_table(ptrs: Ptr<i64>) {
    let x = load(ptrs).to(pointer_type(DType::I32));
    store(x, program_id(0));
}

/// `cast` of an i32 to a pointer: not an address.
#[kernel]
fn narrow_address(out: Ptr<f32>, addrs: Ptr<i32>) {
    let p = load(addrs).to(pointer_type(DType::F32));
    store(out, load(p));
}

fn lengths() -> Vec<usize> {
    vec![5, 64, 1, 33, 17]
}

#[test]
fn sums_through_a_table_on_every_device() -> Result<()> {
    let lens = lengths();
    let arrays: Vec<Vec<f32>> = (lens.iter().enumerate())
        .map(|(g, &n)| random_f32(n, g as u64 + 1))
        .collect();
    let want: Vec<f32> = arrays.iter().map(|a| a.iter().sum()).collect();
    let lens32: Vec<i32> = lens.iter().map(|&n| n as i32).collect();
    for device in all_devices() {
        for options in [LaunchOptions::default(), checked()] {
            let table = PtrTable::of(arrays.iter());
            let mut out = vec![0f32; lens.len()];
            sum_each::launch_with(
                &device,
                lens.len(),
                &options,
                &mut out[..],
                &table,
                &lens32[..],
                64,
            )?;
            for (g, (got, want)) in out.iter().zip(&want).enumerate() {
                assert!(
                    (got - want).abs() <= 1e-5 * want.abs().max(1.0),
                    "{device:?} {options:?}: array {g}: {got} vs {want}"
                );
            }
        }
    }
    Ok(())
}

#[test]
fn writes_through_a_table_on_every_device() -> Result<()> {
    let lens = lengths();
    let lens32: Vec<i32> = lens.iter().map(|&n| n as i32).collect();
    for device in all_devices() {
        for options in [LaunchOptions::default(), checked()] {
            let mut arrays: Vec<Vec<f32>> = (lens.iter().enumerate())
                .map(|(g, &n)| random_f32(n, g as u64 + 7))
                .collect();
            let want: Vec<Vec<f32>> = (arrays.iter().enumerate())
                .map(|(g, a)| a.iter().map(|v| v * (g + 1) as f32).collect())
                .collect();
            let table = PtrTable::of(arrays.iter_mut());
            scale_each::launch_with(&device, lens.len(), &options, &table, &lens32[..], 64)?;
            drop(table);
            assert_eq!(arrays, want, "{device:?} {options:?}");
        }
    }
    Ok(())
}

#[test]
fn addresses_round_trip_through_integers() -> Result<()> {
    let x = random_f32(17, 3);
    for device in all_devices() {
        for options in [LaunchOptions::default(), checked()] {
            let mut out = [0f32; 16];
            shifted_copy::launch_with(&device, 1, &options, &mut out[..], &x[..], 16)?;
            assert_eq!(out[..], x[1..], "{device:?} {options:?}");
        }
    }
    Ok(())
}

/// Reading past an entry's end (a length larger than the array) is a fault naming the
/// table's entries among the buffers, in checked mode and on the interpreter.
#[test]
fn reads_past_an_entry_are_faults() {
    let arrays = [vec![1f32; 8], vec![2f32; 4]];
    let lens = [8, 9];
    for (device, options) in checking_devices() {
        let table = PtrTable::of(arrays.iter());
        let mut out = [0f32; 2];
        let e = sum_each::launch_with(&device, 2, &options, &mut out[..], &table, &lens[..], 16)
            .expect_err("the second array has 4 elements, not 9");
        let msg = e.to_string();
        assert!(matches!(e, Error::Runtime { .. }), "{device:?}: {msg}");
        assert!(msg.contains("ptrs[1]"), "{device:?}: {msg}");
        assert!(msg.contains("pointer_tables.rs"), "{device:?}: {msg}");
    }
}

/// A store through an entry pushed as a shared borrow is refused before it happens.
#[test]
fn stores_through_read_only_entries_are_faults() {
    let arrays = [vec![1f32; 8]];
    let lens = [8];
    for (device, options) in checking_devices() {
        let table = PtrTable::of(arrays.iter());
        let e = scale_each::launch_with(&device, 1, &options, &table, &lens[..], 8)
            .expect_err("the entry is read-only");
        assert!(matches!(e, Error::Runtime { .. }), "{device:?}: {e}");
        assert_eq!(arrays[0], vec![1f32; 8], "{device:?}: nothing written");
    }
}

/// A writable entry may not share memory with another buffer of the launch.
#[test]
fn writable_entries_may_not_overlap_other_buffers() {
    let mut data = [0f32; 16];
    let (lo, hi) = data.split_at_mut(8);
    let lens = [8, 8];
    let mut table = PtrTable::new();
    table.push(&mut lo[..]);
    table.push(&mut hi[..]);
    // Disjoint halves are fine.
    scale_each::launch(&Device::cpu(), 2, &table, &lens[..], 8).unwrap();
    drop(table);
    let mut a = ndarray::Array2::<f32>::zeros((4, 4));
    let mut views = a.multi_slice_mut((ndarray::s![.., 0..2], ndarray::s![.., 2..4]));
    let mut table = PtrTable::new();
    table.push(&mut views.0);
    table.push(&mut views.1);
    let e = scale_each::launch(&Device::cpu(), 2, &table, &lens[..], 8)
        .expect_err("interleaved column blocks span each other");
    let msg = e.to_string();
    assert!(msg.contains("`ptrs[0]` overlaps `ptrs[1]`"), "{msg}");
}

#[test]
fn races_through_a_table_are_found() {
    let mut x = [0i32; 4];
    let table = PtrTable::of([&mut x[..]]);
    let options = LaunchOptions {
        race_check: Some(true),
        ..Default::default()
    };
    for device in [Device::cpu(), Device::interpreter()] {
        let e = racy_through_table::launch_with(&device, 2, &options, &table)
            .expect_err("two programs store one element");
        let msg = e.to_string();
        assert!(
            msg.contains("data race on `ptrs[0]` element 0"),
            "{device:?}: {msg}"
        );
    }
}

#[test]
fn only_64_bit_integers_become_pointers() {
    let (mut out, addrs) = ([0f32], [0i32]);
    let e = narrow_address::launch(&Device::cpu(), 1, &mut out[..], &addrs[..])
        .expect_err("an i32 is not an address");
    let msg = e.to_string();
    assert!(msg.contains("addresses are i64 or u64"), "{msg}");
}

/// Kernels with pointers read from memory compile to PTX for sm_80 and sm_90, checked
/// too (the list of every buffer is read through the check buffer's address space).
#[test]
fn pointer_table_kernels_compile_to_ptx() {
    use tritium::backend::cuda::{compile_ptx, CudaCompileOptions};
    use tritium::dsl::trace::Specialization;
    use tritium_kernels::grouped_gemm::grouped_matmul;
    let s = Specialization::default();
    let kernels = [
        sum_each::trace(&s, 64).unwrap(),
        scale_each::trace(&s, 64).unwrap(),
        shifted_copy::trace(&s, 16).unwrap(),
        grouped_matmul::trace::<f32>(&s, 4, 16, 16, 16).unwrap(),
    ];
    for sm in [80, 90] {
        for f in &kernels {
            let ptx = |bounds_check| {
                let copts = CudaCompileOptions {
                    sm,
                    bounds_check,
                    ..Default::default()
                };
                compile_ptx(f, "k", &copts)
                    .unwrap_or_else(|e| panic!("{} on sm_{sm}: {e}", f.name))
                    .text
            };
            let (plain, checked) = (ptx(false), ptx(true));
            assert!(plain.contains("ld.global"), "{}: no global load", f.name);
            // Checked code walks the launch's buffer list for each table pointer.
            assert!(checked.len() > plain.len(), "{} on sm_{sm}", f.name);
        }
    }
}
