//! LLVM's process-wide options, set once before the first compile for any target.
//!
//! The SLP vectorizer is off. LLVM 19.1's SLP vectorizer builds wrong shuffle masks for
//! some straight-line code (LLVM issues #117170, #125259, #135113, fixed after 19.1):
//! with the znver4 cost model it gave `umulhi` of an 8 × 8 outer product wrong lanes
//! (`fuzz/cases/cpu_slp_shuffle_miscompile.tir`). The code generators emit loops for the
//! loop vectorizer and explicit vectors where it matters (`dot`), so SLP only ever
//! re-vectorized fully unrolled small tiles. The pipeline's own switch
//! (`PipelineTuningOptions::SLPVectorization`, set through the C API) did not keep
//! `default<O3>` from running the pass here, so the pass's `-vectorize-slp` flag is used.
//!
//! Without SLP, loops of up to 16 iterations are the only ones LLVM unrolls fully before the
//! loop vectorizer runs (`-unroll-full-max-count=16`): the CPU code generator's chunk loops
//! (32 lanes) used to be unrolled into straight-line code that only SLP re-vectorized
//! (vector add ran at 0.62-0.73 of the bandwidth loop without it, 0.90-0.93 with this flag,
//! SLP on: 0.88-0.90; `scripts/dev bench`, same machine, interleaved runs).

use std::ffi::CString;
use std::sync::Once;

static SET: Once = Once::new();

/// The flags given to LLVM's command-line parser, once per process (see the module docs).
const FLAGS: &[&str] = &[
    "tritium",
    "-vectorize-slp=false",
    "-unroll-full-max-count=16",
];

/// Applies [`FLAGS`] (idempotent; every target's initialization calls it).
pub(crate) fn apply() {
    SET.call_once(|| {
        let args: Vec<CString> = FLAGS
            .iter()
            .map(|f| CString::new(*f).expect("no NUL in a flag"))
            .collect();
        let ptrs: Vec<*const std::ffi::c_char> = args.iter().map(|a| a.as_ptr()).collect();
        // SAFETY: `ptrs` holds `ptrs.len()` NUL-terminated strings that outlive the call;
        // the options parsed are LLVM's own (registered when LLVM is loaded).
        unsafe {
            llvm_sys::support::LLVMParseCommandLineOptions(
                ptrs.len() as i32,
                ptrs.as_ptr(),
                std::ptr::null(),
            )
        };
    });
}
