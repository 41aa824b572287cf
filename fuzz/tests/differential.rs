//! The fixed budget of `cargo test`: random programs on every target against the
//! interpreter (`scripts/dev fuzz` runs any number). `TRITIUM_FUZZ_PROGRAMS` changes the
//! budget of each half.

use tritium_fuzz::{check, generate, GenConfig, Target};

fn budget() -> u64 {
    std::env::var("TRITIUM_FUZZ_PROGRAMS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100)
}

/// Checks seeds `first, first + 2, …` (two tests share the budget, one per core).
fn run_half(first: u64) {
    let config = GenConfig::default();
    let mut failures = Vec::new();
    for k in 0..budget() {
        let seed = first + 2 * k;
        let case = generate(seed, &config);
        let report = check(&case, &Target::available());
        if !report.ok() {
            failures.push(format!(
                "seed {seed}: {:?} {:?} (replay: scripts/dev fuzz --print {seed} > case.tir; scripts/dev fuzz --replay case.tir)",
                report.invalid, report.mismatches
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn random_programs_agree_with_the_interpreter_even_seeds() {
    run_half(0);
}

#[test]
fn random_programs_agree_with_the_interpreter_odd_seeds() {
    run_half(1);
}

/// The GPU target's launch path (a kernel key per program, host buffers staged through
/// `launch`) run on the emulator gives what the emulator target gives: on a machine with
/// a GPU the same path runs on CUDA device 0.
#[test]
fn the_gpu_launch_path_agrees_with_the_emulator() {
    use tritium_backend::Device;
    use tritium_fuzz::exec::{run, run_gpu_path_on};
    let config = GenConfig::default();
    for seed in 0..16 {
        let case = generate(seed, &config);
        let direct = run(&case, Target::Emulator);
        let launched = run_gpu_path_on(&case, &Device::CudaEmulator);
        let n = case.args.len();
        match (direct, launched) {
            (Ok(a), Ok(b)) => {
                let differs = (0..n).find(|&p| a[p] != b[p]);
                assert_eq!(differs, None, "seed {seed}: parameter differs");
            }
            (Err(_), Err(_)) => {}
            (a, b) => panic!(
                "seed {seed}: emulator {:?}, the GPU path {:?}",
                a.err(),
                b.err()
            ),
        }
    }
}
