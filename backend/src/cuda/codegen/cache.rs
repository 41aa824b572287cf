//! Global loads and stores with Triton's cache hints (`CacheHints`). Without hints they
//! are plain LLVM accesses; `volatile` makes a load volatile (`ld.volatile.global`); a cache
//! operator (`.ca`, `.cg`, `.cv`; `.wb`, `.cg`, `.cs`, `.wt`) or an eviction priority
//! (`.L1::evict_first`, `.L1::evict_last`; PTX 7.4, so sm_87 and up here) becomes PTX
//! inline assembly, since LLVM IR has no form for them (PTX takes one or the other: a cache
//! operator wins). The emulator ignores the hints, which change no result.

use super::Gen;
use crate::llvm::Result;
use inkwell::types::{BasicMetadataTypeEnum, BasicType, BasicTypeEnum};
use inkwell::values::{BasicMetadataValueEnum, BasicValue, BasicValueEnum, PointerValue};
use tritium_dsl::ir::{CacheHints, CacheModifier, Eviction};

impl<'ctx> Gen<'ctx, '_> {
    /// A load of one `ty` value (a scalar or a vector of at most 16 bytes) from `p`.
    pub(super) fn global_load(
        &mut self,
        ty: BasicTypeEnum<'ctx>,
        p: PointerValue<'ctx>,
        hints: CacheHints,
    ) -> Result<BasicValueEnum<'ctx>> {
        let qualifier = self.ptx_qualifier(hints, true);
        let Some((q, reg)) = qualifier.zip(register(ty)) else {
            let v = self.b.build_load(ty, p, "")?;
            if hints.volatile {
                if let Some(i) = v.as_instruction_value() {
                    let _ = i.set_volatile(true);
                }
            }
            return Ok(v);
        };
        let addr = self.address(p)?;
        let (words, suffix) = (reg.count, reg.suffix);
        let outs: Vec<String> = (0..words).map(|k| format!("${k}")).collect();
        let dest = match words {
            1 => outs[0].clone(),
            _ => format!("{{{}}}", outs.join(", ")),
        };
        let asm = format!("ld.global{q}{suffix} {dest}, [${words}];");
        let constraints = format!(
            "{},l,~{{memory}}",
            vec![format!("={}", reg.constraint); words].join(",")
        );
        let word_ty = reg.word_ty(self.ctx);
        let ret: BasicTypeEnum = match words {
            1 => word_ty,
            _ => self.ctx.struct_type(&vec![word_ty; words], false).into(),
        };
        let fn_ty = ret.fn_type(&[self.ctx.i64_type().into()], false);
        let f = self
            .ctx
            .create_inline_asm(fn_ty, asm, constraints, true, false, None, false);
        let call = self
            .b
            .build_indirect_call(fn_ty, f, &[addr.into()], "cached")?;
        let got = match call.try_as_basic_value() {
            inkwell::values::ValueKind::Basic(v) => v,
            inkwell::values::ValueKind::Instruction(_) => unreachable!("returns a value"),
        };
        let words_v: Vec<BasicValueEnum<'ctx>> = match words {
            1 => vec![got],
            _ => (0..words)
                .map(|k| (self.b).build_extract_value(got.into_struct_value(), k as u32, ""))
                .collect::<Result<_, _>>()?,
        };
        self.value_from_registers(ty, &words_v, reg)
    }

    /// A store of one value (a scalar or a vector of at most 16 bytes) to `p`.
    pub(super) fn global_store(
        &mut self,
        p: PointerValue<'ctx>,
        v: BasicValueEnum<'ctx>,
        hints: CacheHints,
        align: Option<u32>,
    ) -> Result<()> {
        let ty = v.get_type();
        let qualifier = self.ptx_qualifier(hints, false);
        let Some((q, reg)) = qualifier.zip(register(ty)) else {
            let st = self.b.build_store(p, v)?;
            if let Some(a) = align {
                st.set_alignment(a)?;
            }
            return Ok(());
        };
        let addr = self.address(p)?;
        let words = self.registers_of(v, reg)?;
        let n = words.len();
        let srcs: Vec<String> = (1..=n).map(|k| format!("${k}")).collect();
        let src = match n {
            1 => srcs[0].clone(),
            _ => format!("{{{}}}", srcs.join(", ")),
        };
        let asm = format!("st.global{q}{} [$0], {src};", reg.suffix);
        let constraints = format!(
            "l,{},~{{memory}}",
            vec![reg.constraint.to_string(); n].join(",")
        );
        let word_ty = reg.word_ty(self.ctx);
        let mut params: Vec<BasicMetadataTypeEnum> = vec![self.ctx.i64_type().into()];
        params.extend(std::iter::repeat_n(BasicMetadataTypeEnum::from(word_ty), n));
        let fn_ty = self.ctx.void_type().fn_type(&params, false);
        let f = self
            .ctx
            .create_inline_asm(fn_ty, asm, constraints, true, false, None, false);
        let mut args = vec![addr.into()];
        args.extend(words.into_iter().map(BasicMetadataValueEnum::from));
        self.b.build_indirect_call(fn_ty, f, &args, "")?;
        Ok(())
    }

    /// The PTX qualifier of `hints` (`.cg`, `.L1::evict_first`, …), or `None` when the
    /// access is a plain (or volatile) LLVM one.
    fn ptx_qualifier(&self, hints: CacheHints, load: bool) -> Option<String> {
        if self.emu.is_some() || hints.volatile {
            return None;
        }
        let allowed: &[CacheModifier] = if load {
            &CacheModifier::LOAD
        } else {
            &CacheModifier::STORE
        };
        if allowed.contains(&hints.modifier) {
            return Some(hints.modifier.name().to_string());
        }
        match hints.eviction {
            _ if self.ptx < 74 => None,
            Eviction::Normal => None,
            Eviction::First => Some(".L1::evict_first".into()),
            Eviction::Last => Some(".L1::evict_last".into()),
        }
    }

    fn address(&self, p: PointerValue<'ctx>) -> Result<inkwell::values::IntValue<'ctx>> {
        Ok((self.b).build_ptr_to_int(p, self.ctx.i64_type(), "")?)
    }

    /// `ty`'s value from the registers an access gave.
    fn value_from_registers(
        &self,
        ty: BasicTypeEnum<'ctx>,
        words: &[BasicValueEnum<'ctx>],
        reg: Register,
    ) -> Result<BasicValueEnum<'ctx>> {
        let b = self.b;
        if words.len() == 1 && !reg.widened {
            return Ok(b.build_bit_cast(words[0], ty, "")?);
        }
        if reg.widened {
            // An 8-bit value travels in a 16-bit register.
            let w = words[0].into_int_value();
            return Ok(b.build_int_truncate(w, ty.into_int_type(), "")?.into());
        }
        let word_ty = reg.word_ty(self.ctx);
        let mut v = word_ty
            .into_int_type()
            .vec_type(words.len() as u32)
            .get_undef();
        for (k, w) in words.iter().enumerate() {
            let at = self.ctx.i32_type().const_int(k as u64, false);
            v = b.build_insert_element(v, w.into_int_value(), at, "")?;
        }
        Ok(b.build_bit_cast(v, ty, "")?)
    }

    /// The registers a store of `v` passes.
    fn registers_of(
        &self,
        v: BasicValueEnum<'ctx>,
        reg: Register,
    ) -> Result<Vec<BasicValueEnum<'ctx>>> {
        let b = self.b;
        let word_ty = reg.word_ty(self.ctx);
        if reg.widened {
            let w = b.build_int_z_extend(v.into_int_value(), word_ty.into_int_type(), "")?;
            return Ok(vec![w.into()]);
        }
        if reg.count == 1 {
            return Ok(vec![b.build_bit_cast(v, word_ty, "")?]);
        }
        let vt = word_ty.into_int_type().vec_type(reg.count as u32);
        let words = b.build_bit_cast(v, vt, "")?.into_vector_value();
        Ok((0..reg.count)
            .map(|k| {
                let at = self.ctx.i32_type().const_int(k as u64, false);
                b.build_extract_element(words, at, "")
            })
            .collect::<Result<_, _>>()?)
    }
}

/// How a value travels through inline assembly: `count` registers of one class.
#[derive(Clone, Copy)]
struct Register {
    count: usize,
    /// The constraint letter: `f`, `d`, `h`, `r`, `l`.
    constraint: char,
    /// The PTX type suffix, with the vector width (`.f32`, `.v4.b32`, `.u8`).
    suffix: &'static str,
    /// An 8-bit value in a 16-bit register.
    widened: bool,
}

impl Register {
    fn word_ty<'ctx>(&self, ctx: &'ctx inkwell::context::Context) -> BasicTypeEnum<'ctx> {
        match self.constraint {
            'f' => ctx.f32_type().into(),
            'd' => ctx.f64_type().into(),
            'h' => ctx.i16_type().into(),
            'l' => ctx.i64_type().into(),
            _ => ctx.i32_type().into(),
        }
    }
}

/// The registers of a value of `ty`: scalars in their own class, vectors as 32-bit words
/// (`.v2.b32`, `.v4.b32`); `None` for what PTX cannot move that way (vectors of fewer than
/// 4 bytes), which then gets a plain access.
fn register(ty: BasicTypeEnum<'_>) -> Option<Register> {
    let one = |constraint, suffix| Register {
        count: 1,
        constraint,
        suffix,
        widened: false,
    };
    match ty {
        BasicTypeEnum::FloatType(t) => Some(match bits(t.into())? {
            64 => one('d', ".f64"),
            32 => one('f', ".f32"),
            _ => return None,
        }),
        BasicTypeEnum::IntType(t) => Some(match t.get_bit_width() {
            8 => Register {
                widened: true,
                ..one('h', ".u8")
            },
            16 => one('h', ".b16"),
            32 => one('r', ".b32"),
            _ => one('l', ".b64"),
        }),
        BasicTypeEnum::VectorType(t) => {
            let bytes = t.get_size() as u64 * bits(t.get_element_type())? / 8;
            match bytes {
                4 => Some(one('r', ".b32")),
                8 => Some(Register {
                    count: 2,
                    ..one('r', ".v2.b32")
                }),
                16 => Some(Register {
                    count: 4,
                    ..one('r', ".v4.b32")
                }),
                _ => None,
            }
        }
        _ => None,
    }
}

/// The width of a scalar type.
fn bits(ty: BasicTypeEnum<'_>) -> Option<u64> {
    match ty {
        BasicTypeEnum::IntType(t) => Some(u64::from(t.get_bit_width())),
        BasicTypeEnum::FloatType(t) => {
            let ctx = t.get_context();
            [
                (ctx.f16_type(), 16),
                (ctx.f32_type(), 32),
                (ctx.f64_type(), 64),
            ]
            .into_iter()
            .find(|(f, _)| *f == t)
            .map(|(_, b)| b)
        }
        _ => None,
    }
}
