//! The shipped `__builtin_*` ops: argument rules and symbols. Their implementations live
//! in the backend (`backend/builtins/builtins.cpp`, embedded); semantics are documented in
//! `docs/custom_ops.md`.

use super::registry::CustomArgs;
use crate::ir::{DType, Elem, Type};

/// Every builtin op name.
pub const BUILTIN_NAMES: &[&str] = &[
    "__builtin_gather_load",
    "__builtin_index_select",
    "__builtin_indirect_atomic",
    "__builtin_histogram",
];

/// What a builtin call lowers to.
pub(crate) struct BuiltinPlan {
    /// Library symbol (without the `_mlir_ciface_` prefix).
    pub symbol: String,
    /// Inputs converted to a dtype before the call.
    pub arg_dtypes: Vec<(usize, DType)>,
    /// Inputs (by index) and outs flattened to 1-D for the call; results are reshaped back.
    pub flatten_ins: Vec<usize>,
    /// Whether the outs are flattened too.
    pub flatten_outs: bool,
}

fn ptr_arg(a: &CustomArgs, i: usize, what: &str) -> Result<DType, String> {
    match a.ins.get(i) {
        Some(t) if t.is_scalar() && t.elem.pointee().is_some() => Ok(t.elem.pointee().unwrap()),
        Some(t) => Err(format!(
            "`{}`: {what} (input {i}) must be a pointer, got {t}",
            a.name
        )),
        None => Err(format!("`{}`: missing {what} (input {i})", a.name)),
    }
}

/// A data pointer the library moves elements of: any dtype but bool (whose tiles have no
/// byte layout the C++ could read).
fn data_ptr_arg(a: &CustomArgs, i: usize, what: &str) -> Result<DType, String> {
    let t = ptr_arg(a, i, what)?;
    if t.is_bool() {
        return Err(format!(
            "`{}`: {what} (input {i}) points to bool, which the builtin library does not move; load i8 or u8 and compare with 0",
            a.name
        ));
    }
    Ok(t)
}

fn index_arg(a: &CustomArgs, i: usize, what: &str) -> Result<(DType, Vec<usize>), String> {
    match a.ins.get(i) {
        Some(t) if !t.is_scalar() && matches!(t.elem, Elem::Scalar(DType::I32 | DType::I64)) => {
            Ok((t.dtype().expect("scalar elem"), t.shape.clone()))
        }
        Some(t) => Err(format!(
            "`{}`: {what} (input {i}) must be an i32 or i64 tile, got {t}",
            a.name
        )),
        None => Err(format!("`{}`: missing {what} (input {i})", a.name)),
    }
}

fn int_scalar(a: &CustomArgs, i: usize, what: &str) -> Result<(), String> {
    match a.ins.get(i) {
        Some(t) if t.is_scalar() && t.dtype().is_some_and(|d| d.is_int()) => Ok(()),
        Some(t) => Err(format!(
            "`{}`: {what} (input {i}) must be an integer scalar, got {t}",
            a.name
        )),
        None => Err(format!("`{}`: missing {what} (input {i})", a.name)),
    }
}

fn one_out(a: &CustomArgs) -> Result<&Type, String> {
    match a.outs.as_slice() {
        [t] if !t.is_scalar() => Ok(t),
        _ => Err(format!("`{}` takes exactly one tile `out`", a.name)),
    }
}

fn want_inputs(a: &CustomArgs, n: usize, names: &str) -> Result<(), String> {
    if a.ins.len() != n {
        return Err(format!(
            "`{}` takes {n} inputs ({names}), got {}",
            a.name,
            a.ins.len()
        ));
    }
    Ok(())
}

/// Validates a builtin call and picks its symbol.
pub(crate) fn plan(a: &CustomArgs) -> Result<BuiltinPlan, String> {
    let name = a.name.as_str();
    match name {
        "__builtin_gather_load" => {
            want_inputs(a, 3, "src, index, bound")?;
            let t = data_ptr_arg(a, 0, "src")?;
            let (i, shape) = index_arg(a, 1, "index")?;
            int_scalar(a, 2, "bound")?;
            let out = one_out(a)?;
            if out.shape != shape || out.dtype() != Some(t) {
                return Err(format!(
                    "`{name}`: out must be a {t} tile of the index's shape {shape:?}, got {out}"
                ));
            }
            Ok(BuiltinPlan {
                symbol: format!("__builtin_gather_load_{}_{}", t.str_name(), i.str_name()),
                arg_dtypes: vec![(2, DType::I64)],
                flatten_ins: vec![1],
                flatten_outs: true,
            })
        }
        "__builtin_index_select" => {
            want_inputs(a, 4, "src, index, row_stride, num_rows")?;
            let t = data_ptr_arg(a, 0, "src")?;
            let (i, shape) = index_arg(a, 1, "index")?;
            int_scalar(a, 2, "row_stride")?;
            int_scalar(a, 3, "num_rows")?;
            let out = one_out(a)?;
            if shape.len() != 1
                || out.rank() != 2
                || out.shape[0] != shape[0]
                || out.dtype() != Some(t)
            {
                return Err(format!(
                    "`{name}`: index must be 1-D [N] and out a {t} tile [N, D], got index {shape:?} and out {out}"
                ));
            }
            Ok(BuiltinPlan {
                symbol: format!("__builtin_index_select_{}_{}", t.str_name(), i.str_name()),
                arg_dtypes: vec![(2, DType::I64), (3, DType::I64)],
                flatten_ins: vec![],
                flatten_outs: false,
            })
        }
        "__builtin_indirect_atomic" => {
            want_inputs(a, 5, "dst, index, value, bound, kind")?;
            let t = ptr_arg(a, 0, "dst")?;
            if t.is_bool() || matches!(t, DType::F16 | DType::BF16) {
                return Err(format!("`{name}`: atomics on {t} are not supported"));
            }
            let (i, shape) = index_arg(a, 1, "index")?;
            let vt = &a.ins[2];
            if vt.shape != shape || vt.dtype() != Some(t) {
                return Err(format!(
                    "`{name}`: value must be a {t} tile of the index's shape {shape:?}, got {vt}"
                ));
            }
            int_scalar(a, 3, "bound")?;
            int_scalar(a, 4, "kind")?;
            let out = one_out(a)?;
            if out.shape != shape || out.dtype() != Some(t) {
                return Err(format!(
                    "`{name}`: out must be a {t} tile of the index's shape {shape:?}, got {out}"
                ));
            }
            Ok(BuiltinPlan {
                symbol: format!(
                    "__builtin_indirect_atomic_{}_{}",
                    t.str_name(),
                    i.str_name()
                ),
                arg_dtypes: vec![(3, DType::I64), (4, DType::I32)],
                flatten_ins: vec![1, 2],
                flatten_outs: true,
            })
        }
        "__builtin_histogram" => {
            want_inputs(a, 1, "values")?;
            let (i, _) = index_arg(a, 0, "values")?;
            let out = one_out(a)?;
            if out.rank() != 1 || out.dtype() != Some(DType::I32) {
                return Err(format!(
                    "`{name}`: out must be a 1-D i32 tile of bins, got {out}"
                ));
            }
            Ok(BuiltinPlan {
                symbol: format!("__builtin_histogram_{}", i.str_name()),
                arg_dtypes: vec![],
                flatten_ins: vec![0],
                flatten_outs: false,
            })
        }
        _ => Err(format!(
            "unknown builtin `{name}` (builtins: {})",
            BUILTIN_NAMES.join(", ")
        )),
    }
}
