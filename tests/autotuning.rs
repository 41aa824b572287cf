//! `tritium::autotune`: the fastest config per key, chosen once, kept on disk.

use ndarray::Array1;
use std::cell::Cell;
use std::time::Duration;
use tritium::autotune::{Autotuner, Config};
use tritium::prelude::*;
use tritium::testing::BenchOptions;
use tritium_kernels::vector_add::add;

fn tuner(dir: &std::path::Path) -> Autotuner {
    let configs = [64, 256, 1024]
        .into_iter()
        .map(|b| Config::new(&[("BLOCK", b)]))
        .collect();
    Autotuner::new("vector_add", configs)
        .cache_dir(dir.to_path_buf())
        .bench_options(BenchOptions {
            warmup: Duration::from_millis(1),
            rep: Duration::from_millis(2),
            flush_bytes: 0,
            ..Default::default()
        })
}

#[test]
fn autotune_times_each_config_once_per_key_and_keeps_the_choice_on_disk() {
    let dir = std::env::temp_dir().join(format!("tritium-autotune-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let device = Device::cpu();
    let n = 5000;
    let x = Array1::from_iter((0..n).map(|i| i as f32));
    let mut out = Array1::<f32>::zeros(n);
    let launches = Cell::new(0);
    let mut launch = |c: &Config| {
        launches.set(launches.get() + 1);
        let block = c.get("BLOCK") as usize;
        add::launch(
            &device,
            n.div_ceil(block),
            &mut out,
            &x,
            &x,
            n as i32,
            block,
        )
    };
    let t = tuner(&dir);
    t.run(&device, &[n as i64], &mut launch).unwrap();
    let chosen = t.chosen(&device, &[n as i64]).expect("a choice");
    assert!([64, 256, 1024].contains(&chosen.get("BLOCK")), "{chosen}");
    // Three configs timed (five estimate runs, warm-up and repetitions each), then the run.
    assert!(launches.get() > 3 * 6, "{} launches", launches.get());
    launches.set(0);
    t.run(&device, &[n as i64], &mut launch).unwrap();
    assert_eq!(launches.get(), 1, "a known key launches once");
    // A new tuner (a new process) finds the choice on disk.
    let again = tuner(&dir);
    again.run(&device, &[n as i64], &mut launch).unwrap();
    assert_eq!(launches.get(), 2, "the disk choice is used without timing");
    assert_eq!(again.chosen(&device, &[n as i64]), Some(chosen));
    assert_eq!(out, &x * 2.0);
    let _ = std::fs::remove_dir_all(&dir);
}

/// On the CPU, every config is traced first and compiled side by side on the machine's
/// cores (`cpu::defer_compiles`, `cpu::compile_deferred`), then timed.
#[test]
fn autotune_compiles_every_config_before_timing_any() {
    let dir = std::env::temp_dir().join(format!("tritium-autotune-pre-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let device = Device::cpu();
    let n = 3000;
    let x = Array1::from_iter((0..n).map(|i| i as f32));
    let mut out = Array1::<f32>::zeros(n);
    let calls = std::cell::RefCell::new(Vec::new());
    let mut launch = |c: &Config| {
        let block = c.get("BLOCK") as usize;
        let deferred = tritium::backend::cpu::deferring();
        calls.borrow_mut().push((block, deferred));
        add::launch(
            &device,
            n.div_ceil(block),
            &mut out,
            &x,
            &x,
            n as i32,
            block,
        )
    };
    tuner(&dir).run(&device, &[n as i64], &mut launch).unwrap();
    let calls = calls.into_inner();
    assert_eq!(
        calls[..3],
        [(64, true), (256, true), (1024, true)],
        "{calls:?}"
    );
    assert!(
        calls[3..].iter().all(|(_, deferred)| !deferred),
        "{calls:?}"
    );
    assert_eq!(out, &x * 2.0);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn failing_configs_are_skipped_and_pruning_applies() {
    let dir = std::env::temp_dir().join(format!("tritium-autotune-skip-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let device = Device::cpu();
    let n = 300;
    let x = Array1::from_iter((0..n).map(|i| i as f32));
    let mut out = Array1::<f32>::zeros(n);
    // BLOCK = 1024 "fails" (as a config out of resources would); 64 is pruned away.
    let mut launch = |c: &Config| {
        let block = c.get("BLOCK") as usize;
        if block == 1024 {
            return Err(tritium::Error::Launch {
                kernel: "add".into(),
                message: "too many resources".into(),
            });
        }
        add::launch(
            &device,
            n.div_ceil(block),
            &mut out,
            &x,
            &x,
            n as i32,
            block,
        )
    };
    let t = tuner(&dir).prune_configs_by(Box::new(|configs, _key| {
        configs
            .iter()
            .filter(|c| c.get("BLOCK") != 64)
            .cloned()
            .collect()
    }));
    t.run(&device, &[1], &mut launch).unwrap();
    assert_eq!(t.chosen(&device, &[1]).unwrap().get("BLOCK"), 256);
    let all_fail = tuner(&dir).prune_configs_by(Box::new(|configs, _| {
        configs
            .iter()
            .filter(|c| c.get("BLOCK") == 1024)
            .cloned()
            .collect()
    }));
    let e = all_fail.run(&device, &[2], &mut launch).unwrap_err();
    assert!(e.to_string().contains("too many resources"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Tutorial 02's softmax with its warps autotuned (on the emulator here; on CUDA devices
/// the same), equal to the untuned kernel; on the CPU it launches directly.
#[test]
fn softmax_warps_are_autotuned_where_warps_exist() {
    use tritium_kernels::softmax::{softmax_rows, softmax_rows_autotuned};
    let x = ndarray::Array2::from_shape_fn((3, 40), |(i, j)| ((i * 7 + j) % 11) as f32 / 3.0);
    let want = softmax_rows(&Device::cpu(), x.view()).unwrap();
    for device in [Device::cpu(), Device::cuda_emulator()] {
        for _ in 0..2 {
            let got = softmax_rows_autotuned(&device, x.view()).unwrap();
            for (a, b) in got.iter().zip(&want) {
                assert!((a - b).abs() <= 1e-6, "{device:?}: {got} vs {want}");
            }
        }
    }
}

/// `acc += x; x += 1` in place: tuning runs it once per timed run, so only
/// `reset_to_zero`/`restore_value` make the launch's result that of one run. `SCALE` comes
/// from a heuristic.
#[kernel]
#[autotune(
    configs = [config(BLOCK = 64), config(BLOCK = 256, num_warps = 2), config(BLOCK = 1024, num_stages = 2)],
    key = [n],
    reset_to_zero = [acc],
    restore_value = [x],
)]
#[heuristics(SCALE = if n > 100 { 2.0 } else { 1.0 })]
fn accumulate_in_place(
    acc: Ptr<f32>,
    x: Ptr<f32>,
    n: i32,
    #[constexpr] BLOCK: usize,
    #[constexpr] SCALE: f32,
) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    let mask = offs < n;
    let v = load(x + offs, mask = mask);
    store(
        acc + offs,
        load(acc + offs, mask = mask) + v * SCALE,
        mask = mask,
    );
    store(x + offs, v + 1.0, mask = mask);
}

/// The attribute above `#[kernel]`, as Python decorators are written, and a pruning rule.
#[tritium::autotune(configs = [config(BLOCK = 32), config(BLOCK = 128)], key = [], prune_configs_by = keep_small)]
#[tritium::kernel]
fn double(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    store(
        out + offs,
        load(x + offs, mask = offs < n) * 2.0,
        mask = offs < n,
    );
}

fn keep_small(configs: &[Config], _key: &[i64]) -> Vec<Config> {
    configs
        .iter()
        .filter(|c| c.get("BLOCK") == 32)
        .cloned()
        .collect()
}

#[test]
fn autotune_attribute_resets_and_restores_in_place_buffers() {
    let device = Device::cpu();
    for n in [50usize, 300] {
        accumulate_in_place::autotuner().forget(&device, &[n as i64]);
        let x0 = Array1::from_iter((0..n).map(|i| i as f32));
        let mut x = x0.clone();
        let mut acc = Array1::<f32>::from_elem(n, 7.0);
        let metas = std::cell::RefCell::new(Vec::new());
        accumulate_in_place::launch(
            &device,
            |m: &accumulate_in_place::Meta| {
                metas.borrow_mut().push(m.clone());
                n.div_ceil(m.BLOCK)
            },
            &mut acc,
            &mut x,
            n as i32,
        )
        .unwrap();
        let scale = if n > 100 { 2.0 } else { 1.0 };
        assert_eq!(acc, &x0 * scale, "n = {n}: acc zeroed, then one run");
        assert_eq!(x, &x0 + 1.0, "n = {n}: x restored, then one run");
        let chosen = accumulate_in_place::autotuner()
            .chosen(&device, &[n as i64])
            .expect("tuned");
        let metas = metas.into_inner();
        assert!(metas.len() > 3, "every config timed: {metas:?}");
        let last = metas.last().unwrap();
        assert_eq!(last.BLOCK as i64, chosen.get("BLOCK"));
        assert_eq!(last.SCALE, scale);
        // A known key launches once, with what the caller passed.
        let mut acc = Array1::<f32>::from_elem(n, 7.0);
        accumulate_in_place::launch(
            &device,
            |m: &accumulate_in_place::Meta| n.div_ceil(m.BLOCK),
            &mut acc,
            &mut x,
            n as i32,
        )
        .unwrap();
        assert_eq!(acc, 7.0 + &x0 * scale + scale);
    }
}

#[test]
fn autotune_attribute_above_kernel_prunes_and_launch_explicit_chooses_nothing() {
    let device = Device::cpu();
    let n = 100;
    let x = Array1::from_iter((0..n).map(|i| i as f32));
    let mut out = Array1::<f32>::zeros(n);
    double::autotuner().forget(&device, &[]);
    double::launch(
        &device,
        |m: &double::Meta| n.div_ceil(m.BLOCK),
        &mut out,
        &x,
        n as i32,
    )
    .unwrap();
    assert_eq!(out, &x * 2.0);
    assert_eq!(
        double::autotuner()
            .chosen(&device, &[])
            .unwrap()
            .get("BLOCK"),
        32
    );
    let mut out = Array1::<f32>::zeros(n);
    let options = tritium::LaunchOptions::default();
    double::launch_explicit(
        &device,
        n.div_ceil(16),
        &options,
        &mut out,
        &x,
        n as i32,
        16,
    )
    .unwrap();
    assert_eq!(out, &x * 2.0);
}

/// Configs differing only in warps.
#[kernel]
#[autotune(configs = [config(num_warps = 1), config(num_warps = 2)], key = [n])]
fn copy_rows(out: Ptr<f32>, x: Ptr<f32>, n: i32) {
    let offs = arange(0, 32);
    store(out + offs, load(x + offs, mask = offs < n), mask = offs < n);
}

/// Where warps mean nothing (the CPU, the interpreter) such configs are one and nothing is
/// timed; on the emulator both are.
#[test]
fn configs_differing_only_in_warps_are_timed_only_where_warps_exist() {
    let x = Array1::from_iter((0..32).map(|i| i as f32));
    for (device, timed) in [(Device::cpu(), false), (Device::cuda_emulator(), true)] {
        copy_rows::autotuner().forget(&device, &[32]);
        let launches = Cell::new(0);
        let mut out = Array1::<f32>::zeros(32);
        let grid = |_: &copy_rows::Meta| {
            launches.set(launches.get() + 1);
            1
        };
        copy_rows::launch(&device, grid, &mut out, &x, 32).unwrap();
        assert_eq!(out, x);
        assert_eq!(
            launches.get() > 1,
            timed,
            "{device:?}: {} launches",
            launches.get()
        );
    }
}

/// A config's warps and stages become its launch's options (CUDA pipelines a `dot` loop in
/// `num_stages` stages: `loop_options::num_stages_sets_the_pipeline_depth`).
#[test]
fn a_config_sets_warps_and_stages() {
    let config = Config::new(&[("BLOCK", 64)]).num_warps(8).num_stages(4);
    let options = config.launch_options();
    assert_eq!((options.num_warps, options.num_stages), (8, 4));
    assert_eq!(Config::new(&[]).launch_options().num_stages, 3);
}

/// Liger-Kernel builds its configs with a comprehension; so can `#[autotune]`.
#[kernel]
#[autotune(
    configs = [config(BLOCK = b, num_warps = w) for b in [32, 64, 128] for w in [1, 2] if b * w <= 128],
    key = [n],
)]
fn scale_comprehension(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    store(
        out + offs,
        load(x + offs, mask = offs < n) * 3.0,
        mask = offs < n,
    );
}

/// Configs from any expression: the kernel's constexprs that no heuristic sets are tuned.
#[kernel]
#[autotune(configs = block_configs(&[16, 32]), key = [n])]
#[heuristics(SHIFT = 1.0)]
fn scale_expression(
    out: Ptr<f32>,
    x: Ptr<f32>,
    n: i32,
    #[constexpr] BLOCK: usize,
    #[constexpr] SHIFT: f32,
) {
    let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
    store(
        out + offs,
        load(x + offs, mask = offs < n) + SHIFT,
        mask = offs < n,
    );
}

fn block_configs(blocks: &[i64]) -> Vec<Config> {
    blocks
        .iter()
        .map(|&b| Config::new(&[("BLOCK", b)]))
        .collect()
}

#[test]
fn configs_from_a_comprehension_or_an_expression() {
    let listed = |tuner: &Autotuner| -> Vec<String> {
        tuner.configs().iter().map(|c| c.to_string()).collect()
    };
    assert_eq!(
        listed(scale_comprehension::autotuner()),
        [
            "BLOCK=32, num_warps=1, num_stages=3",
            "BLOCK=32, num_warps=2, num_stages=3",
            "BLOCK=64, num_warps=1, num_stages=3",
            "BLOCK=64, num_warps=2, num_stages=3",
            "BLOCK=128, num_warps=1, num_stages=3",
        ]
    );
    assert_eq!(listed(scale_expression::autotuner()).len(), 2);
    let device = Device::cpu();
    let n = 200usize;
    let x = Array1::from_iter((0..n).map(|i| i as f32));
    let mut out = Array1::<f32>::zeros(n);
    let grid = |m: &scale_comprehension::Meta| n.div_ceil(m.BLOCK);
    scale_comprehension::launch(&device, grid, &mut out, &x, n as i32).unwrap();
    assert_eq!(out, &x * 3.0);
    let grid = |m: &scale_expression::Meta| n.div_ceil(m.BLOCK);
    scale_expression::launch(&device, grid, &mut out, &x, n as i32).unwrap();
    assert_eq!(out, &x + 1.0);
}
