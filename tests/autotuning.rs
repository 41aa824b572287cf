//! `tritium::autotune`: the fastest config per key, chosen once, kept on disk.

use ndarray::Array1;
use std::cell::Cell;
use std::time::Duration;
use tritium::autotune::{Autotuner, Config};
use tritium::testing::BenchOptions;
use tritium::Device;
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
