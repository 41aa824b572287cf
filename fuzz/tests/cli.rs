//! The command line: help, and typos refused instead of starting a campaign.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_tritium-fuzz"))
        .args(args)
        .output()
        .expect("tritium-fuzz runs");
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into(),
        String::from_utf8_lossy(&out.stderr).into(),
    )
}

#[test]
fn help_prints_the_usage_and_fuzzes_nothing() {
    for flag in ["--help", "-h"] {
        let (code, out, _) = run(&[flag]);
        assert_eq!(code, 0, "{flag}");
        assert!(out.starts_with("usage: tritium-fuzz"), "{flag}: {out}");
        assert!(!out.contains("programs ("), "{flag} fuzzed: {out}");
    }
}

#[test]
fn bad_options_are_errors_naming_them() {
    let cases: [(&[&str], &str); 4] = [
        (&["--minute", "5"], "unknown option `--minute`"),
        (&["--programs", "10", "extra"], "unknown option `extra`"),
        (&["--seed"], "--seed needs a value"),
        (
            &["--programs", "ten"],
            "--programs takes a whole number, not `ten`",
        ),
    ];
    for (args, want) in cases {
        let (code, out, err) = run(args);
        assert_eq!(code, 2, "{args:?}: {out}{err}");
        assert!(err.contains(want), "{args:?}: {err}");
        assert!(err.contains("usage: tritium-fuzz"), "{args:?}: {err}");
        assert!(out.is_empty(), "{args:?} printed {out}");
    }
}
