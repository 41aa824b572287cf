//! The runtime's `AotExtra` object: a C++ `TritiumExtra` (see `shim/shim.cc`) whose
//! attribute getters call back into [`Attrs`] here.

use std::ffi::{c_char, c_void, CStr};
use std::ptr::NonNull;

use super::abi::{self, AttrView, DeliverFn};
use super::attrs::{AttrKind, AttrValue, Attrs};
use super::error::{AotError, AotResult};

/// Owns one C++ `AotExtra` and the attributes it reads. Dropping it destroys the kernel data
/// the user stored with `SetKernelData` (MindSpore's `DestructKernelData`), then the object.
pub(crate) struct Extra {
    ptr: NonNull<c_void>,
    // Boxed so the address handed to C++ stays put; read-only after construction.
    _attrs: Box<Attrs>,
    label: String,
}

// SAFETY: the C++ object is only used behind the operator's instance lock, and `attrs` is
// immutable.
unsafe impl Send for Extra {}

impl Extra {
    /// A fresh `AotExtra` reading `attrs`; `label` names the operator in diagnostics.
    pub fn new(attrs: Attrs, label: &str) -> AotResult<Extra> {
        let attrs = Box::new(attrs);
        let ctx: *const Attrs = &*attrs;
        // SAFETY: the callbacks match the shim's declarations; `ctx` outlives the object.
        let raw = unsafe { abi::tritium_aot_extra_new(ctx.cast(), attr_lookup, attr_has) };
        let ptr = NonNull::new(raw).ok_or_else(|| AotError::Definition {
            symbol: label.to_string(),
            message: "out of memory creating AotExtra".to_string(),
        })?;
        Ok(Extra {
            ptr,
            _attrs: attrs,
            label: label.to_string(),
        })
    }

    /// The `AotExtra*` to pass to user functions.
    pub fn as_ptr(&self) -> *mut c_void {
        self.ptr.as_ptr()
    }

    /// The workspace sizes set with `SetWorkSpace`.
    pub fn workspace(&self) -> Vec<usize> {
        let mut data: *const usize = std::ptr::null();
        // SAFETY: the object is live; the returned pointer is valid until the next mutation.
        let n = unsafe { abi::tritium_aot_extra_workspace(self.as_ptr(), &mut data) };
        if n == 0 || data.is_null() {
            return Vec::new();
        }
        // SAFETY: `data` points at `n` elements of the C++ vector.
        unsafe { std::slice::from_raw_parts(data, n) }.to_vec()
    }
}

impl Drop for Extra {
    fn drop(&mut self) {
        let mut err = [0u8; 1024];
        // SAFETY: the object was created by `tritium_aot_extra_new` and is freed once.
        let rc = unsafe {
            abi::tritium_aot_extra_free(self.as_ptr(), err.as_mut_ptr().cast(), err.len() - 1)
        };
        if rc != 0 {
            let what = CStr::from_bytes_until_nul(&err)
                .map(|c| c.to_string_lossy().into_owned())
                .unwrap_or_default();
            // Drop cannot return an error; this is the only diagnostic left.
            eprintln!(
                "tritium: destroying the kernel data of `{}` threw a C++ exception: {what}",
                self.label
            );
        }
    }
}

fn write_err(err: *mut c_char, cap: usize, msg: &str) {
    if err.is_null() || cap == 0 {
        return;
    }
    let bytes = msg.as_bytes();
    let n = bytes.len().min(cap - 1);
    // SAFETY: the shim passes a buffer of `cap + 1` bytes.
    unsafe {
        std::ptr::copy_nonoverlapping(bytes.as_ptr(), err.cast::<u8>(), n);
        *err.add(n) = 0;
    }
}

/// # Safety
/// `name` must point at `len` readable bytes.
unsafe fn name_of(name: *const c_char, len: usize) -> String {
    if len == 0 {
        return String::new();
    }
    let s = unsafe { std::slice::from_raw_parts(name.cast::<u8>(), len) };
    String::from_utf8_lossy(s).into_owned()
}

unsafe extern "C" fn attr_has(ctx: *const c_void, name: *const c_char, len: usize) -> i32 {
    std::panic::catch_unwind(|| {
        // SAFETY: `ctx` is the `Attrs` of a live `Extra`.
        let attrs = unsafe { &*(ctx as *const Attrs) };
        attrs.contains(&unsafe { name_of(name, len) }) as i32
    })
    .unwrap_or(0)
}

#[allow(clippy::too_many_arguments)]
unsafe extern "C" fn attr_lookup(
    ctx: *const c_void,
    name: *const c_char,
    len: usize,
    kind: i32,
    sink: *mut c_void,
    deliver: DeliverFn,
    err: *mut c_char,
    cap: usize,
) -> i32 {
    let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        // SAFETY: `ctx` is the `Attrs` of a live `Extra`.
        let attrs = unsafe { &*(ctx as *const Attrs) };
        let name = unsafe { name_of(name, len) };
        let Some(kind) = AttrKind::from_i32(kind) else {
            write_err(
                err,
                cap,
                &format!("attribute `{name}`: unknown kind {kind}"),
            );
            return 1;
        };
        match attrs.get_as(&name, kind) {
            Ok(v) => {
                deliver_value(&v, sink, deliver);
                0
            }
            Err(e) => {
                write_err(err, cap, &e.to_string());
                1
            }
        }
    }));
    r.unwrap_or_else(|_| {
        write_err(
            err,
            cap,
            "internal error (panic) while reading an attribute",
        );
        1
    })
}

fn deliver_value(v: &AttrValue, sink: *mut c_void, deliver: DeliverFn) {
    let mut view = AttrView {
        kind: v.kind() as i32,
        b: 0,
        i: 0,
        f: 0.0,
        str_: std::ptr::null(),
        str_len: 0,
        data: std::ptr::null(),
        len: 0,
        row_lens: std::ptr::null(),
        rows: 0,
    };
    let mut flat_i: Vec<i64> = Vec::new();
    let mut flat_f: Vec<f32> = Vec::new();
    let mut rows: Vec<usize> = Vec::new();
    match v {
        AttrValue::Bool(b) => view.b = *b as i32,
        AttrValue::Int(i) => view.i = *i,
        AttrValue::Float(f) => view.f = *f,
        AttrValue::Str(s) => {
            view.str_ = s.as_ptr().cast();
            view.str_len = s.len();
        }
        AttrValue::IntVec(x) => flat_i.extend_from_slice(x),
        AttrValue::FloatVec(x) => flat_f.extend_from_slice(x),
        AttrValue::Int2D(x) => {
            for r in x {
                rows.push(r.len());
                flat_i.extend_from_slice(r);
            }
        }
        AttrValue::Float2D(x) => {
            for r in x {
                rows.push(r.len());
                flat_f.extend_from_slice(r);
            }
        }
    }
    match v {
        AttrValue::IntVec(_) | AttrValue::Int2D(_) => {
            view.data = flat_i.as_ptr().cast();
            view.len = flat_i.len();
        }
        AttrValue::FloatVec(_) | AttrValue::Float2D(_) => {
            view.data = flat_f.as_ptr().cast();
            view.len = flat_f.len();
        }
        _ => {}
    }
    view.row_lens = rows.as_ptr();
    view.rows = rows.len();
    // SAFETY: `deliver` is the shim's noexcept sink; every pointer in `view` is live here.
    unsafe { deliver(sink, &view) };
}
