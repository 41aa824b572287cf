//! Helpers shared by the CPU test modules.

use std::path::{Path, PathBuf};

/// A directory under the system temp dir, removed on drop.
pub struct TempDir(PathBuf);

impl TempDir {
    pub fn new(what: &str) -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let p = std::env::temp_dir().join(format!(
            "tritium-test-{what}-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&p).unwrap();
        TempDir(p)
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Triton's vector add, `block` lanes per program, traced under `name` (the IR, hence the
/// cache key, depends on it).
pub fn vadd(
    name: &str,
    spec: &tritium_dsl::trace::Specialization,
    block: usize,
) -> tritium_dsl::Result<tritium_dsl::ir::Function> {
    use tritium_dsl::ir::CmpPred;
    use tritium_dsl::trace::lang::*;
    use tritium_dsl::trace::{ptr_param, scalar_param, Tracer};
    use tritium_dsl::DType;
    let t = Tracer::begin(name)?;
    let out = ptr_param("out", DType::F32);
    let a = ptr_param("a", DType::F32);
    let b = ptr_param("b", DType::F32);
    let n = scalar_param("n", DType::I32, 3, spec);
    let offs = program_id(0) * block + arange(0, block);
    let mask = compare(offs, CmpPred::Lt, n);
    let x = load(a + offs, mask, NoArg);
    let y = load(b + offs, mask, NoArg);
    store(out + offs, x + y, mask);
    t.finish()
}
