//! Behaviour driven by environment variables, and compiles racing across processes. The test
//! harness runs tests as threads of one process, so these run in child processes (this test
//! binary itself, filtered to one `#[ignore]`d child test) with their own environment.
use std::process::{Command, Stdio};

use ndarray::array;
use tritium_aot::{AotError, AotOp, AotOptions, CompileOptions, DType};

use super::common::{data, func, prebuilt, scratch};

const CHILD: &str = "TRITIUM_AOT_TEST_CHILD";

fn child(test: &str, envs: &[(&str, String)]) -> Command {
    let mut cmd = Command::new(std::env::current_exe().unwrap());
    cmd.args([
        test,
        "--exact",
        "--ignored",
        "--nocapture",
        "--test-threads=1",
    ])
    .env(CHILD, "1")
    .env_remove("TRITIUM_BOUNDS_CHECK")
    .env_remove("TRITIUM_AOT_WHITELIST");
    for (k, v) in envs {
        cmd.env(k, v);
    }
    cmd
}

fn run_child(test: &str, envs: &[(&str, String)]) -> String {
    let out = child(test, envs).output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "child {test} failed:\n{text}");
    assert!(
        text.contains("1 passed"),
        "child {test} did not run:\n{text}"
    );
    text
}

fn in_child() -> bool {
    std::env::var_os(CHILD).is_some()
}

fn env_options() -> AotOptions {
    // Everything from the environment except the cache, which stays in the test dir.
    AotOptions {
        compile: CompileOptions {
            cache_dir: Some(super::common::cache()),
            ..CompileOptions::default()
        },
        ..AotOptions::default()
    }
}

#[test]
#[ignore = "run by env_bounds_check in a child process"]
fn child_bounds_check() {
    if !in_child() {
        return;
    }
    let op = AotOp::builder(func("faults.cc", "OutputOverrun"))
        .options(env_options())
        .infer_shape(|x| x[0].clone())
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    assert!(
        op.is_checked(),
        "TRITIUM_BOUNDS_CHECK=1 turns checked mode on"
    );
    let err = op.call((&array![1.0f32, 2.0],)).unwrap_err();
    assert!(matches!(err, AotError::GuardOverwritten { .. }), "{err}");
}

#[test]
fn env_bounds_check() {
    run_child(
        "env::child_bounds_check",
        &[("TRITIUM_BOUNDS_CHECK", "1".to_string())],
    );
}

#[test]
#[ignore = "run by env_whitelist in a child process"]
fn child_whitelist() {
    if !in_child() {
        return;
    }
    let root = scratch("env-whitelist");
    let build = |dir: &str| {
        AotOp::builder(format!(
            "{}:CustomAdd",
            root.join(dir).join("libadd.so").display()
        ))
        .options(env_options())
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
    };
    build("trusted").unwrap();
    let err = build("trusted-not").unwrap_err();
    assert!(matches!(err, AotError::NotWhitelisted { .. }), "{err}");
    // Sources still compile into (and load from) the always-allowed cache.
    AotOp::builder(func("add.cc", "CustomAdd"))
        .options(env_options())
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
}

#[test]
fn env_whitelist() {
    let root = scratch("env-whitelist");
    prebuilt("add.cc", &root.join("trusted"));
    prebuilt("add.cc", &root.join("trusted-not"));
    let list = format!("/nonexistent/dir:{}", root.join("trusted").display());
    run_child("env::child_whitelist", &[("TRITIUM_AOT_WHITELIST", list)]);
}

#[test]
#[ignore = "run by env_cache_dir in a child process"]
fn child_cache_dir() {
    if !in_child() {
        return;
    }
    let op = AotOp::builder(func("add.cc", "CustomAdd"))
        .out_shape([1])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let root = std::env::var("TRITIUM_CACHE_DIR").unwrap();
    assert!(
        op.library_path()
            .starts_with(std::path::Path::new(&root).join("aot")),
        "{}",
        op.library_path().display()
    );
}

#[test]
fn env_cache_dir() {
    let root = scratch("env-cache-root");
    run_child(
        "env::child_cache_dir",
        &[("TRITIUM_CACHE_DIR", root.display().to_string())],
    );
}

#[test]
#[ignore = "run by processes_compile_one_source_at_once in child processes"]
fn child_compile() {
    if !in_child() {
        return;
    }
    let src = std::env::var("TRITIUM_AOT_TEST_SOURCE").unwrap();
    let op = AotOp::builder(format!("{src}:CustomAdd"))
        .options(env_options())
        .out_shape([2])
        .out_dtype(DType::F32)
        .build()
        .unwrap();
    let x = array![1.0f32, 2.0];
    assert_eq!(
        op.call1((&x, &x)).unwrap().to_vec::<f32>().unwrap(),
        [2.0, 4.0]
    );
    println!("LIB={}", op.library_path().display());
}

#[test]
fn processes_compile_one_source_at_once() {
    let dir = scratch("process-race");
    let src = dir.join("add_race.cc");
    let stamp = format!(
        "// {:?} {}\n",
        std::time::SystemTime::now(),
        std::process::id()
    );
    std::fs::write(
        &src,
        stamp + &std::fs::read_to_string(data("add.cc")).unwrap(),
    )
    .unwrap();
    let children: Vec<_> = (0..3)
        .map(|_| {
            child(
                "env::child_compile",
                &[("TRITIUM_AOT_TEST_SOURCE", src.display().to_string())],
            )
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
        })
        .collect();
    let libs: Vec<String> = children
        .into_iter()
        .map(|c| {
            let out = c.wait_with_output().unwrap();
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(
                out.status.success(),
                "{text}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            text.lines()
                .find_map(|l| l.split("LIB=").nth(1).map(|p| p.trim().to_string()))
                .expect("child printed its library")
        })
        .collect();
    assert!(libs.windows(2).all(|w| w[0] == w[1]), "{libs:?}");
}
