//! The C ABI: MindSpore's function signatures, the shipped header, and the C++ shim's
//! trampolines (declared here, wrapped safely below).
//!
//! Every call into user code goes through a shim trampoline that catches C++ exceptions, so
//! nothing unwinds into Rust; every callback from C++ into Rust catches panics.

use std::ffi::{c_char, c_int, c_void, CStr};

use super::dtype::MindSporeDType;
use super::error::{AotError, AotResult};

/// The text of `custom_aot_extra.h`, ABI-compatible with MindSpore's.
pub const CUSTOM_AOT_EXTRA_H: &str = include_str!("../shim/include/custom_aot_extra.h");

/// The text of `custom_aot_typeid.h`: MindSpore's `TypeId` values for `FuncInferType`.
pub const CUSTOM_AOT_TYPEID_H: &str = include_str!("../shim/include/custom_aot_typeid.h");

/// `extern "C" int Func(int nparam, void **params, int *ndims, int64_t **shapes,
/// const char **dtypes, void *stream, void *extra)`.
pub type AotMainFn = unsafe extern "C" fn(
    nparam: c_int,
    params: *mut *mut c_void,
    ndims: *mut c_int,
    shapes: *mut *mut i64,
    dtypes: *mut *const c_char,
    stream: *mut c_void,
    extra: *mut c_void,
) -> c_int;

/// `extern "C" int FuncInit(int *ndims, int64_t **shapes, const char **dtypes, AotExtra *extra)`.
pub type AotInitFn = unsafe extern "C" fn(
    ndims: *mut c_int,
    shapes: *mut *mut i64,
    dtypes: *mut *const c_char,
    extra: *mut c_void,
) -> c_int;

/// One attribute value handed to the shim; pointers live for the delivery call only.
#[repr(C)]
pub(crate) struct AttrView {
    pub kind: i32,
    pub b: i32,
    pub i: i64,
    pub f: f32,
    pub str_: *const c_char,
    pub str_len: usize,
    pub data: *const c_void,
    pub len: usize,
    pub row_lens: *const usize,
    pub rows: usize,
}

pub(crate) type DeliverFn = unsafe extern "C" fn(sink: *mut c_void, view: *const AttrView);
pub(crate) type LookupFn = unsafe extern "C" fn(
    ctx: *const c_void,
    name: *const c_char,
    name_len: usize,
    kind: i32,
    sink: *mut c_void,
    deliver: DeliverFn,
    err: *mut c_char,
    err_cap: usize,
) -> i32;
pub(crate) type HasFn =
    unsafe extern "C" fn(ctx: *const c_void, name: *const c_char, name_len: usize) -> i32;
type ShapePushFn = unsafe extern "C" fn(sink: *mut c_void, dims: *const i64, ndim: usize);
type TypePushFn = unsafe extern "C" fn(sink: *mut c_void, type_id: i32);

extern "C" {
    pub(crate) fn tritium_aot_extra_new(
        ctx: *const c_void,
        lookup: LookupFn,
        has: HasFn,
    ) -> *mut c_void;
    pub(crate) fn tritium_aot_extra_free(extra: *mut c_void, err: *mut c_char, cap: usize) -> i32;
    pub(crate) fn tritium_aot_extra_workspace(extra: *mut c_void, data: *mut *const usize)
        -> usize;
    fn tritium_aot_call_main(
        f: *const c_void,
        nparam: c_int,
        params: *mut *mut c_void,
        ndims: *mut c_int,
        shapes: *mut *mut i64,
        dtypes: *mut *const c_char,
        stream: *mut c_void,
        extra: *mut c_void,
        ret: *mut i32,
        err: *mut c_char,
        cap: usize,
    ) -> i32;
    fn tritium_aot_call_init(
        f: *const c_void,
        ndims: *mut c_int,
        shapes: *mut *mut i64,
        dtypes: *mut *const c_char,
        extra: *mut c_void,
        ret: *mut i32,
        err: *mut c_char,
        cap: usize,
    ) -> i32;
    fn tritium_aot_call_infer_shape(
        f: *const c_void,
        tuple: i32,
        ndims: *mut c_int,
        shapes: *mut *mut i64,
        extra: *mut c_void,
        sink: *mut c_void,
        push: ShapePushFn,
        err: *mut c_char,
        cap: usize,
    ) -> i32;
    fn tritium_aot_call_infer_type(
        f: *const c_void,
        tuple: i32,
        ids: *const i32,
        n: usize,
        extra: *mut c_void,
        sink: *mut c_void,
        push: TypePushFn,
        err: *mut c_char,
        cap: usize,
    ) -> i32;
}

const ERR_CAP: usize = 4096;

/// A function pointer resolved from a user library. The library is kept alive by whoever
/// holds this (see `library::Library`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct RawFn(pub *const c_void);

// SAFETY: a code address; calling it is governed by the operator's locking.
unsafe impl Send for RawFn {}
// SAFETY: as above.
unsafe impl Sync for RawFn {}

fn status(function: &str, rc: i32, err: &[u8]) -> AotResult<()> {
    if rc == 0 {
        return Ok(());
    }
    let msg = CStr::from_bytes_until_nul(err)
        .map(|c| c.to_string_lossy().into_owned())
        .unwrap_or_default();
    Err(AotError::CppException {
        function: function.to_string(),
        what: msg,
    })
}

/// The C-side argument arrays for `ndims`/`shapes`/`dtypes`, owned for the duration of a call.
pub(crate) struct ShapeArgs {
    pub ndims: Vec<c_int>,
    dims: Vec<Vec<i64>>,
    pub shapes: Vec<*mut i64>,
    pub dtypes: Vec<*const c_char>,
}

impl ShapeArgs {
    /// Builds the arrays from shapes and (optional) dtypes; each shape gets its own copy so a
    /// kernel that scribbles on `shapes` cannot corrupt the runtime's state.
    pub fn new(shapes: &[Vec<i64>], dtypes: &[super::dtype::DType]) -> ShapeArgs {
        let mut dims: Vec<Vec<i64>> = shapes
            .iter()
            .map(|s| {
                let mut v = s.clone();
                v.push(0); // never an empty allocation: shapes[i] is a valid pointer
                v
            })
            .collect();
        let ndims = shapes.iter().map(|s| s.len() as c_int).collect();
        let ptrs = dims.iter_mut().map(|d| d.as_mut_ptr()).collect();
        ShapeArgs {
            ndims,
            dims,
            shapes: ptrs,
            dtypes: dtypes.iter().map(|d| d.ms_cname().as_ptr()).collect(),
        }
    }

    fn ptrs(&mut self) -> (*mut c_int, *mut *mut i64, *mut *const c_char) {
        let _ = &self.dims;
        (
            self.ndims.as_mut_ptr(),
            self.shapes.as_mut_ptr(),
            self.dtypes.as_mut_ptr(),
        )
    }
}

/// Calls `Func` through the shim; returns its return code.
pub(crate) fn call_main(
    f: RawFn,
    function: &str,
    params: &mut [*mut c_void],
    args: &mut ShapeArgs,
    stream: *mut c_void,
    extra: *mut c_void,
) -> AotResult<i32> {
    let mut err = vec![0u8; ERR_CAP];
    let mut ret = 0i32;
    let (nd, sh, dt) = args.ptrs();
    // SAFETY: all arrays are live and sized as the protocol says; the shim catches exceptions.
    let rc = unsafe {
        tritium_aot_call_main(
            f.0,
            params.len() as c_int,
            params.as_mut_ptr(),
            nd,
            sh,
            dt,
            stream,
            extra,
            &mut ret,
            err.as_mut_ptr().cast(),
            ERR_CAP - 1,
        )
    };
    status(function, rc, &err)?;
    Ok(ret)
}

/// Calls `FuncInit` through the shim; returns its return code.
pub(crate) fn call_init(
    f: RawFn,
    function: &str,
    args: &mut ShapeArgs,
    extra: *mut c_void,
) -> AotResult<i32> {
    let mut err = vec![0u8; ERR_CAP];
    let mut ret = 0i32;
    let (nd, sh, dt) = args.ptrs();
    // SAFETY: as in `call_main`.
    let rc = unsafe {
        tritium_aot_call_init(
            f.0,
            nd,
            sh,
            dt,
            extra,
            &mut ret,
            err.as_mut_ptr().cast(),
            ERR_CAP - 1,
        )
    };
    status(function, rc, &err)?;
    Ok(ret)
}

unsafe extern "C" fn push_shape(sink: *mut c_void, dims: *const i64, n: usize) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `sink` is the Vec passed by `call_infer_shape`; `dims` has `n` elements.
        let out = unsafe { &mut *(sink as *mut Vec<Vec<i64>>) };
        let s = if n == 0 {
            Vec::new()
        } else {
            unsafe { std::slice::from_raw_parts(dims, n) }.to_vec()
        };
        out.push(s);
    }));
}

unsafe extern "C" fn push_type(sink: *mut c_void, id: i32) {
    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `sink` is the Vec passed by `call_infer_type`.
        let out = unsafe { &mut *(sink as *mut Vec<i32>) };
        out.push(id);
    }));
}

/// Calls `FuncInferShape` (the 1-D or, with `tuple`, the 2-D form) on input shapes.
pub(crate) fn call_infer_shape(
    f: RawFn,
    function: &str,
    tuple: bool,
    args: &mut ShapeArgs,
    extra: *mut c_void,
) -> AotResult<Vec<Vec<i64>>> {
    let mut err = vec![0u8; ERR_CAP];
    let mut out: Vec<Vec<i64>> = Vec::new();
    let (nd, sh, _) = args.ptrs();
    // SAFETY: as in `call_main`; `out` outlives the call.
    let rc = unsafe {
        tritium_aot_call_infer_shape(
            f.0,
            tuple as i32,
            nd,
            sh,
            extra,
            (&mut out as *mut Vec<Vec<i64>>).cast(),
            push_shape,
            err.as_mut_ptr().cast(),
            ERR_CAP - 1,
        )
    };
    status(function, rc, &err)?;
    Ok(out)
}

/// Calls `FuncInferType` (the scalar or, with `tuple`, the vector form) on input `TypeId`s.
pub(crate) fn call_infer_type(
    f: RawFn,
    function: &str,
    tuple: bool,
    ids: &[i32],
    extra: *mut c_void,
) -> AotResult<Vec<i32>> {
    let mut err = vec![0u8; ERR_CAP];
    let mut out: Vec<i32> = Vec::new();
    // SAFETY: as in `call_main`; `out` outlives the call.
    let rc = unsafe {
        tritium_aot_call_infer_type(
            f.0,
            tuple as i32,
            ids.as_ptr(),
            ids.len(),
            extra,
            (&mut out as *mut Vec<i32>).cast(),
            push_type,
            err.as_mut_ptr().cast(),
            ERR_CAP - 1,
        )
    };
    status(function, rc, &err)?;
    Ok(out)
}
