//! The reference interpreter: runs the tile IR over ndarray, one program after another.
//!
//! It defines what a kernel means; the compiled backends must agree with it (bit for bit
//! on integers, within a tolerance on floats). `TRITIUM_INTERPRET=1` or
//! [`Device::Interpreter`](crate::Device::Interpreter) runs launches through it.
//!
//! # Semantics
//!
//! - The grid runs sequentially, x fastest, then y, then z. `program_id`/`num_programs`
//!   are i32.
//! - Values are ndarrays in a wide representation per element kind (see `value.rs`);
//!   every op works on whole arrays.
//! - Integers wrap at their width; `/` truncates, `%` takes the dividend's sign,
//!   `x / 0 == 0`, `x % 0 == 0`, `MIN / -1 == MIN`; shift amounts are taken modulo the
//!   width; `shr` is arithmetic on signed integers.
//! - f32 ops round to f32 after every op, f64 ops are f64; f16 and bf16 are computed in
//!   f32 and rounded (to nearest even) after every op. Transcendentals of f32/f16/bf16 use
//!   Rust's f32 functions. `max`/`min` are maximumNumber/minimumNumber
//!   (maxnum/minnum with -0 < +0). `fma` fuses in the dtype (f32
//!   for f16/bf16, then rounds).
//! - Casts are Rust `as` (float→int saturates, NaN→0; every conversion rounds once, also
//!   f64→f16 and i64→bf16); anything→bool is `!= 0`; bool→number is 0/1.
//! - Reductions and `dot`: see `reduce.rs` and `dot.rs` (f32 sums accumulate in f64;
//!   argmax/argmin give the first index and ignore NaN unless the lane is all NaN → 0).
//! - Memory: every active lane is checked against the pointer arguments' byte ranges (and
//!   writability for stores and atomics) before the op touches memory; a fault is
//!   [`Error::Runtime`] naming the op's `file:line:col`, the
//!   address, the lane and the buffers. Masked-off lanes touch nothing; atomics run lane
//!   by lane in row-major order and give 0 on masked-off lanes.
//! - `for` with step 0 is a runtime error; loops otherwise run as written.
//!
//! # Trust
//!
//! The interpreter reads and writes host memory only inside the `[lo, hi)` ranges of the
//! [`RawBuffer`](crate::launch::RawBuffer)s it is given, so it is exactly as safe as those
//! ranges are true: the launcher builds them from borrows that outlive the launch.

mod cast;
mod cell;
mod custom;
mod dot;
mod eval;
mod exec;
mod memory;
mod numeric;
mod reduce;
mod scan;
mod value;

use crate::launch::race::RaceRecorder;
use crate::launch::{Grid, Pointee, RawArg};
use crate::{Error, Result};
use memory::Memory;
use ndarray::{ArrayD, IxDyn};
use tritium_dsl::ir::{DType, Elem, Function};
use value::Data;

/// Runs every program of `grid` of kernel `f` with arguments `args`, in order.
///
/// `f` is verified first. `args` must match `f.params` in number and type. Faults
/// (out-of-bounds or read-only accesses, a zero loop step) stop the launch with
/// [`Error::Runtime`]; programs that ran before keep their effects.
pub fn interpret(f: &Function, grid: Grid, args: &[RawArg]) -> Result<()> {
    interpret_with(f, grid, args, &InterpretOptions::default())
}

/// What [`interpret_with`] checks besides what the interpreter always checks, and what it
/// runs user custom ops with.
#[derive(Debug, Clone, Copy, Default)]
pub struct InterpretOptions {
    /// Race detection (`LaunchOptions::race_check`): two programs touching one element,
    /// one of them writing, not both atomically, make the launch an error naming both.
    pub race_check: bool,
    /// Compiles user custom ops' calls ([`crate::dispatch::CPU_USER_OPS`] for the host
    /// CPU). `None`: a user custom op is a runtime error; builtins always run.
    pub user_ops: Option<&'static dyn HostCompiler>,
    /// Two active lanes of one store that write different values to one element make
    /// the launch an error. Which one lands is unspecified (the interpreter keeps the
    /// last in row-major order; a GPU may keep any), so a program that does it has no
    /// one right result. The fuzzer sets it: its programs promise none.
    pub lane_conflicts: bool,
}

/// Compiles a user custom op's call for the interpreter. The interpreter has no code
/// generator: the call becomes a one-op kernel (`kernel(p0, …)`, every operand behind a
/// pointer) that a target compiles for the host, so the op's C++ runs as compiled code
/// does. Dispatch passes the CPU backend; the interpreter does not depend on it.
pub trait HostCompiler: Sync + std::fmt::Debug {
    /// Compiles the one-op kernel `f`.
    fn compile(&self, f: Function) -> Result<Box<dyn HostKernel>>;
}

/// A one-op kernel from a [`HostCompiler`].
pub trait HostKernel: Send + Sync {
    /// Runs one program (grid `[1, 1, 1]`) over `args`, which match the kernel's
    /// parameters.
    fn run(&self, args: &[RawArg]) -> Result<()>;
}

/// [`interpret`] with options.
pub fn interpret_with(
    f: &Function,
    grid: Grid,
    args: &[RawArg],
    options: &InterpretOptions,
) -> Result<()> {
    interpret_launch(f, grid, args, &[], options)
}

/// [`interpret_with`] for a launch whose pointer tables reach `pointees`
/// ([`crate::launch::PtrTable`]): pointers made from integers may touch them too.
pub fn interpret_launch(
    f: &Function,
    grid: Grid,
    args: &[RawArg],
    pointees: &[Pointee],
    options: &InterpretOptions,
) -> Result<()> {
    tritium_dsl::ir::verify(f)?;
    grid.validate(&f.name)?;
    let params = bind_params(f, args)?;
    let buffers = crate::launch::named_buffers(f, args, pointees);
    let memory = Memory::from_buffers(buffers.clone());
    let recorder = options.race_check.then(|| RaceRecorder::new(grid.0));
    // `validate` bounds every axis by i32::MAX.
    let dims = grid.0.map(|n| n as i32);
    let mut program = exec::Program::new(f, &memory, dims, recorder.as_ref(), options);
    for z in 0..dims[2] {
        for y in 0..dims[1] {
            for x in 0..dims[0] {
                program.run([x, y, z], &params)?;
            }
        }
    }
    match &recorder {
        Some(r) => r.result(f, &f.fault_sites(), &buffers),
        None => Ok(()),
    }
}

/// The values of the parameters: pointers hold their buffer's address, scalars their value.
fn bind_params(f: &Function, args: &[RawArg]) -> Result<Vec<Data>> {
    let err = |message: String| Error::Launch {
        kernel: f.name.clone(),
        message,
    };
    if f.params.len() != args.len() {
        return Err(err(format!(
            "{} arguments for {} parameters",
            args.len(),
            f.params.len()
        )));
    }
    f.params
        .iter()
        .zip(args)
        .map(|(p, a)| match (f.ty(p.value).elem, a) {
            (Elem::Ptr(d), RawArg::Ptr(b)) if b.dtype == d => Ok(Data::ptr_scalar(b.ptr)),
            (Elem::Scalar(d), RawArg::Scalar { dtype, bits }) if *dtype == d => {
                Ok(scalar_arg(d, *bits))
            }
            (elem, a) => Err(err(crate::launch::mismatch(&p.name, elem, a))),
        })
        .collect()
}

/// A scalar argument from its little-endian bits (see [`crate::launch::scalar_bits`]).
fn scalar_arg(d: DType, bits: u64) -> Data {
    fn s<T: Clone>(v: T) -> ArrayD<T> {
        ArrayD::from_elem(IxDyn(&[]), v)
    }
    match d {
        DType::Bool => Data::Bool(s(bits as u8 != 0)),
        DType::I8 => Data::Int(s(bits as u8 as i8 as i64)),
        DType::I16 => Data::Int(s(bits as u16 as i16 as i64)),
        DType::I32 => Data::Int(s(bits as u32 as i32 as i64)),
        DType::I64 => Data::Int(s(bits as i64)),
        DType::U8 => Data::UInt(s(bits as u8 as u64)),
        DType::U16 => Data::UInt(s(bits as u16 as u64)),
        DType::U32 => Data::UInt(s(bits as u32 as u64)),
        DType::U64 => Data::UInt(s(bits)),
        d => Data::Float(s(cast::float_from_bits(d, bits))),
    }
}
