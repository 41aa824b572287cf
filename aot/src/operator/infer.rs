//! Inference (GE's `InferShape`/`InferDataType`): output specs from input specs, which may be
//! dynamic, by the definition's rules or the library's companions; the results are checked
//! here, so a kernel never sees an inconsistent or malformed output shape.

use super::rules::{DTypeRule, ShapeRule};
use super::AotOp;
use crate::abi::{self, ShapeArgs};
use crate::attrs::Attrs;
use crate::dtype::{DType, MindSporeDType};
use crate::error::{AotError, AotResult};
use crate::extra::Extra;
use crate::tensor::{Shape, TensorSpec, DYN_RANK};

impl AotOp {
    /// Infers output shapes and dtypes from input specs, which may be dynamic (`-1` dims,
    /// `[-2]` rank): the GE `InferShape`/`InferDataType` step.
    pub fn infer(&self, inputs: &[TensorSpec]) -> AotResult<Vec<TensorSpec>> {
        self.infer_with(inputs, &Attrs::new())
    }

    /// [`AotOp::infer`] with call-time attributes added to the definition's.
    pub fn infer_with(&self, inputs: &[TensorSpec], attrs: &Attrs) -> AotResult<Vec<TensorSpec>> {
        self.infer_impl(inputs, &self.inner.attrs.merged(attrs))
    }

    pub(super) fn infer_err(&self, message: String) -> AotError {
        AotError::Inference {
            symbol: self.inner.spec.symbol.clone(),
            message,
        }
    }

    /// Whether the library's inference functions are called in their tuple forms.
    fn tuple_form(&self) -> bool {
        let i = &self.inner;
        i.tuple_infer
            || i.num_outputs.is_some_and(|n| n > 1)
            || i.shapes.fixed().is_some_and(|s| s.len() > 1)
            || i.dtypes.fixed().is_some_and(|d| d.len() > 1)
    }

    /// Inference with the attributes already merged.
    pub(super) fn infer_impl(
        &self,
        inputs: &[TensorSpec],
        attrs: &Attrs,
    ) -> AotResult<Vec<TensorSpec>> {
        let i = &self.inner;
        let sym = &i.spec.symbol;
        let in_shapes: Vec<Shape> = inputs.iter().map(|s| s.shape.clone()).collect();
        let in_dtypes: Vec<DType> = inputs.iter().map(|s| s.dtype).collect();
        let tuple = self.tuple_form();
        let shapes = match &i.shapes {
            ShapeRule::Fixed(v) => v.clone(),
            ShapeRule::Fn(f) => f(&in_shapes, attrs).map_err(|m| self.infer_err(m))?,
            ShapeRule::Library => {
                let f = i.infer_shape.expect("checked at build");
                let extra = Extra::new(attrs.clone(), sym)?;
                let mut args = ShapeArgs::new(&in_shapes, &in_dtypes);
                abi::call_infer_shape(
                    f,
                    &format!("{sym}InferShape"),
                    tuple,
                    &mut args,
                    extra.as_ptr(),
                )?
            }
        };
        let dtypes = match &i.dtypes {
            DTypeRule::Fixed(v) => v.clone(),
            DTypeRule::Fn(f) => f(&in_dtypes, attrs).map_err(|m| self.infer_err(m))?,
            DTypeRule::Library => {
                let f = i.infer_type.expect("checked at build");
                let extra = Extra::new(attrs.clone(), sym)?;
                let ids = (in_dtypes.iter())
                    .map(|d| {
                        d.type_id().ok_or_else(|| {
                            self.infer_err(format!(
                                "`{sym}InferType` takes MindSpore TypeIds, and {d} has none here"
                            ))
                        })
                    })
                    .collect::<AotResult<Vec<i32>>>()?;
                let out = abi::call_infer_type(
                    f,
                    &format!("{sym}InferType"),
                    tuple,
                    &ids,
                    extra.as_ptr(),
                )?;
                out.iter()
                    .map(|&id| {
                        DType::from_type_id(id).ok_or_else(|| {
                            self.infer_err(format!(
                                "`{sym}InferType` returned TypeId {id}, which is no number type"
                            ))
                        })
                    })
                    .collect::<AotResult<Vec<_>>>()?
            }
        };
        if shapes.is_empty() {
            return Err(self.infer_err("no outputs were inferred".to_string()));
        }
        if shapes.len() != dtypes.len() {
            return Err(self.infer_err(format!(
                "{} output shapes {shapes:?} but {} output dtypes {dtypes:?}",
                shapes.len(),
                dtypes.len()
            )));
        }
        if let Some(n) = i.num_outputs {
            if n != shapes.len() {
                return Err(self.infer_err(format!(
                    "num_outputs is {n} but {} outputs were inferred",
                    shapes.len()
                )));
            }
        }
        for s in &shapes {
            let bad = s.iter().any(|&d| d < DYN_RANK) || (s.contains(&DYN_RANK) && s.len() != 1);
            if bad {
                return Err(self.infer_err(format!("invalid output shape {s:?}")));
            }
        }
        Ok(shapes
            .into_iter()
            .zip(dtypes)
            .map(|(s, d)| TensorSpec::new(s, d))
            .collect())
    }
}
