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
