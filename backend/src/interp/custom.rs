//! Custom calls in the interpreter. User ops run their bitcode alone: the call becomes a
//! one-op kernel (load the operands from staging buffers, call, store the outs) compiled
//! by the caller's [`HostCompiler`] (the CPU backend), so the interpreter and compiled
//! kernels share the implementation but not the surrounding code. Builtins run the
//! plain-Rust reference semantics of [`crate::builtins`].

use super::memory::Memory;
use super::value::Data;
use super::{HostCompiler, HostKernel};
use crate::launch::{RawArg, RawBuffer};
use crate::pipeline::once::OnceMap;
use ndarray::{ArrayD, Dimension, IxDyn};
use std::sync::Arc;
use tritium_dsl::ir::{
    print_function, AtomicOp, Block, CustomCall, DType, Elem, Function, Inst, Loc, Op, Param, Type,
    Value,
};

/// Runs a user custom call on operand values; returns one value per out.
pub(crate) fn run_user_op(
    c: &CustomCall,
    types: &[Type],
    ins: &[&Data],
    outs: &[&Data],
    memory: &Memory,
    loc: &Loc,
    user_ops: Option<&dyn HostCompiler>,
) -> Result<Vec<Data>, String> {
    let Some(user_ops) = user_ops else {
        return Err(
            "a user op needs a host compiler, and this interpreter run has none \
             (`InterpretOptions::user_ops`; launches on `Device::Interpreter` set it)"
                .into(),
        );
    };
    let staged: Vec<(Type, &Data)> = c
        .ins
        .iter()
        .zip(ins)
        .chain(c.outs.iter().zip(outs))
        .map(|(v, d)| (types[v.index()].clone(), *d))
        .collect();
    let f = one_op_kernel(c, &staged, loc);
    // Staging buffers (u64 words keep every element aligned).
    let mut words: Vec<Vec<u64>> = Vec::new();
    let mut args = Vec::new();
    for (t, d) in &staged {
        match t.elem {
            Elem::Ptr(pointee) => {
                let addr = match d {
                    Data::Ptr(p) => p.iter().next().copied().unwrap_or(0),
                    _ => return Err("internal: pointer operand without an address".into()),
                };
                let b = memory.buffer_containing(addr).ok_or_else(|| {
                    format!("pointer input {addr:#x} is not inside any buffer of the launch")
                })?;
                args.push(RawArg::Ptr(RawBuffer {
                    ptr: addr,
                    dtype: pointee,
                    ..b
                }));
            }
            Elem::Scalar(dt) => {
                let bytes = t.numel() * dt.size_bytes();
                words.push(vec![0u64; bytes.div_ceil(8).max(1)]);
                let base = words.last().expect("pushed").as_ptr() as usize;
                let buf = RawBuffer {
                    ptr: base,
                    lo: base,
                    hi: base + bytes,
                    dtype: dt,
                    writable: true,
                    memory: crate::launch::Memory::Host,
                    view: None,
                };
                let staging = Memory::from_buffers(vec![("staging".into(), buf)]);
                staging.store(dt, &addresses(base, t), d, None)?;
                args.push(RawArg::Ptr(buf));
            }
        }
    }
    let compiled = compiled_for(f, c, user_ops)?;
    compiled.run(&args).map_err(|e| e.to_string())?;
    let n_in = c.ins.len();
    staged[n_in..]
        .iter()
        .zip(&args[n_in..])
        .map(|((t, _), a)| {
            let RawArg::Ptr(buf) = a else {
                unreachable!("outs are staged in buffers")
            };
            let staging = Memory::from_buffers(vec![("staging".into(), *buf)]);
            staging.load(buf.dtype, &addresses(buf.ptr, t), None, None)
        })
        .collect()
}

/// Byte addresses of the elements of a row-major buffer of `t` at `base`.
fn addresses(base: usize, t: &Type) -> ArrayD<usize> {
    let size = t.dtype().map_or(8, DType::size_bytes);
    ArrayD::from_shape_fn(ndarray::IxDyn(&t.shape), |idx| {
        let mut lin = 0;
        for (k, i) in idx.slice().iter().enumerate() {
            lin = lin * t.shape[k] + i;
        }
        base + lin * size
    })
}

/// The one-op kernel `f` of call `c`, compiled once per process. Every host compiler
/// gives the function one meaning, so the key does not name the compiler.
fn compiled_for(
    f: Function,
    c: &CustomCall,
    user_ops: &dyn HostCompiler,
) -> Result<Arc<Box<dyn HostKernel>>, String> {
    static COMPILED: OnceMap<(String, String), Box<dyn HostKernel>> = OnceMap::new();
    // The text names the bitcode only by label: key by its contents too.
    let contents = c
        .attrs
        .bitcode
        .bytes()
        .map(crate::pipeline::cache::hash_bytes);
    let key = (print_function(&f), contents.unwrap_or_default());
    COMPILED
        .get_or_make(key, || user_ops.compile(f))
        .map_err(|e| e.to_string())
}

/// `kernel(p0, …)`: every number operand is loaded from its staging pointer, pointer
/// operands pass through, the call's results are stored over the outs' buffers.
fn one_op_kernel(c: &CustomCall, staged: &[(Type, &Data)], loc: &Loc) -> Function {
    let mut types: Vec<Type> = Vec::new();
    let mut insts = Vec::new();
    let new = |types: &mut Vec<Type>, t: Type| {
        types.push(t);
        Value(types.len() as u32 - 1)
    };
    let mut params = Vec::new();
    let mut values = Vec::new();
    let mut out_ptrs = Vec::new();
    for (k, (t, _)) in staged.iter().enumerate() {
        let pointee = match t.elem {
            Elem::Ptr(d) | Elem::Scalar(d) => d,
        };
        let p = new(&mut types, Type::ptr(pointee));
        params.push(Param {
            name: format!("arg{k}"),
            value: p,
        });
        if t.elem.pointee().is_some() {
            values.push(p);
            continue;
        }
        let mut push = |types: &mut Vec<Type>, op: Op, t: Type| {
            let r = new(types, t);
            insts.push(Inst {
                results: vec![r],
                op,
                loc: loc.clone(),
            });
            r
        };
        let ptrs = if t.is_scalar() {
            p
        } else {
            let n = t.numel();
            let flat = Type::tile(Elem::Scalar(DType::I32), vec![n]);
            let mut off = push(
                &mut types,
                Op::Arange {
                    start: 0,
                    end: n as i64,
                },
                flat,
            );
            if t.rank() != 1 {
                off = push(
                    &mut types,
                    Op::Reshape(off),
                    Type::tile(Elem::Scalar(DType::I32), t.shape.clone()),
                );
            }
            let splat = push(
                &mut types,
                Op::Splat(p),
                Type::tile(Elem::Ptr(pointee), t.shape.clone()),
            );
            push(
                &mut types,
                Op::AddPtr(splat, off),
                Type::tile(Elem::Ptr(pointee), t.shape.clone()),
            )
        };
        let v = push(
            &mut types,
            Op::Load {
                ptr: ptrs,
                mask: None,
                other: None,
                hints: Default::default(),
            },
            t.clone(),
        );
        values.push(v);
        if k >= c.ins.len() {
            out_ptrs.push(ptrs);
        }
    }
    let n_in = c.ins.len();
    let results: Vec<Value> = staged[n_in..]
        .iter()
        .map(|(t, _)| new(&mut types, t.clone()))
        .collect();
    let call = CustomCall {
        ins: values[..n_in].to_vec(),
        outs: values[n_in..].to_vec(),
        ..c.clone()
    };
    insts.push(Inst {
        results: results.clone(),
        op: Op::Custom(Box::new(call)),
        loc: loc.clone(),
    });
    for (ptr, r) in out_ptrs.into_iter().zip(results) {
        insts.push(Inst {
            results: vec![],
            op: Op::Store {
                ptr,
                value: r,
                mask: None,
                hints: Default::default(),
            },
            loc: loc.clone(),
        });
    }
    Function {
        name: format!("custom_{}", c.name.trim_start_matches('_')),
        params,
        body: Block {
            args: vec![],
            insts,
        },
        types,
    }
}

/// The whole extent a builtin call may touch through its pointer must lie inside one
/// buffer (`CustomCall::builtin_access`), whatever its index tile holds: the same test as
/// compiled code's, so every device agrees on which launches fail.
fn check_extent(
    c: &CustomCall,
    types: &[Type],
    ins: &[&Data],
    memory: &Memory,
) -> Result<(), String> {
    let Some(access) = c.builtin_access(|v| types[v.index()].shape.clone()) else {
        return Ok(());
    };
    let value = |v: Value| -> i64 {
        (c.ins.iter().position(|x| *x == v))
            .and_then(|k| ins[k].first_int())
            .map_or(0, |x| x as i64)
    };
    let what = "the whole extent it may touch";
    let elements = match access.extent.elements(value) {
        None => return Ok(()),
        Some(Ok(range)) => range,
        Some(Err(())) => return Err(format!("{what}: its extent does not fit in i64")),
    };
    let (Some(Data::Ptr(p)), Some(d)) = (
        ins.first().copied(),
        types[access.ptr.index()].elem.pointee(),
    ) else {
        return Err("internal: a builtin without its pointer".into());
    };
    let base = p.iter().next().copied().unwrap_or(0) as i128;
    let size = d.size_bytes() as i128;
    let lo = base + i128::from(elements.0) * size;
    let hi = base + i128::from(elements.1) * size;
    match (usize::try_from(lo), usize::try_from(hi - lo)) {
        (Ok(addr), Ok(len)) if hi <= isize::MAX as i128 => {
            memory.check_extent(what, access.write, addr, len, size as usize)
        }
        _ => Err(format!(
            "{what}: its extent [{lo:#x}, {hi:#x}) leaves the address space"
        )),
    }
}

/// Runs a `__builtin_*` call with reference semantics built from the interpreter's own
/// checked memory ops (so an out-of-range gather is a fault here, not a stray read).
/// Semantics: `docs/custom_ops.md`; the IR passes flattened 1-D index/value/out tiles.
pub(crate) fn run_builtin(
    c: &CustomCall,
    types: &[Type],
    ins: &[&Data],
    outs: &[&Data],
    memory: &Memory,
) -> Result<Vec<Data>, String> {
    let ints = |d: &Data| -> Result<ArrayD<i64>, String> {
        match d {
            Data::Int(a) => Ok(a.clone()),
            Data::UInt(a) => Ok(a.mapv(|v| v as i64)),
            _ => Err("internal: expected an integer operand".into()),
        }
    };
    let scalar = |d: &Data| -> Result<i64, String> {
        d.first_int()
            .map(|v| v as i64)
            .ok_or_else(|| "internal: expected an integer scalar".to_string())
    };
    let base = |d: &Data| -> Result<usize, String> {
        match d {
            Data::Ptr(p) => p
                .iter()
                .next()
                .copied()
                .ok_or_else(|| "internal: empty pointer".into()),
            _ => Err("internal: expected a pointer".into()),
        }
    };
    let pointee = |k: usize| {
        types[c.ins[k].index()]
            .elem
            .pointee()
            .ok_or("internal: not a pointer")
    };
    let addr = |b: usize, k: i64, size: usize| {
        (b as i64).wrapping_add(k.wrapping_mul(size as i64)) as usize
    };
    check_extent(c, types, ins, memory)?;
    match c.name.as_str() {
        "__builtin_gather_load" => {
            let (src, d) = (base(ins[0])?, pointee(0)?);
            let (index, bound) = (ints(ins[1])?, scalar(ins[2])?);
            let mask = index.mapv(|i| (0..bound).contains(&i));
            let addrs = index.mapv(|i| addr(src, i, d.size_bytes()));
            Ok(vec![memory.load(d, &addrs, Some(&mask), Some(outs[0]))?])
        }
        "__builtin_index_select" => {
            let (src, d) = (base(ins[0])?, pointee(0)?);
            let (index, stride, rows) = (ints(ins[1])?, scalar(ins[2])?, scalar(ins[3])?);
            let shape = outs[0].shape().to_vec();
            let mask =
                ArrayD::from_shape_fn(IxDyn(&shape), |ix| (0..rows).contains(&index[[ix[0]]]));
            let addrs = ArrayD::from_shape_fn(IxDyn(&shape), |ix| {
                addr(
                    src,
                    index[[ix[0]]]
                        .wrapping_mul(stride)
                        .wrapping_add(ix[1] as i64),
                    d.size_bytes(),
                )
            });
            Ok(vec![memory.load(d, &addrs, Some(&mask), Some(outs[0]))?])
        }
        "__builtin_indirect_atomic" => {
            let (dst, d) = (base(ins[0])?, pointee(0)?);
            let (index, bound, kind) = (ints(ins[1])?, scalar(ins[3])?, scalar(ins[4])?);
            let op = match kind {
                0 => AtomicOp::Add,
                1 => AtomicOp::Max,
                2 => AtomicOp::Min,
                3 => AtomicOp::Xchg,
                _ => return Ok(vec![outs[0].clone()]),
            };
            let mask = index.mapv(|i| (0..bound).contains(&i));
            let addrs = index.mapv(|i| addr(dst, i, d.size_bytes()));
            let old = memory.atomic(op, d, &addrs, ins[2], Some(&mask))?;
            let mask = Data::Bool(mask);
            Ok(vec![super::eval::select(&mask, &old, outs[0])?])
        }
        "__builtin_histogram" => {
            let values = ints(ins[0])?;
            let mut bins = ints(outs[0])?;
            let n = bins.len() as i64;
            for v in values.iter().filter(|v| (0..n).contains(*v)) {
                let b = &mut bins[[*v as usize]];
                *b = (*b as i32).wrapping_add(1) as i64;
            }
            Ok(vec![Data::Int(bins)])
        }
        name => Err(format!("unknown builtin `{name}`")),
    }
}
