//! The fuzzer's one integration-test binary (LLVM links once).

mod cases;
mod cli;
mod differential;
mod generator;
mod mutate;
mod out_of_bounds;
mod pool;
mod shrinking;

/// Every `*.tir` case in `fuzz/<dir>` (relative to the crate), parsed, with its path.
fn cases_in(dir: &str) -> Vec<(std::path::PathBuf, tritium_fuzz::Case)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join(dir);
    let mut out = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().and_then(|e| e.to_str()) != Some("tir") {
            continue;
        }
        let text = std::fs::read_to_string(&path).unwrap();
        let case = tritium_fuzz::Case::from_text(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
        out.push((path, case));
    }
    assert!(!out.is_empty(), "no cases in {}", dir.display());
    out
}
