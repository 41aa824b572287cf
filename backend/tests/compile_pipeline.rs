//! The CPU compile pipeline: disk cache validation, dumps, compile-once under concurrency,
//! the worker count, and what the generated assembly looks like.
//!
//! Every test uses its own kernel name and its own cache/dump directories (through
//! `LaunchOptions`, never the process environment), so the tests run in parallel.

use crate::common::{vadd, TempDir};
use ndarray::Array1;
use std::path::{Path, PathBuf};
use tritium_backend::cpu;
use tritium_backend::pipeline::cache;
use tritium_backend::{launch, Device, KernelArgs, KernelKey, LaunchOptions};
use tritium_dsl::ir::Function;
use tritium_dsl::trace::flow::for_range;
use tritium_dsl::trace::lang::*;
use tritium_dsl::trace::{ptr_param, scalar_param, Specialization, Tracer};
use tritium_dsl::DType;

const BLOCK: usize = 256;

/// Launches `vadd(name)` on n = 1000 elements and checks the result. `variant` goes into
/// the kernel key only, so a new variant misses the in-memory cache but has the same IR
/// (and so the same disk-cache entry) as the others.
fn run_vadd(name: &'static str, variant: &str, options: &LaunchOptions) {
    run_vadd_on(&Device::cpu(), name, variant, options)
}

/// [`run_vadd`] on `device`.
fn run_vadd_on(device: &Device, name: &'static str, variant: &str, options: &LaunchOptions) {
    let n = 1000;
    let a = Array1::from_iter((0..n).map(|i| i as f32));
    let b = Array1::from_iter((0..n).map(|i| 0.5 * i as f32));
    let mut out = Array1::<f32>::zeros(n);
    launch_vadd(device, (name, variant), options, &mut out, &a, &b).unwrap();
    let want = Array1::from_iter((0..n).map(|i| 1.5 * i as f32));
    assert_eq!(out, want, "{name} ({variant})");
}

/// Launches `vadd(name)`, `out = a + b`, keyed by `variant` too (see [`run_vadd`]).
fn launch_vadd(
    device: &Device,
    (name, variant): (&'static str, &str),
    options: &LaunchOptions,
    out: &mut Array1<f32>,
    a: &Array1<f32>,
    b: &Array1<f32>,
) -> tritium_backend::Result<()> {
    let n = out.len();
    let mut args = KernelArgs::new();
    args.ptr("out", out);
    args.ptr("a", a);
    args.ptr("b", b);
    args.scalar("n", n as i32);
    let key = KernelKey {
        name,
        constexprs: format!("BLOCK={BLOCK};variant={variant}"),
    };
    launch(device, n.div_ceil(BLOCK), options, key, args, &|s| {
        vadd(name, s, BLOCK)
    })
}

/// The single cache entry under `root`: its path and key.
fn only_entry(root: &Path) -> (PathBuf, String) {
    let entries: Vec<PathBuf> = std::fs::read_dir(root.join("cpu"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "tobj"))
        .collect();
    assert_eq!(entries.len(), 1, "{entries:?}");
    let key = entries[0]
        .file_stem()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    (entries[0].clone(), key)
}

#[test]
fn corrupted_cache_entries_are_recompiled_and_rewritten() {
    let name = "pipeline_cache_vadd";
    let dir = TempDir::new("cache");
    let opts = LaunchOptions {
        cache_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    run_vadd(name, "first", &opts);
    let first = cpu::stats().kernel(name);
    assert_eq!((first.compiles, first.codegen, first.disk_hits), (1, 1, 0));
    let (path, key) = only_entry(dir.path());
    assert_eq!(path, cache::entry_path(dir.path(), &key));
    cache::check_entry(dir.path(), &key).unwrap();
    let good = std::fs::read(&path).unwrap();

    type Damage = fn(&mut Vec<u8>);
    let damages: [(&str, Damage); 7] = [
        ("emptied", |b| b.clear()),
        ("truncated to half", |b| b.truncate(b.len() / 2)),
        ("last byte cut", |b| {
            b.pop();
        }),
        ("object byte flipped", |b| {
            let at = b.len() - 100;
            b[at] ^= 0x55
        }),
        ("scratch size flipped", |b| b[8 + 64 + 2] ^= 0x01),
        ("magic flipped", |b| b[0] ^= 0xff),
        ("garbage appended", |b| b.extend_from_slice(b"junk")),
    ];
    for (i, (what, damage)) in damages.iter().enumerate() {
        let mut bytes = good.clone();
        damage(&mut bytes);
        std::fs::write(&path, &bytes).unwrap();
        assert!(cache::check_entry(dir.path(), &key).is_err(), "{what}");
        let before = cpu::stats().kernel(name);
        run_vadd(name, &format!("damaged-{i}"), &opts);
        let after = cpu::stats().kernel(name);
        assert_eq!(after.disk_rejected - before.disk_rejected, 1, "{what}");
        assert_eq!(after.codegen - before.codegen, 1, "{what}");
        assert_eq!(after.disk_hits, before.disk_hits, "{what}");
        cache::check_entry(dir.path(), &key)
            .unwrap_or_else(|e| panic!("{what}: the rewritten entry is invalid: {e}"));
    }
    // The rewritten entry is used as is.
    let before = cpu::stats().kernel(name);
    run_vadd(name, "after", &opts);
    let after = cpu::stats().kernel(name);
    assert_eq!(after.disk_hits - before.disk_hits, 1);
    assert_eq!(after.codegen, before.codegen);
    assert_eq!(std::fs::read(&path).unwrap(), good);
}

/// The dump files of `dir`, as (symbol, extension) pairs.
fn dumped(dir: &Path) -> Vec<(String, String)> {
    let mut files: Vec<(String, String)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let name = e.unwrap().file_name().to_string_lossy().into_owned();
            let (sym, ext) = name.split_once('.').unwrap();
            (sym.to_string(), ext.to_string())
        })
        .collect();
    files.sort();
    files
}

#[test]
fn dump_dir_gets_all_four_files_even_with_a_warm_disk_cache() {
    let name = "pipeline_dump_vadd";
    let cache_dir = TempDir::new("dump-cache");
    for round in ["cold", "warm"] {
        let dump = TempDir::new("dump");
        let opts = LaunchOptions {
            cache_dir: Some(cache_dir.path().to_path_buf()),
            dump_dir: Some(dump.path().to_path_buf()),
            ..Default::default()
        };
        run_vadd(name, round, &opts);
        let files = dumped(dump.path());
        let exts: Vec<&str> = files.iter().map(|(_, e)| e.as_str()).collect();
        assert_eq!(exts, ["ll", "opt.ll", "s", "tir"], "{round}: {files:?}");
        let symbol = &files[0].0;
        assert!(files.iter().all(|(s, _)| s == symbol), "{files:?}");
        let read = |ext: &str| std::fs::read_to_string(dump.path().join(format!("{symbol}.{ext}")));
        assert!(read("tir").unwrap().contains(&format!("kernel @{name}(")));
        assert!(read("ll")
            .unwrap()
            .contains(&format!("define void @{symbol}(")));
        assert!(read("opt.ll").unwrap().contains(&format!("@{symbol}(")));
        assert!(read("s").unwrap().contains(&format!("{symbol}:")));
    }
}

/// The CPU's program body is called from the entry's program loop, not inlined into it:
/// inlined, O3 simplified the body twice (alone, then inside the entry), a third of the
/// optimization time of larger kernels.
#[test]
fn the_cpu_program_body_stays_a_function_of_its_own() {
    let (dump, cache) = (TempDir::new("dump-body"), TempDir::new("body-cache"));
    let opts = LaunchOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        dump_dir: Some(dump.path().to_path_buf()),
        ..Default::default()
    };
    run_vadd("pipeline_body_call", "cold", &opts);
    let symbol = &dumped(dump.path())[0].0;
    let opt = std::fs::read_to_string(dump.path().join(format!("{symbol}.opt.ll"))).unwrap();
    let body = format!("@{symbol}_body(");
    assert!(
        opt.lines()
            .any(|l| l.starts_with("define internal") && l.contains(&body)),
        "no body function in:\n{opt}"
    );
    assert!(
        opt.lines().any(|l| l.contains("call") && l.contains(&body)),
        "the entry does not call the body:\n{opt}"
    );
}

/// The CPU, the emulator and NVPTX share one pipeline: each counts its compiles under
/// its own target and writes the same dumps (NVPTX its `.ptx`, both host targets `.s`).
#[test]
fn every_target_counts_compiles_and_writes_dumps() {
    use tritium_backend::cuda::{compile_cached, CudaCompileOptions};
    use tritium_backend::pipeline::{stats, TargetKind};
    let name = "pipeline_every_target_vadd";
    let cases = [
        (Device::cpu(), TargetKind::Cpu, "s"),
        (Device::CudaEmulator, TargetKind::Emulator, "s"),
    ];
    for (device, kind, asm) in cases {
        let dump = TempDir::new("targets-dump");
        let opts = LaunchOptions {
            dump_dir: Some(dump.path().to_path_buf()),
            ..Default::default()
        };
        run_vadd_on(&device, name, "targets", &opts);
        let st = stats().kernel_on(kind, name);
        assert_eq!((st.compiles, st.codegen), (1, 1), "{kind:?}: {st:?}");
        let exts: Vec<String> = dumped(dump.path()).into_iter().map(|(_, e)| e).collect();
        assert_eq!(exts, ["ll", "opt.ll", asm, "tir"], "{kind:?}");
    }
    let cache_dir = TempDir::new("targets-cache");
    let opts = LaunchOptions {
        cache_dir: Some(cache_dir.path().to_path_buf()),
        ..Default::default()
    };
    let f = || vadd(name, &Specialization::default(), BLOCK).unwrap();
    let copts = CudaCompileOptions::default();
    let first = compile_cached(f(), &copts, &opts).unwrap();
    let again = compile_cached(f(), &copts, &opts).unwrap();
    assert_eq!(first, again);
    let st = stats().kernel_on(TargetKind::Nvptx, name);
    assert_eq!((st.compiles, st.codegen, st.disk_hits), (2, 1, 1), "{st:?}");
    assert_eq!(stats().kernel(name).compiles, 4);
}

#[cfg(target_arch = "x86_64")]
#[test]
fn vector_add_assembly_uses_packed_vector_adds() {
    let dump = TempDir::new("asm");
    let opts = LaunchOptions {
        cache_dir: Some(dump.path().join("cache")),
        dump_dir: Some(dump.path().join("dump")),
        ..Default::default()
    };
    run_vadd("pipeline_asm_vadd", "asm", &opts);
    let s_file = std::fs::read_dir(dump.path().join("dump"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .find(|p| p.to_string_lossy().ends_with(".s"))
        .expect("an assembly dump");
    let asm = std::fs::read_to_string(s_file).unwrap();
    // `addps`/`vaddps` on xmm/ymm/zmm registers: packed single-precision adds.
    let packed = asm.lines().any(|l| {
        let l = l.trim();
        (l.starts_with("addps") || l.starts_with("vaddps")) && l.contains("mm")
    });
    assert!(packed, "no packed f32 add in:\n{asm}");
}

#[test]
fn concurrent_first_launches_compile_once() {
    let name = "pipeline_concurrent_vadd";
    let dir = TempDir::new("concurrent");
    let opts = LaunchOptions {
        cache_dir: Some(dir.path().to_path_buf()),
        ..Default::default()
    };
    let threads = 8;
    let barrier = std::sync::Barrier::new(threads);
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                barrier.wait();
                run_vadd(name, "shared", &opts);
            });
        }
    });
    let st = cpu::stats().kernel(name);
    assert_eq!(st.compiles, 1, "{st:?}");
    assert_eq!(st.codegen, 1, "{st:?}");
}

#[test]
fn num_threads_values_parse() {
    let cases: [(&str, Option<usize>); 8] = [
        ("4", Some(4)),
        (" 2\n", Some(2)),
        ("1", Some(1)),
        ("0", None),
        ("-1", None),
        ("two", None),
        ("", None),
        ("3.5", None),
    ];
    for (value, want) in cases {
        assert_eq!(cpu::parse_num_threads(value), want, "{value:?}");
    }
}

/// Marks the child process of `num_threads_env_is_honoured`.
const CHILD: &str = "TRITIUM_TEST_POOL_CHILD";

/// Each program increments `active`, records the peak in `peak`, spins on atomics for a
/// while, then decrements `active`: `peak` is the most programs that ever ran at once.
fn peak_workers(spec: &Specialization) -> tritium_dsl::Result<Function> {
    let t = Tracer::begin("pipeline_peak_workers")?;
    let active = ptr_param("active", DType::I32);
    let peak = ptr_param("peak", DType::I32);
    let spin = ptr_param("spin", DType::I32);
    let iters = scalar_param("iters", DType::I32, 3, spec);
    let now = atomic_add(active, 1, NoArg) + 1;
    atomic_max(peak, now, NoArg);
    for_range(0, iters, 1, (), |_, ()| {
        atomic_add(spin, 1, NoArg);
    });
    atomic_add(active, -1, NoArg);
    t.finish()
}

/// Runs in a child process with `TRITIUM_NUM_THREADS` set (see below).
#[test]
#[ignore = "run by num_threads_env_is_honoured in a child process"]
fn num_threads_child() {
    let Ok(want) = std::env::var(CHILD) else {
        return;
    };
    let want: usize = want.parse().unwrap();
    assert_eq!(cpu::num_threads(), want);
    assert_eq!(cpu::pool_threads(), want);
    let mut active = [0i32];
    let mut peak = [0i32];
    let mut spin = [0i32];
    let mut args = KernelArgs::new();
    args.ptr("active", &mut active[..]);
    args.ptr("peak", &mut peak[..]);
    args.ptr("spin", &mut spin[..]);
    args.scalar("iters", 20_000i32);
    let key = KernelKey {
        name: "pipeline_peak_workers",
        constexprs: String::new(),
    };
    let programs = 64;
    launch(
        &Device::cpu(),
        programs,
        &LaunchOptions::default(),
        key,
        args,
        &peak_workers,
    )
    .unwrap();
    assert_eq!(active[0], 0);
    assert_eq!(spin[0], 20_000 * programs);
    assert!(
        (1..=want as i32).contains(&peak[0]),
        "{} programs ran at once with {want} workers",
        peak[0]
    );
    println!("child ok: peak {} of {want}", peak[0]);
}

#[test]
fn num_threads_env_is_honoured() {
    let cores = std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1);
    // One worker (programs never overlap) and more workers than cores (not the default).
    for n in [1, cores + 1] {
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args([
                "compile_pipeline::num_threads_child",
                "--exact",
                "--ignored",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("TRITIUM_NUM_THREADS", n.to_string())
            .env(CHILD, n.to_string())
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "TRITIUM_NUM_THREADS={n}:\n{text}");
        assert!(
            text.contains("child ok") && text.contains("1 passed"),
            "the child test did not run:\n{text}"
        );
    }
}

/// An entry as the cache writes it (`pipeline/cache.rs`), digest included: what a forger
/// with the format at hand can produce.
pub(crate) fn forged_entry(key: &str, meta: u64, object: &[u8]) -> Vec<u8> {
    use sha2::{Digest, Sha256};
    let mut header = b"TRITOBJ2".to_vec();
    header.extend_from_slice(key.as_bytes());
    header.extend_from_slice(&meta.to_le_bytes());
    header.extend_from_slice(&(object.len() as u64).to_le_bytes());
    let mut h = Sha256::new();
    h.update(&header);
    h.update(object);
    let mut out = header;
    out.extend_from_slice(&h.finalize());
    out.extend_from_slice(object);
    out
}

/// The object bytes of a valid entry.
pub(crate) fn object_of(entry: &[u8]) -> &[u8] {
    &entry[8 + 64 + 8 + 8 + 32..]
}

/// Entries that pass the digest but must not be trusted, and files that are not entries,
/// are recompiled and replaced: a scratch size over the limit, another kernel's object
/// under this key, and a FIFO (which would block a plain read forever).
#[test]
fn forged_entries_and_fifos_are_recompiled_not_trusted() {
    let (name, other) = ("pipeline_forged_vadd", "pipeline_forged_other");
    let dir = TempDir::new("forged");
    let other_dir = TempDir::new("forged-other");
    let opts = |d: &TempDir| LaunchOptions {
        cache_dir: Some(d.path().to_path_buf()),
        ..Default::default()
    };
    run_vadd(name, "first", &opts(&dir));
    run_vadd(other, "first", &opts(&other_dir));
    let (path, key) = only_entry(dir.path());
    let good = std::fs::read(&path).unwrap();
    let (other_path, _) = only_entry(other_dir.path());
    let foreign = std::fs::read(other_path).unwrap();
    type Plant = Box<dyn Fn(&Path)>;
    // (what, planted, whether the format check alone sees it: another kernel's object
    // is well formed and only fails the symbol check at load)
    let cases: Vec<(&str, Plant, bool)> = vec![
        (
            "huge scratch size",
            {
                let e = forged_entry(&key, 1 << 40, object_of(&good));
                Box::new(move |p: &Path| std::fs::write(p, &e).unwrap())
            },
            true,
        ),
        (
            "another kernel's object",
            {
                let e = forged_entry(&key, 0, object_of(&foreign));
                Box::new(move |p: &Path| std::fs::write(p, &e).unwrap())
            },
            false,
        ),
        (
            "a FIFO",
            Box::new(|p: &Path| {
                std::fs::remove_file(p).unwrap();
                let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
                // SAFETY: a plain libc call with a valid NUL-terminated path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
            }),
            true,
        ),
    ];
    for (i, (what, plant, malformed)) in cases.iter().enumerate() {
        plant(&path);
        assert_eq!(
            cache::check_entry(dir.path(), &key).is_err(),
            *malformed,
            "{what}"
        );
        let before = cpu::stats().kernel(name);
        run_vadd(name, &format!("forged-{i}"), &opts(&dir));
        let after = cpu::stats().kernel(name);
        assert_eq!(after.disk_rejected - before.disk_rejected, 1, "{what}");
        assert_eq!(after.codegen - before.codegen, 1, "{what}");
        assert!(
            std::fs::metadata(&path).unwrap().is_file(),
            "{what}: not replaced"
        );
        cache::check_entry(dir.path(), &key).unwrap_or_else(|e| panic!("{what}: {e}"));
    }
}

/// Launches inside `cpu::defer_compiles` trace their kernel and run nothing;
/// `cpu::compile_deferred` compiles what they traced (three variants, side by side), and the
/// launches after it find every kernel compiled.
#[test]
fn deferred_compiles_are_compiled_before_their_launches() {
    let name = "pipeline_deferred";
    let cache = TempDir::new("deferred-cache");
    let options = LaunchOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Default::default()
    };
    let n = 1000;
    let a = Array1::from_iter((0..n).map(|i| i as f32));
    let mut out = Array1::<f32>::from_elem(n, -1.0);
    let variants = ["d1", "d2", "d3"];
    let (results, kernels) = cpu::defer_compiles(|| {
        variants
            .map(|variant| launch_vadd(&Device::cpu(), (name, variant), &options, &mut out, &a, &a))
    });
    assert!(results.iter().all(|r| r.is_ok()), "{results:?}");
    assert_eq!(kernels.len(), 3);
    assert!(out.iter().all(|x| *x == -1.0), "a deferred launch ran");
    assert_eq!(
        cpu::stats().kernel(name).compiles,
        0,
        "a deferred launch compiled"
    );
    cpu::compile_deferred(kernels);
    assert_eq!(cpu::stats().kernel(name).compiles, 3);
    for variant in variants {
        run_vadd(name, variant, &options);
    }
    assert_eq!(
        cpu::stats().kernel(name).compiles,
        3,
        "a launch compiled again"
    );
}

/// `cpu::defer_compiles` puts the thread back as it found it, also when its closure
/// panics: a thread left deferring would skip every later launch.
#[test]
fn a_panic_inside_defer_compiles_leaves_launches_running() {
    let r = std::panic::catch_unwind(|| cpu::defer_compiles(|| panic!("in the closure")));
    assert!(r.is_err());
    assert!(!cpu::deferring());
    let ((), traced) = cpu::defer_compiles(|| {
        assert!(cpu::deferring());
        let ((), inner) = cpu::defer_compiles(|| assert!(cpu::deferring()));
        assert!(inner.is_empty());
        assert!(cpu::deferring(), "the inner call ended the outer one");
    });
    assert!(traced.is_empty());
    assert!(!cpu::deferring());
    let cache = TempDir::new("after-defer-cache");
    let options = LaunchOptions {
        cache_dir: Some(cache.path().to_path_buf()),
        ..Default::default()
    };
    run_vadd("pipeline_after_defer_panic", "a", &options);
}
