//! `custom(name, ins, outs)`: the traced call of a registered op or a builtin.

use super::builtins;
use super::registry::{lookup, CustomArgs, CustomImpl};
use crate::ir::{
    broadcast_shapes, is_builtin_name, Bitcode, Const, CoreType, CustomAttrs, CustomCall, DType,
    Elem, ExtraBuffer, InlineAsm, Loc, Mode, Op, Pipe, Type, Value,
};
use crate::trace::builder::{with, Builder};
use crate::trace::{IntoOperand, Operand, Tile};

/// The inputs of a custom call: `()`, a tuple of operands (tiles, literals), or a `Vec`.
pub trait CustomIns {
    /// The operands in order.
    fn operands(self) -> Vec<Operand>;
}

impl CustomIns for () {
    fn operands(self) -> Vec<Operand> {
        Vec::new()
    }
}
impl<T: IntoOperand> CustomIns for Vec<T> {
    fn operands(self) -> Vec<Operand> {
        self.into_iter().map(IntoOperand::into_operand).collect()
    }
}
macro_rules! ins_tuple {
    ($($t:ident),+) => {
        impl<$($t: IntoOperand),+> CustomIns for ($($t,)+) {
            #[allow(non_snake_case)]
            fn operands(self) -> Vec<Operand> {
                let ($($t,)+) = self;
                vec![$($t.into_operand()),+]
            }
        }
    };
}
impl<T: IntoOperand, const N: usize> CustomIns for [T; N] {
    fn operands(self) -> Vec<Operand> {
        self.into_iter().map(IntoOperand::into_operand).collect()
    }
}
ins_tuple!(A);
ins_tuple!(A, B);
ins_tuple!(A, B, C);
ins_tuple!(A, B, C, D);
ins_tuple!(A, B, C, D, E);
ins_tuple!(A, B, C, D, E, F);
ins_tuple!(A, B, C, D, E, F, G);
ins_tuple!(A, B, C, D, E, F, G, H);

/// The `out` of a custom call: one [`Tile`] (the call returns a `Tile`) or a tuple of tiles
/// (the call returns a tuple). Results take the types of the outs.
pub trait CustomOuts {
    /// What the call returns.
    type Output;
    /// The out tiles in order.
    fn tiles(&self) -> Vec<Tile>;
    /// Wraps the result values.
    fn results(values: Vec<Value>) -> Self::Output;
}

impl CustomOuts for Tile {
    type Output = Tile;
    fn tiles(&self) -> Vec<Tile> {
        vec![*self]
    }
    fn results(values: Vec<Value>) -> Tile {
        Tile(values[0])
    }
}
macro_rules! outs_tuple {
    ($($i:tt),+) => {
        impl CustomOuts for ($(outs_tuple!(@tile $i),)+) {
            type Output = ($(outs_tuple!(@tile $i),)+);
            fn tiles(&self) -> Vec<Tile> {
                vec![$(self.$i),+]
            }
            fn results(values: Vec<Value>) -> Self::Output {
                ($(Tile(values[$i]),)+)
            }
        }
    };
    (@tile $i:tt) => { Tile };
}
outs_tuple!(0);
outs_tuple!(0, 1);
outs_tuple!(0, 1, 2);
outs_tuple!(0, 1, 2, 3);

/// Call-site attributes. Builtins accept them (checked and canonicalized); a registered op's
/// attributes are fixed by its registration.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CustomOptions {
    /// Core type.
    pub core: Option<CoreType>,
    /// Pipe.
    pub pipe: Option<Pipe>,
    /// Vector mode.
    pub mode: Option<Mode>,
}

/// Calls custom op `name` with inputs `ins`, writing into `outs` (destination passing):
/// `custom("add", (a, b), buf)`; in `#[kernel]` code, `custom("add", a, b, out = buf)`.
/// Errors (unknown op, rejected arguments, bad attributes, missing symbol or bitcode) name
/// the op and this call site.
#[track_caller]
pub fn custom<I: CustomIns, O: CustomOuts>(name: &str, ins: I, outs: O) -> O::Output {
    custom_with(name, CustomOptions::default(), ins, outs)
}

/// [`custom`] with call-site attributes (`core = …, pipe = …, mode = …` in kernel code).
#[track_caller]
pub fn custom_with<I: CustomIns, O: CustomOuts>(
    name: &str,
    options: CustomOptions,
    ins: I,
    outs: O,
) -> O::Output {
    let loc = Loc::from_caller(std::panic::Location::caller());
    let ins = ins.operands();
    let outs: Vec<Value> = outs.tiles().iter().map(|t| t.0).collect();
    let values = with(|b| match trace_call(b, name, options, ins, &outs, &loc) {
        Ok(results) => results,
        Err(message) => {
            b.fail(&loc, format!("custom op `{name}`: {message}"));
            outs.clone()
        }
    });
    O::results(values)
}

/// What a custom call lowers to, decided from its name, call-site options and operand
/// types alone: the tracer and any other IR producer (the fuzzer) build the call from it.
#[derive(Debug, Clone)]
pub struct CallPlan {
    /// Canonical attributes (core, pipe, mode, symbol, bitcode).
    pub attrs: CustomAttrs,
    /// Per-program temp buffers passed after the outs.
    pub extra: Vec<ExtraBuffer>,
    /// Inputs converted to a dtype before the call.
    pub arg_dtypes: Vec<(usize, DType)>,
    /// Inputs (by index) flattened to 1-D for the call.
    pub flatten_ins: Vec<usize>,
    /// Whether the outs are flattened too (results are reshaped back).
    pub flatten_outs: bool,
}

/// Resolves a call of `args.name` (a registered op or a builtin) with `options`; the error
/// says what the op rejected. The caller still names the op and the call site.
pub fn plan_call(args: &CustomArgs, options: CustomOptions) -> Result<CallPlan, String> {
    if args.outs.is_empty() {
        return Err("needs at least one `out` (destination passing: `out = buf`)".into());
    }
    for (i, t) in args.outs.iter().enumerate() {
        if t.dtype().is_none() {
            return Err(format!(
                "out {i} is a pointer ({t}); outs are tiles or scalars"
            ));
        }
    }
    let r = resolve(args, options)?;
    let mode = CustomAttrs::canonical_mode(r.core, r.pipe, r.mode)?;
    for &(i, _) in &r.implementation.arg_dtypes {
        let Some(t) = args.ins.get(i) else {
            return Err(format!(
                "dtype override for input {i}, but there are {} inputs",
                args.ins.len()
            ));
        };
        if t.dtype().is_none() {
            return Err(format!(
                "dtype override for input {i}, which is a pointer ({t})"
            ));
        }
    }
    Ok(CallPlan {
        attrs: CustomAttrs {
            core: r.core,
            pipe: r.pipe,
            mode,
            symbol: r.implementation.symbol,
            bitcode: r.implementation.bitcode.expect("resolved ops have bitcode"),
        },
        extra: r.implementation.extra,
        arg_dtypes: r.implementation.arg_dtypes,
        flatten_ins: r.flatten_ins,
        flatten_outs: r.flatten_outs,
    })
}

struct Resolved {
    core: CoreType,
    pipe: Pipe,
    mode: Option<Mode>,
    implementation: CustomImpl,
    flatten_ins: Vec<usize>,
    flatten_outs: bool,
}

fn resolve(args: &CustomArgs, options: CustomOptions) -> Result<Resolved, String> {
    if is_builtin_name(&args.name) {
        let plan = builtins::plan(args)?;
        let mut implementation = CustomImpl::new(plan.symbol).bitcode(Bitcode::builtin());
        implementation.arg_dtypes = plan.arg_dtypes;
        return Ok(Resolved {
            core: options.core.unwrap_or(CoreType::Vector),
            pipe: options.pipe.unwrap_or(Pipe::PipeV),
            mode: options.mode.or(Some(Mode::Simt)),
            implementation,
            flatten_ins: plan.flatten_ins,
            flatten_outs: plan.flatten_outs,
        });
    }
    let def = lookup(&args.name)?;
    if options != CustomOptions::default() {
        return Err(format!(
            "core, pipe and mode of a registered op are fixed by its registration ({})",
            def.declared_at
        ));
    }
    let implementation = (def.init)(args).map_err(|m| {
        format!(
            "its constructor ({}) rejected the call: {m}",
            def.declared_at
        )
    })?;
    if implementation.symbol.is_empty() {
        return Err(format!(
            "its constructor ({}) gave an empty symbol",
            def.declared_at
        ));
    }
    match &implementation.bitcode {
        None => {
            return Err(format!(
                "a non-builtin op needs bitcode: its constructor ({}) must call `.bitcode(...)`",
                def.declared_at
            ))
        }
        Some(b) if b.is_builtin() => {
            return Err("only `__builtin_*` ops may use the builtin library".into())
        }
        Some(_) => {}
    }
    Ok(Resolved {
        core: def.core,
        pipe: def.pipe,
        mode: def.mode,
        implementation,
        flatten_ins: vec![],
        flatten_outs: false,
    })
}

fn flatten(b: &mut Builder, v: Value, loc: &Loc) -> Value {
    let t = b.ty(v).clone();
    if t.rank() == 1 {
        return v;
    }
    b.push1(Op::Reshape(v), t.with_shape(vec![t.numel()]), loc.clone())
}

fn trace_call(
    b: &mut Builder,
    name: &str,
    options: CustomOptions,
    ins: Vec<Operand>,
    outs: &[Value],
    loc: &Loc,
) -> Result<Vec<Value>, String> {
    let in_values: Vec<Value> = ins.into_iter().map(|o| b.operand(o, None, loc)).collect();
    trace_values(b, name, options, in_values, outs, None, loc)
}

fn trace_values(
    b: &mut Builder,
    name: &str,
    options: CustomOptions,
    mut in_values: Vec<Value>,
    outs: &[Value],
    inline_asm: Option<InlineAsm>,
    loc: &Loc,
) -> Result<Vec<Value>, String> {
    let args = CustomArgs {
        name: name.to_string(),
        ins: in_values.iter().map(|v| b.ty(*v).clone()).collect(),
        outs: outs.iter().map(|v| b.ty(*v).clone()).collect(),
    };
    let plan = plan_call(&args, options)?;
    if inline_asm.is_some() && plan.attrs.mode != Some(Mode::Simt) {
        return Err(format!(
            "the fallback of `inline_asm_elementwise` must be a Simt op (`#[register_custom_op(mode = Simt)]`), not {}",
            plan.attrs.mode.map_or("a cube op", |m| m.name())
        ));
    }
    for &(i, d) in &plan.arg_dtypes {
        in_values[i] = b.cast(in_values[i], d, loc);
    }
    for &i in &plan.flatten_ins {
        in_values[i] = flatten(b, in_values[i], loc);
    }
    let call_outs: Vec<Value> = if plan.flatten_outs {
        outs.iter().map(|v| flatten(b, *v, loc)).collect()
    } else {
        outs.to_vec()
    };
    let result_types = call_outs.iter().map(|v| b.ty(*v).clone()).collect();
    let call = CustomCall {
        name: name.to_string(),
        attrs: plan.attrs,
        ins: in_values,
        outs: call_outs,
        extra: plan.extra,
        inline_asm,
    };
    let results = b.push(Op::Custom(Box::new(call)), result_types, loc.clone());
    Ok(results
        .into_iter()
        .zip(outs)
        .map(|(res, out)| {
            let want = b.ty(*out).clone();
            if *b.ty(res) == want {
                res
            } else {
                b.push1(Op::Reshape(res), want, loc.clone())
            }
        })
        .collect())
}

/// The `dtype` of [`inline_asm_elementwise`]: one [`DType`] (the call gives a [`Tile`]), a
/// tuple of them (a tuple of tiles, one per result, as Triton's tuple `dtype`), an array
/// (an array of tiles) or a `Vec` (a `Vec` of tiles).
pub trait AsmDtypes {
    /// What the call returns.
    type Output;
    /// The result dtypes in order.
    fn dtypes(&self) -> Vec<DType>;
    /// Wraps the result values.
    fn results(values: Vec<Value>) -> Self::Output;
}

impl AsmDtypes for DType {
    type Output = Tile;
    fn dtypes(&self) -> Vec<DType> {
        vec![*self]
    }
    fn results(values: Vec<Value>) -> Tile {
        Tile(values[0])
    }
}
impl<const N: usize> AsmDtypes for [DType; N] {
    type Output = [Tile; N];
    fn dtypes(&self) -> Vec<DType> {
        self.to_vec()
    }
    fn results(values: Vec<Value>) -> [Tile; N] {
        std::array::from_fn(|i| Tile(values[i]))
    }
}
impl AsmDtypes for Vec<DType> {
    type Output = Vec<Tile>;
    fn dtypes(&self) -> Vec<DType> {
        self.clone()
    }
    fn results(values: Vec<Value>) -> Vec<Tile> {
        values.into_iter().map(Tile).collect()
    }
}
macro_rules! asm_dtypes_tuple {
    ($($i:tt),+) => {
        impl AsmDtypes for ($(asm_dtypes_tuple!(@d $i),)+) {
            type Output = ($(asm_dtypes_tuple!(@t $i),)+);
            fn dtypes(&self) -> Vec<DType> {
                vec![$(self.$i),+]
            }
            fn results(values: Vec<Value>) -> Self::Output {
                ($(Tile(values[$i]),)+)
            }
        }
    };
    (@d $i:tt) => { DType };
    (@t $i:tt) => { Tile };
}
asm_dtypes_tuple!(0);
asm_dtypes_tuple!(0, 1);
asm_dtypes_tuple!(0, 1, 2);
asm_dtypes_tuple!(0, 1, 2, 3);

/// Triton's `inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack)`, with
/// the required `fallback`: a registered Simt custom op computing the same per element,
/// with one out per result. The inputs `args` broadcast together; each result is a tile
/// of its dtype in their shape: `dtype` is one [`DType`] (a [`Tile`] back) or a tuple or
/// array of them (a tuple or array of tiles). CUDA hardware runs the inline PTX, `pack`
/// elements per asm call, its operands the results' registers then the inputs' (see
/// [`AsmOperand`](crate::ir::AsmOperand)); the CPU, the interpreter and the emulator call
/// `fallback`. In `#[kernel]` code: `inline_asm_elementwise(asm, constraints, (x, y),
/// DType::U32, true, 1, fallback = "op")`.
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn inline_asm_elementwise<I: CustomIns, D: AsmDtypes>(
    asm: &str,
    constraints: &str,
    args: I,
    dtype: D,
    is_pure: bool,
    pack: u32,
    fallback: &str,
) -> D::Output {
    let loc = Loc::from_caller(std::panic::Location::caller());
    let ins = args.operands();
    let dtypes = dtype.dtypes();
    let x = InlineAsm {
        asm: asm.to_string(),
        constraints: constraints.to_string(),
        pack,
        pure: is_pure,
    };
    D::results(with(|b| {
        let values: Vec<Value> = ins.into_iter().map(|o| b.operand(o, None, &loc)).collect();
        let mut shape: Option<Vec<usize>> = Some(vec![]);
        for v in &values {
            shape = shape.and_then(|s| broadcast_shapes(&s, &b.ty(*v).shape));
        }
        let outs: Vec<Value> = dtypes
            .iter()
            .map(|d| {
                let t = Type::tile(Elem::Scalar(*d), shape.clone().unwrap_or_default());
                b.constant(Const::Int(0), t, &loc)
            })
            .collect();
        let result = (|| {
            let Some(shape) = shape else {
                return Err("the inputs do not broadcast together".to_string());
            };
            if is_builtin_name(fallback) {
                return Err("the fallback is a registered Simt op, not a builtin".to_string());
            }
            let in_dtypes: Vec<DType> = values
                .iter()
                .map(|v| b.ty(*v).dtype())
                .collect::<Option<_>>()
                .ok_or("inputs are tiles of numbers, not pointers")?;
            let numel: usize = shape.iter().product();
            x.check(&in_dtypes, &dtypes, numel)?;
            let values = values
                .into_iter()
                .map(|v| {
                    if b.ty(v).shape == shape {
                        v
                    } else {
                        b.broadcast_to(v, &shape, &loc)
                    }
                })
                .collect();
            let n = dtypes.len();
            trace_values(
                b,
                fallback,
                CustomOptions::default(),
                values,
                &outs,
                Some(x),
                &loc,
            )
            .map_err(|m| {
                format!(
                    "{m} (the fallback computes the call's {n} result{} as its outs: {})",
                    if n == 1 { "" } else { "s" },
                    dtypes
                        .iter()
                        .map(|d| d.name())
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            })
        })();
        match result {
            Ok(r) => r,
            Err(message) => {
                b.fail(
                    &loc,
                    format!("inline_asm_elementwise (fallback `{fallback}`): {message}"),
                );
                outs
            }
        }
    }))
}
