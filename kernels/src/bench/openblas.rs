//! OpenBLAS, the CPU matmul a user would compare with: Debian's `libopenblas-dev`
//! (`scripts/dev` installs it), loaded at run time so that nothing else needs it.

use ndarray::{Array2, ArrayView2};
use std::os::raw::c_int;

/// `cblas_sgemm`'s layout and transpose codes (cblas.h).
const ROW_MAJOR: c_int = 101;
const NO_TRANS: c_int = 111;
const TRANS: c_int = 112;

type Sgemm = unsafe extern "C" fn(
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    f32,
    *const f32,
    c_int,
    *const f32,
    c_int,
    f32,
    *mut f32,
    c_int,
);
type SetThreads = unsafe extern "C" fn(c_int);
type CoreName = unsafe extern "C" fn() -> *const std::os::raw::c_char;

/// A loaded OpenBLAS.
pub struct OpenBlas {
    sgemm: Sgemm,
    set_threads: SetThreads,
    core: String,
    _lib: libloading::Library,
}

impl OpenBlas {
    /// Makes OpenBLAS's idle threads sleep at once after a call: by default they spin on
    /// `sched_yield` for about 2^28 cycles, which on a small machine takes cores from
    /// whatever runs next (`sched_yield` was 20% of a profile of matmul timed alternately
    /// with `cblas_sgemm` on 2 cores). OpenBLAS reads `OPENBLAS_THREAD_TIMEOUT` when it
    /// is loaded; a value the user set is kept.
    ///
    /// # Safety
    ///
    /// Sets an environment variable: call it while the process has one thread (first in
    /// `main`), before [`load`](Self::load).
    pub unsafe fn sleep_idle_threads() {
        if std::env::var_os("OPENBLAS_THREAD_TIMEOUT").is_none() {
            std::env::set_var("OPENBLAS_THREAD_TIMEOUT", "4");
        }
    }

    /// Loads `libopenblas.so.0` (or `libopenblas.so`); the error says what to install.
    pub fn load() -> Result<OpenBlas, String> {
        let mut why = String::new();
        for name in ["libopenblas.so.0", "libopenblas.so"] {
            // SAFETY: loading OpenBLAS runs its initializers, which only set up its
            // thread pool.
            match unsafe { libloading::Library::new(name) } {
                Ok(lib) => {
                    // SAFETY: the symbols have these C signatures (cblas.h, openblas_config.h).
                    let (sgemm, set_threads) = unsafe {
                        let s = lib
                            .get::<Sgemm>(b"cblas_sgemm\0")
                            .map_err(|e| e.to_string())?;
                        let t = lib
                            .get::<SetThreads>(b"openblas_set_num_threads\0")
                            .map_err(|e| e.to_string())?;
                        (*s, *t)
                    };
                    // SAFETY: `openblas_get_corename` returns a static C string.
                    let core = unsafe {
                        lib.get::<CoreName>(b"openblas_get_corename\0")
                            .ok()
                            .map(|f| (*f)())
                            .filter(|p| !p.is_null())
                            .map(|p| std::ffi::CStr::from_ptr(p).to_string_lossy().into_owned())
                    };
                    return Ok(OpenBlas {
                        sgemm,
                        set_threads,
                        core: core.unwrap_or_else(|| "unknown".into()),
                        _lib: lib,
                    });
                }
                Err(e) => why = e.to_string(),
            }
        }
        Err(format!(
            "OpenBLAS is not installed ({why}); `apt-get install libopenblas-dev` or `scripts/dev bench`"
        ))
    }

    /// The kernel family OpenBLAS picked for this CPU (`openblas_get_corename`, as
    /// "Haswell" or "Cooperlake"), with the environment variable that forces one when it
    /// is set: Debian's 0.3.21 runs its AVX-512 kernels at about twice the speed of its
    /// AVX2 ones on a Zen 5 core, so the baseline is only fair with the host's own.
    pub fn core(&self) -> String {
        match std::env::var("OPENBLAS_CORETYPE") {
            Ok(forced) => format!("{} (forced by OPENBLAS_CORETYPE={forced})", self.core),
            Err(_) => self.core.clone(),
        }
    }

    /// Runs OpenBLAS's calls on `threads` threads.
    pub fn set_threads(&self, threads: usize) {
        // SAFETY: plain C call.
        unsafe { (self.set_threads)(threads as c_int) }
    }

    /// `c = a @ b` for f32 matrices: `a` row-major, `b` row-major or the transpose of a
    /// row-major matrix (as `k.t()`); anything else is copied to row-major first.
    pub fn sgemm(&self, a: ArrayView2<f32>, b: ArrayView2<f32>, c: &mut Array2<f32>) {
        let ((m, k), (k2, n)) = (a.dim(), b.dim());
        assert!(
            k == k2 && c.dim() == (m, n),
            "sgemm: {m}x{k} @ {k2}x{n} into {:?}",
            c.dim()
        );
        let a = a.as_standard_layout();
        let transposed = !b.is_standard_layout() && b.t().is_standard_layout();
        let bt = b.t();
        let b_rows = if transposed {
            bt.as_standard_layout()
        } else {
            b.as_standard_layout()
        };
        assert!(c.is_standard_layout(), "sgemm: c must be row-major");
        let dim = |x: usize| c_int::try_from(x.max(1)).expect("sgemm: a dimension above i32");
        let (trans_b, ldb) = if transposed {
            (TRANS, k)
        } else {
            (NO_TRANS, n)
        };
        // SAFETY: the three buffers are row-major with the leading dimensions passed.
        unsafe {
            (self.sgemm)(
                ROW_MAJOR,
                NO_TRANS,
                trans_b,
                dim(m),
                dim(n),
                dim(k),
                1.0,
                a.as_ptr(),
                dim(k),
                b_rows.as_ptr(),
                dim(ldb),
                0.0,
                c.as_mut_ptr(),
                dim(n),
            )
        }
    }
}
