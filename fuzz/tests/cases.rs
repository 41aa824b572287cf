//! Pinned regressions: every `fuzz/cases/*.tir` runs on every target and must match its
//! pinned interpreter result.

use tritium_fuzz::{check, Target};

#[test]
fn pinned_cases_pass_on_every_target() {
    for (path, case) in crate::cases_in("cases") {
        assert!(
            !case.expect.is_empty(),
            "{}: no pinned result",
            path.display()
        );
        let report = check(&case, &Target::available());
        assert!(report.ok(), "{}: {report:?}", path.display());
    }
}
