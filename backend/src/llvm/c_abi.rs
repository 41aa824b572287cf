//! The C side of custom-op calls, shared by both generators: C argument types
//! (`_Float16`, `__bf16`), conversions to and from them, `memref_t` descriptors, signature
//! checks and calls that carry the callee's `zeroext`/`signext`.

use super::Emit;
use crate::llvm::{CodegenError, Result};
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum, FloatType, StructType};
use inkwell::values::{BasicMetadataValueEnum, BasicValueEnum, FunctionValue, PointerValue};
use inkwell::AddressSpace;
use tritium_dsl::ir::{CustomCall, DType, Elem, Type, Value};

impl<'ctx> Emit<'_, 'ctx> {
    /// LLVM's `bfloat` (`__bf16`).
    pub(crate) fn bf16_type(&self) -> FloatType<'ctx> {
        // SAFETY: LLVMBFloatTypeInContext returns a valid float type of this context.
        unsafe { FloatType::new(llvm_sys::core::LLVMBFloatTypeInContext(self.ctx.raw())) }
    }

    /// The LLVM type of a C argument of element `e` (`_Float16` → half, `__bf16` → bfloat;
    /// pointers are generic).
    pub(crate) fn c_ty(&self, e: Elem) -> BasicTypeEnum<'ctx> {
        match e {
            Elem::Ptr(_) => self.ctx.ptr_type(AddressSpace::default()).into(),
            Elem::Scalar(DType::F16) => self.ctx.f16_type().into(),
            Elem::Scalar(DType::BF16) => self.bf16_type().into(),
            // A C++ fp8 (`__nv_fp8_e4m3`, a byte) is passed as its byte.
            Elem::Scalar(d) if d.fp8_format().is_some() => self.ctx.i8_type().into(),
            Elem::Scalar(d) => self.compute_ty(d),
        }
    }

    /// A compute value as the C argument of element `e` (pointers unchanged).
    pub(crate) fn encode_c(
        &self,
        v: BasicValueEnum<'ctx>,
        e: Elem,
    ) -> Result<BasicValueEnum<'ctx>> {
        match e {
            Elem::Scalar(DType::F16) => Ok(self
                .b
                .build_float_trunc(v.into_float_value(), self.ctx.f16_type(), "")?
                .into()),
            Elem::Scalar(DType::BF16) => {
                let bits = self.to_storage(v, e)?;
                Ok(self.b.build_bit_cast(bits, self.bf16_type(), "")?)
            }
            Elem::Scalar(d) if d.fp8_format().is_some() => self.to_storage(v, e),
            _ => Ok(v),
        }
    }

    /// A C value of element `e` in compute form.
    pub(crate) fn decode_c(
        &self,
        v: BasicValueEnum<'ctx>,
        e: Elem,
    ) -> Result<BasicValueEnum<'ctx>> {
        match e {
            Elem::Scalar(DType::F16) => Ok(self
                .b
                .build_float_ext(v.into_float_value(), self.ctx.f32_type(), "")?
                .into()),
            Elem::Scalar(DType::BF16) => {
                let bits = self.b.build_bit_cast(v, self.ctx.i16_type(), "")?;
                self.decode_storage(bits, e)
            }
            Elem::Scalar(d) if d.fp8_format().is_some() => self.decode_storage(v, e),
            _ => Ok(v),
        }
    }

    /// Checks that `func` has the type the call needs (`ret` `None`: void).
    pub(crate) fn check_signature(
        &self,
        func: FunctionValue<'ctx>,
        ret: Option<BasicTypeEnum<'ctx>>,
        params: &[BasicTypeEnum<'ctx>],
        what: &str,
    ) -> Result<()> {
        let md: Vec<BasicMetadataTypeEnum> = params.iter().map(|t| (*t).into()).collect();
        let want = match ret {
            Some(r) => r.fn_type(&md, false),
            None => self.ctx.void_type().fn_type(&md, false),
        };
        let have = func.get_type();
        if have == want {
            return Ok(());
        }
        Err(CodegenError::unsupported(format!(
            "`{}` has type `{}` but the call needs `{}` ({what})",
            func.get_name().to_string_lossy(),
            have.print_to_string().to_string(),
            want.print_to_string().to_string()
        )))
    }

    /// Checks a Simt call against its callee: outs share one shape, every input is a scalar
    /// or broadcasts to it (no pointer tiles), no extra buffers, and `func` is
    /// `T f(ins…)` for one out or `void f(ins…, T* outs…)` for several. Returns the outs'
    /// shape and elements.
    pub(crate) fn check_simt_call<'t>(
        &self,
        c: &CustomCall,
        ty: impl Fn(Value) -> &'t Type,
        func: FunctionValue<'ctx>,
    ) -> Result<(Vec<usize>, Vec<Elem>)> {
        let shape = ty(c.outs[0]).shape.clone();
        if let Some(o) = c.outs.iter().find(|o| ty(**o).shape != shape) {
            return Err(CodegenError::unsupported(format!(
                "Simt outs must share one shape, got {} and {}",
                ty(c.outs[0]),
                ty(*o)
            )));
        }
        if !c.extra.is_empty() {
            return Err(CodegenError::unsupported(
                "extra buffers are only passed to Simd implementations",
            ));
        }
        let mut types = Vec::new();
        for v in &c.ins {
            let t = ty(*v);
            if !t.is_scalar()
                && (t.elem.pointee().is_some()
                    || tritium_dsl::ir::broadcast_shapes(&t.shape, &shape).as_deref()
                        != Some(&shape[..]))
            {
                return Err(CodegenError::unsupported(format!(
                    "Simt input {v} ({t}) does not broadcast to the out shape {shape:?}"
                )));
            }
            types.push(self.c_ty(t.elem));
        }
        // One out is returned; several are written through `T*` arguments.
        let out_elems: Vec<Elem> = c.outs.iter().map(|o| ty(*o).elem).collect();
        let ret = if let [single] = out_elems[..] {
            Some(self.c_ty(single))
        } else {
            let generic = self.ctx.ptr_type(AddressSpace::default());
            types.extend(c.outs.iter().map(|_| BasicTypeEnum::from(generic)));
            None
        };
        self.check_signature(
            func,
            ret,
            &types,
            "Simt: `T <symbol>(ins…)` for one out, `void <symbol>(ins…, T* outs…)` for several",
        )?;
        Ok((shape, out_elems))
    }

    /// Calls `func`, carrying its parameters' enum attributes to the call site.
    pub(crate) fn call(
        &self,
        func: FunctionValue<'ctx>,
        args: &[BasicValueEnum<'ctx>],
    ) -> Result<Option<BasicValueEnum<'ctx>>> {
        let args: Vec<BasicMetadataValueEnum> = args.iter().map(|a| (*a).into()).collect();
        let call = self.b.build_call(func, &args, "")?;
        // Carry the callee's zeroext/signext so small integers are extended as C expects.
        for k in 0..func.count_params() {
            for a in func.attributes(inkwell::attributes::AttributeLoc::Param(k)) {
                if a.is_enum() {
                    call.add_attribute(inkwell::attributes::AttributeLoc::Param(k), a);
                }
            }
        }
        Ok(match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => Some(v),
            inkwell::values::ValueKind::Instruction(_) => None,
        })
    }

    /// The LLVM type of `memref_t<T, R>` for rank `rank`: `{ ptr, ptr, i64, [R x i64],
    /// [R x i64] }` (no arrays for rank 0).
    pub(crate) fn memref_type(&self, rank: usize) -> StructType<'ctx> {
        let (ptr, i64t) = (
            self.ctx.ptr_type(AddressSpace::default()),
            self.ctx.i64_type(),
        );
        let mut fields: Vec<BasicTypeEnum> = vec![ptr.into(), ptr.into(), i64t.into()];
        if rank > 0 {
            let arr: BasicTypeEnum = i64t.array_type(rank as u32).into();
            fields.push(arr);
            fields.push(arr);
        }
        self.ctx.struct_type(&fields, false)
    }

    /// Fills `desc` (of [`Self::memref_type`]) to describe the row-major buffer `buf` of
    /// `shape` (offset 0, allocated == aligned).
    pub(crate) fn fill_memref(
        &self,
        desc: PointerValue<'ctx>,
        buf: PointerValue<'ctx>,
        shape: &[usize],
    ) -> Result<()> {
        let (st, i64t) = (self.memref_type(shape.len()), self.ctx.i64_type());
        let field = |k: u32| self.b.build_struct_gep(st, desc, k, "");
        self.b.build_store(field(0)?, buf)?;
        self.b.build_store(field(1)?, buf)?;
        self.b.build_store(field(2)?, i64t.const_zero())?;
        for (d, n) in shape.iter().enumerate() {
            let stride: usize = shape[d + 1..].iter().product();
            for (k, v) in [(3, *n), (4, stride)] {
                let arr = i64t.array_type(shape.len() as u32);
                // SAFETY (of the generated code): `d` < rank, the array's length.
                let p = unsafe {
                    self.b.build_gep(
                        arr,
                        field(k)?,
                        &[i64t.const_zero(), i64t.const_int(d as u64, false)],
                        "",
                    )?
                };
                self.b.build_store(p, i64t.const_int(v as u64, false))?;
            }
        }
        Ok(())
    }
}
