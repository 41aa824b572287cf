//! Pinned regressions: every `fuzz/cases/*.tir` runs on every target and must match its
//! pinned interpreter result.

use tritium_fuzz::{check, Case, Target};

#[test]
fn pinned_cases_pass_on_every_target() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("cases");
    let mut n = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("tir") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let case = Case::from_text(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        assert!(
            !case.expect.is_empty(),
            "{}: no pinned result",
            path.display()
        );
        let report = check(&case, &Target::available());
        assert!(report.ok(), "{}: {report:?}", path.display());
        n += 1;
    }
    assert!(n > 0, "no cases in {}", dir.display());
}
