//! Custom calls checked against the C++ signature of their entry: the record
//! `tritium-build` embeds as `__tritium_sig_<function>` (element types and ranks of
//! `memref_t<T, R>*` parameters, scalar types; read from clang's debug info when the
//! bitcode was built). Bitcode built otherwise has no record, and only the LLVM types are
//! checked (a tile must be passed where C++ takes a pointer).

use inkwell::module::Module;
use tritium_dsl::ir::{CustomCall, DType, Elem, Function, Type};

/// The record of `function` in `lib`, if `tritium-build` embedded one.
pub(crate) fn record(lib: &Module<'_>, function: &str) -> Option<String> {
    let g = lib.get_global(&format!("__tritium_sig_{function}"))?;
    let init = g.get_initializer()?;
    if !init.is_array_value() {
        return None;
    }
    let array = init.into_array_value();
    let bytes = array.as_const_string()?;
    let text = bytes.strip_suffix(&[0]).unwrap_or(bytes);
    Some(String::from_utf8_lossy(text).into_owned())
}

/// One parameter (or the result) as the record states it.
#[derive(Debug, PartialEq)]
enum CType {
    Void,
    Scalar(DType),
    Memref(DType, usize),
    Unknown,
}

fn parse(item: &str) -> CType {
    let dtype = |s: &str| DType::ALL.into_iter().find(|d| d.name() == s);
    if item == "v" {
        return CType::Void;
    }
    if let Some(d) = item.strip_prefix('s').and_then(dtype) {
        return CType::Scalar(d);
    }
    if let Some((d, r)) = item.strip_prefix('m').and_then(|m| m.split_once('x')) {
        if let (Some(d), Ok(r)) = (dtype(d), r.parse()) {
            return CType::Memref(d, r);
        }
    }
    CType::Unknown
}

impl std::fmt::Display for CType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CType::Void => write!(f, "void"),
            CType::Scalar(d) => write!(f, "{}", d.cname()),
            CType::Memref(d, r) => write!(f, "memref_t<{}, {r}>*", d.cname()),
            CType::Unknown => write!(f, "?"),
        }
    }
}

/// Element types that share a C layout: bool and fp8 tiles are bytes, and f16/bf16 tiles
/// may be taken as their 16-bit patterns (C++ has no portable half or fp8 type; the
/// builtins do so).
fn same_elem(a: DType, b: DType) -> bool {
    let bits16 = |d: DType| matches!(d, DType::U16 | DType::I16);
    let bytes = |d: DType| {
        matches!(
            d,
            DType::Bool | DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15
        )
    };
    a == b
        || (bytes(a) && matches!(b, DType::U8 | DType::I8))
        || (bytes(b) && matches!(a, DType::U8 | DType::I8))
        || (matches!(a, DType::F16 | DType::BF16) && bits16(b))
        || (matches!(b, DType::F16 | DType::BF16) && bits16(a))
}

/// What a call passes at one position.
fn passed(t: &Type, as_tile: bool) -> Option<CType> {
    let Elem::Scalar(d) = t.elem else {
        return None;
    };
    Some(if as_tile {
        CType::Memref(d, t.rank())
    } else {
        CType::Scalar(d)
    })
}

/// Checks call `c` (of `f`) against `record` of its entry `function`: each position the
/// record knows must take what the call passes. `per_element`: a Simt entry (scalars per
/// element, the single out as the result).
pub(crate) fn check(
    f: &Function,
    c: &CustomCall,
    function: &str,
    per_element: bool,
    record: &str,
) -> Result<(), String> {
    let Some((ret, params)) = record.split_once('|') else {
        return Ok(());
    };
    let declared: Vec<CType> = if params.is_empty() {
        Vec::new()
    } else {
        params.split(',').map(parse).collect()
    };
    let mut expected: Vec<(String, Option<CType>)> = Vec::new();
    for (i, v) in c.ins.iter().enumerate() {
        let t = f.ty(*v);
        let tile = !per_element && !t.is_scalar();
        expected.push((format!("input {i} ({t})"), passed(t, tile)));
    }
    // A Simt entry's result is checked after its parameters.
    let mut result_error = None;
    if per_element {
        if c.outs.len() == 1 {
            let t = f.ty(c.outs[0]);
            let want = passed(t, false);
            let got = parse(ret);
            if let (Some(w), CType::Scalar(g)) = (&want, &got) {
                if !matches!(w, CType::Scalar(d) if same_elem(*d, *g)) {
                    result_error = Some(format!(
                        "`{function}` returns `{got}` in C++, the call's out is {t} (`{w}`)"
                    ));
                }
            }
        }
    } else {
        for (i, o) in c.outs.iter().enumerate() {
            let t = f.ty(*o);
            expected.push((format!("out {i} ({t})"), passed(t, true)));
        }
        for (i, e) in c.extra.iter().enumerate() {
            expected.push((format!("extra buffer {i}"), Some(CType::Memref(e.dtype, 1))));
        }
    }
    if per_element && declared.len() < expected.len() {
        return Err(format!(
            "`{function}` takes {} parameters in C++, the call passes {} inputs",
            declared.len(),
            expected.len()
        ));
    }
    if !per_element && declared.len() != expected.len() {
        return Err(format!(
            "`{function}` takes {} parameters in C++, the call passes {} (inputs, outs, extra buffers)",
            declared.len(),
            expected.len()
        ));
    }
    for (k, ((what, want), got)) in expected.iter().zip(&declared).enumerate() {
        let Some(want) = want else { continue };
        let fits = match (want, got) {
            (_, CType::Unknown) => true,
            (CType::Memref(a, r), CType::Memref(b, s)) => same_elem(*a, *b) && r == s,
            (CType::Scalar(a), CType::Scalar(b)) => same_elem(*a, *b),
            _ => false,
        };
        if !fits {
            return Err(format!(
                "parameter {k} of `{function}` is `{got}` in C++, the call passes {what}, which needs `{want}`"
            ));
        }
    }
    result_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_items_parse() {
        assert_eq!(parse("mf32x2"), CType::Memref(DType::F32, 2));
        assert_eq!(parse("si64"), CType::Scalar(DType::I64));
        assert_eq!(parse("v"), CType::Void);
        assert_eq!(parse("?"), CType::Unknown);
        assert_eq!(parse("mq9x1"), CType::Unknown);
        assert_eq!(
            CType::Memref(DType::F16, 1).to_string(),
            "memref_t<half, 1>*"
        );
    }
}
