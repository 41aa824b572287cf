//! The registry of user custom ops, filled at link time by `#[register_custom_op]` through
//! `inventory`, so an op registered in one crate is callable from kernels in any other.

use crate::ir::{Bitcode, CoreType, DType, ExtraBuffer, Mode, Pipe, Type};
use std::collections::HashMap;
use std::sync::OnceLock;

/// One registration (what `#[register_custom_op]` submits).
#[derive(Debug)]
pub struct CustomOpDef {
    /// The op name kernels call it by.
    pub name: &'static str,
    /// Core type.
    pub core: CoreType,
    /// Pipe.
    pub pipe: Pipe,
    /// Vector mode, if declared.
    pub mode: Option<Mode>,
    /// The per-call constructor.
    pub init: fn(&CustomArgs) -> Result<CustomImpl, String>,
    /// Where it was declared (`path::Type at file:line`), for error messages.
    pub declared_at: &'static str,
}

inventory::collect!(CustomOpDef);

/// The types a call passes, for the constructor to validate.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomArgs {
    /// The op name.
    pub name: String,
    /// Input types (tiles, scalars, pointers), in call order.
    pub ins: Vec<Type>,
    /// `out` types; the results take these types.
    pub outs: Vec<Type>,
}

impl CustomArgs {
    /// The element dtype of input `i` (a pointer's pointee); an error names a missing input.
    pub fn in_dtype(&self, i: usize) -> Result<DType, String> {
        self.ins.get(i).map(elem_dtype).ok_or_else(|| {
            format!(
                "`{}` needs at least {} inputs, got {}",
                self.name,
                i + 1,
                self.ins.len()
            )
        })
    }

    /// The element dtype of out `i`.
    pub fn out_dtype(&self, i: usize) -> Result<DType, String> {
        self.outs.get(i).map(elem_dtype).ok_or_else(|| {
            format!(
                "`{}` needs at least {} outs, got {}",
                self.name,
                i + 1,
                self.outs.len()
            )
        })
    }

    /// Checks the number of inputs and outs.
    pub fn expect_arity(&self, ins: usize, outs: usize) -> Result<(), String> {
        if self.ins.len() != ins || self.outs.len() != outs {
            return Err(format!(
                "`{}` takes {ins} input(s) and {outs} out(s), got {} and {}",
                self.name,
                self.ins.len(),
                self.outs.len()
            ));
        }
        Ok(())
    }

    /// Checks that every input and out has element dtype `d`.
    pub fn expect_all_dtype(&self, d: DType) -> Result<(), String> {
        for (what, t) in self
            .ins
            .iter()
            .map(|t| ("input", t))
            .chain(self.outs.iter().map(|t| ("out", t)))
        {
            if elem_dtype(t) != d {
                return Err(format!(
                    "`{}`: every {what} must be {d}, got {t}",
                    self.name
                ));
            }
        }
        Ok(())
    }
}

fn elem_dtype(t: &Type) -> DType {
    match t.elem {
        crate::ir::Elem::Scalar(d) | crate::ir::Elem::Ptr(d) => d,
    }
}

/// What the constructor chose for one call.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CustomImpl {
    pub(crate) symbol: String,
    pub(crate) bitcode: Option<Bitcode>,
    pub(crate) extra: Vec<ExtraBuffer>,
    pub(crate) arg_dtypes: Vec<(usize, DType)>,
}

impl CustomImpl {
    /// The implementation's symbol (Simd calls `_mlir_ciface_<symbol>`, Simt `<symbol>`).
    pub fn new(symbol: impl Into<String>) -> CustomImpl {
        CustomImpl {
            symbol: symbol.into(),
            ..CustomImpl::default()
        }
    }

    /// The bitcode that defines the symbol (required for every non-builtin op).
    pub fn bitcode(mut self, bitcode: Bitcode) -> CustomImpl {
        self.bitcode = Some(bitcode);
        self
    }

    /// An extra per-program temp buffer of `len` elements, passed after the outs.
    pub fn extra_buffer(mut self, dtype: DType, len: usize) -> CustomImpl {
        self.extra.push(ExtraBuffer { dtype, len });
        self
    }

    /// Converts input `index` to `dtype` before the call (its C type changes with it).
    pub fn arg_dtype(mut self, index: usize, dtype: DType) -> CustomImpl {
        self.arg_dtypes.push((index, dtype));
        self
    }
}

type Table = HashMap<&'static str, Vec<&'static CustomOpDef>>;

fn table() -> &'static Table {
    static TABLE: OnceLock<Table> = OnceLock::new();
    TABLE.get_or_init(|| {
        let mut t: Table = HashMap::new();
        for def in inventory::iter::<CustomOpDef> {
            t.entry(def.name).or_default().push(def);
        }
        t
    })
}

/// The registration of `name`. Errors: unknown name (listing the registered ones), or a
/// name registered twice (naming both declarations).
pub fn lookup(name: &str) -> Result<&'static CustomOpDef, String> {
    match table().get(name).map(Vec::as_slice) {
        Some([def]) => Ok(def),
        Some(defs) => {
            let sites: Vec<&str> = defs.iter().map(|d| d.declared_at).collect();
            Err(format!(
                "custom op `{name}` is registered {} times ({}); op names must be unique",
                defs.len(),
                sites.join("; ")
            ))
        }
        None => {
            let known = registered_names();
            Err(format!(
                "unknown custom op `{name}` (registered: {}; builtins: {})",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                },
                super::BUILTIN_NAMES.join(", ")
            ))
        }
    }
}

/// Every registered op name, sorted.
pub fn registered_names() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = table().keys().copied().collect();
    v.sort_unstable();
    v
}
