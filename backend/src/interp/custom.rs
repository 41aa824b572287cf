//! Custom calls in the interpreter. User ops run their bitcode alone: the call becomes a
//! one-op kernel (load the operands from staging buffers, call, store the outs) compiled
//! by the CPU backend, so the interpreter and compiled kernels share the implementation
//! but not the surrounding code. Builtins run the plain-Rust reference semantics of
//! [`crate::builtins`].

use super::memory::Memory;
use super::value::Data;
use crate::cpu::Compiled;
use crate::launch::{Grid, RawArg, RawBuffer};
use ndarray::{ArrayD, Dimension};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};
use tritium_dsl::ir::{
    print_function, Block, CustomCall, DType, Elem, Function, Inst, Loc, Op, Param, Type, Value,
};

/// Runs a user custom call on operand values; returns one value per out.
pub(crate) fn run_user_op(
    c: &CustomCall,
    types: &[Type],
    ins: &[&Data],
    outs: &[&Data],
    memory: &Memory,
    loc: &Loc,
) -> Result<Vec<Data>, String> {
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
                };
                let staging = Memory::from_buffers(vec![("staging".into(), buf)]);
                staging.store(dt, &addresses(base, t), d, None)?;
                args.push(RawArg::Ptr(buf));
            }
        }
    }
    let compiled = compiled_for(f, c)?;
    compiled
        .run(Grid([1, 1, 1]), &args, false)
        .map_err(|e| e.to_string())?;
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

fn compiled_for(f: Function, c: &CustomCall) -> Result<Arc<Compiled>, String> {
    static CACHE: OnceLock<Mutex<HashMap<(String, usize), Arc<Compiled>>>> = OnceLock::new();
    let key = (
        print_function(&f),
        c.attrs.bitcode.bytes().map_or(0, |b| b.as_ptr() as usize),
    );
    let cache = CACHE.get_or_init(Default::default);
    if let Some(hit) = cache.lock().map_err(|_| "poisoned")?.get(&key) {
        return Ok(hit.clone());
    }
    let compiled = Arc::new(crate::cpu::compile(f, false).map_err(|e| e.to_string())?);
    cache
        .lock()
        .map_err(|_| "poisoned")?
        .insert(key, compiled.clone());
    Ok(compiled)
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

/// Runs a `__builtin_*` call with the reference semantics of [`crate::builtins`].
pub(crate) fn run_builtin(
    c: &CustomCall,
    _types: &[Type],
    _ins: &[&Data],
    _outs: &[&Data],
    _memory: &Memory,
) -> Result<Vec<Data>, String> {
    Err(format!(
        "the interpreter has no reference implementation of `{}` yet",
        c.name
    ))
}
