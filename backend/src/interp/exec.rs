//! Runs one program: binds values to SSA names, walks blocks, and drives structured
//! control flow. Every fault becomes [`Error::Runtime`] at the op's source location.

use super::cast::{bitcast, cast, constant};
use super::dot::dot;
use super::eval;
use super::memory::Memory;
use super::numeric::wrap_signed;
use super::reduce::reduce;
use super::scan::scan;
use super::value::Data;
use super::HostCompiler;
use crate::launch::race::{AccessKind, RaceRecorder, Who};
use crate::{Error, Result};
use ndarray::{ArrayD, IxDyn};
use std::collections::HashMap;
use tritium_dsl::ir::{Block, DType, Function, Inst, Op, Type, Value};

/// How a block ended.
enum Exit {
    /// Fell off the end (the function body).
    End,
    /// `yield` with these values.
    Yield(Vec<Data>),
    /// A `while` condition region's `condition`.
    Condition(bool),
}

/// The state of one program: its id, the grid, and the value of every SSA name.
pub(crate) struct Program<'a> {
    f: &'a Function,
    memory: &'a Memory,
    env: Vec<Option<Data>>,
    pid: [i32; 3],
    grid: [i32; 3],
    /// Race checking: the launch's recorder and each memory op's fault-site index.
    race: Option<(&'a RaceRecorder, HashMap<*const Inst, u32>)>,
    /// Compiles user custom ops' calls (the interpreter has no code generator).
    user_ops: Option<&'a dyn HostCompiler>,
    /// `InterpretOptions::lane_conflicts`.
    lane_conflicts: bool,
}

impl<'a> Program<'a> {
    /// A program of `f` over `grid` that accesses `memory`, reporting its accesses to
    /// `race` when given, with `options`' user ops and checks.
    pub(crate) fn new(
        f: &'a Function,
        memory: &'a Memory,
        grid: [i32; 3],
        race: Option<&'a RaceRecorder>,
        options: &super::InterpretOptions,
    ) -> Self {
        Program {
            f,
            memory,
            env: vec![None; f.types.len()],
            pid: [0; 3],
            grid,
            race: race.map(|r| (r, f.fault_site_ids())),
            user_ops: options.user_ops,
            lane_conflicts: options.lane_conflicts,
        }
    }

    /// Race checking: reports the active lanes of memory op `inst` at `ptrs`.
    fn note(
        &self,
        inst: &Inst,
        kind: AccessKind,
        ptrs: &ArrayD<usize>,
        mask: Option<&ArrayD<bool>>,
    ) {
        let Some((recorder, sites)) = &self.race else {
            return;
        };
        let who = Who {
            pid: self.pid.map(|p| p as u32),
            site: sites
                .get(&(inst as *const Inst))
                .copied()
                .unwrap_or(u32::MAX),
        };
        for (i, &a) in ptrs.indexed_iter() {
            if mask.is_none_or(|m| m[i.clone()]) {
                recorder.access(a as u64, kind, who);
            }
        }
    }

    /// Runs the kernel body as program `pid` with the parameters bound to `params`.
    pub(crate) fn run(&mut self, pid: [i32; 3], params: &[Data]) -> Result<()> {
        self.pid = pid;
        for (p, v) in self.f.params.iter().zip(params) {
            self.env[p.value.index()] = Some(v.clone());
        }
        match self.block(&self.f.body, Vec::new())? {
            Exit::End => Ok(()),
            _ => Err(self.fault_at(
                self.f.name.clone(),
                "the kernel body ends with a terminator",
            )),
        }
    }

    fn fault_at(&self, location: String, message: impl Into<String>) -> Error {
        Error::Runtime {
            kernel: self.f.name.clone(),
            location,
            message: message.into(),
        }
    }

    fn fault(&self, inst: &Inst, message: impl Into<String>) -> Error {
        self.fault_at(inst.loc.to_string(), message)
    }

    fn get(&self, inst: &Inst, v: Value) -> Result<&Data> {
        self.env
            .get(v.index())
            .and_then(Option::as_ref)
            .ok_or_else(|| self.fault(inst, format!("internal: {v} has no value")))
    }

    fn bind(&mut self, inst: Option<&Inst>, v: Value, d: Data) -> Result<()> {
        let ty = self.f.types.get(v.index());
        if !ty.is_some_and(|t| d.fits(t)) {
            let loc = inst.map_or_else(|| self.f.name.clone(), |i| i.loc.to_string());
            let msg = format!(
                "internal: value of shape {:?} does not fit {v}: {ty:?}",
                d.shape()
            );
            return Err(self.fault_at(loc, msg));
        }
        self.env[v.index()] = Some(d);
        Ok(())
    }

    fn block(&mut self, b: &Block, args: Vec<Data>) -> Result<Exit> {
        if args.len() != b.args.len() {
            let msg = format!(
                "internal: region takes {} values, got {}",
                b.args.len(),
                args.len()
            );
            return Err(self.fault_at(self.f.name.clone(), msg));
        }
        for (a, d) in b.args.iter().zip(args) {
            self.bind(None, *a, d)?;
        }
        for inst in &b.insts {
            match &inst.op {
                Op::Yield(vs) => {
                    let vals = vs
                        .iter()
                        .map(|v| self.get(inst, *v).cloned())
                        .collect::<Result<_>>()?;
                    return Ok(Exit::Yield(vals));
                }
                Op::Condition(c) => {
                    let c = self.get(inst, *c)?.first_bool();
                    return c
                        .map(Exit::Condition)
                        .ok_or_else(|| self.fault(inst, "internal: condition is not a bool"));
                }
                _ => {
                    let results = self.inst(inst)?;
                    if results.len() != inst.results.len() {
                        return Err(self.fault(inst, "internal: wrong number of results"));
                    }
                    for (r, d) in inst.results.iter().zip(results) {
                        self.bind(Some(inst), *r, d)?;
                    }
                }
            }
        }
        Ok(Exit::End)
    }

    fn result_type(&self, inst: &Inst) -> Result<&'a Type> {
        let f = self.f;
        inst.results
            .first()
            .and_then(|r| f.types.get(r.index()))
            .ok_or_else(|| self.fault(inst, "internal: op has no result"))
    }

    fn result_dtype(&self, inst: &Inst) -> Result<DType> {
        self.result_type(inst)?
            .dtype()
            .ok_or_else(|| self.fault(inst, "internal: pointer result where a number is required"))
    }

    fn operand_dtype(&self, inst: &Inst, v: Value) -> Result<DType> {
        self.f
            .types
            .get(v.index())
            .and_then(|t| t.dtype())
            .ok_or_else(|| self.fault(inst, format!("internal: {v} is not a number")))
    }

    fn pointee(&self, inst: &Inst, v: Value) -> Result<DType> {
        self.f
            .types
            .get(v.index())
            .and_then(|t| t.elem.pointee())
            .ok_or_else(|| self.fault(inst, format!("internal: {v} is not a pointer")))
    }

    fn ptrs(&self, inst: &Inst, v: Value) -> Result<&ArrayD<usize>> {
        match self.get(inst, v)? {
            Data::Ptr(p) => Ok(p),
            _ => Err(self.fault(inst, format!("internal: {v} is not a pointer"))),
        }
    }

    fn mask(&self, inst: &Inst, v: Option<Value>) -> Result<Option<&ArrayD<bool>>> {
        match v.map(|v| self.get(inst, v)).transpose()? {
            None => Ok(None),
            Some(Data::Bool(m)) => Ok(Some(m)),
            Some(_) => Err(self.fault(inst, "internal: mask is not bool")),
        }
    }

    fn int_operand(&self, inst: &Inst, v: Value) -> Result<i128> {
        self.get(inst, v)?
            .first_int()
            .ok_or_else(|| self.fault(inst, format!("internal: {v} is not an integer")))
    }

    /// Evaluates one non-terminator op and returns its results.
    fn inst(&mut self, inst: &Inst) -> Result<Vec<Data>> {
        let one = |r: Result<Data, String>| -> Result<Vec<Data>> {
            r.map(|d| vec![d]).map_err(|m| self.fault(inst, m))
        };
        let shape_err = |what: &str| format!("internal: cannot {what} to the result type");
        match &inst.op {
            Op::Const(c) => {
                let t = self.result_type(inst)?;
                one(Ok(constant(*c, self.result_dtype(inst)?, &t.shape)))
            }
            Op::ProgramId(a) => one(grid_axis(*a).map(|a| Data::i32_scalar(self.pid[a]))),
            Op::NumPrograms(a) => one(grid_axis(*a).map(|a| Data::i32_scalar(self.grid[a]))),
            Op::Arange { start, end } => {
                let v: Vec<i64> = (*start..*end).map(|v| wrap_signed(v, 32)).collect();
                let n = v.len();
                one(ArrayD::from_shape_vec(IxDyn(&[n]), v)
                    .map(Data::Int)
                    .map_err(|e| e.to_string()))
            }
            Op::Splat(x) => {
                let t = self.result_type(inst)?;
                one(self
                    .get(inst, *x)?
                    .splat(&t.shape)
                    .ok_or_else(|| shape_err("splat")))
            }
            Op::Broadcast(x) => {
                let t = self.result_type(inst)?;
                one(self
                    .get(inst, *x)?
                    .broadcast(&t.shape)
                    .ok_or_else(|| shape_err("broadcast")))
            }
            Op::ExpandDims { x, axis } => one(self
                .get(inst, *x)?
                .expand_dims(*axis as usize)
                .ok_or_else(|| shape_err("expand_dims"))),
            Op::Reshape(x) => {
                let t = self.result_type(inst)?;
                one(self
                    .get(inst, *x)?
                    .reshape(&t.shape)
                    .ok_or_else(|| shape_err("reshape")))
            }
            Op::Permute { x, dims } => one(self
                .get(inst, *x)?
                .permute(dims)
                .ok_or_else(|| shape_err("permute"))),
            Op::Gather { src, index, axis } => one(self
                .get(inst, *src)?
                .gather(self.get(inst, *index)?, *axis as usize)
                .ok_or_else(|| shape_err("gather"))),
            // A promise for the code generators; the interpreter computes the value itself.
            Op::Hint { x, .. } => one(Ok::<Data, String>(self.get(inst, *x)?.clone())),
            Op::Flip { x, axis } => one(self
                .get(inst, *x)?
                .flip(*axis as usize)
                .ok_or_else(|| shape_err("flip"))),
            Op::Binary(op, a, b) => {
                let d = self.result_dtype(inst)?;
                one(eval::binary(
                    *op,
                    d,
                    self.get(inst, *a)?,
                    self.get(inst, *b)?,
                ))
            }
            Op::Unary(op, x) => one(eval::unary(
                *op,
                self.result_dtype(inst)?,
                self.get(inst, *x)?,
            )),
            Op::Cmp(p, a, b) => one(eval::cmp(*p, self.get(inst, *a)?, self.get(inst, *b)?)),
            Op::Select(c, a, b) => one(eval::select(
                self.get(inst, *c)?,
                self.get(inst, *a)?,
                self.get(inst, *b)?,
            )),
            Op::Fma(a, b, c) => {
                let d = self.result_dtype(inst)?;
                one(eval::fma(
                    d,
                    self.get(inst, *a)?,
                    self.get(inst, *b)?,
                    self.get(inst, *c)?,
                ))
            }
            Op::Cast(x) => {
                let d = self.result_dtype(inst)?;
                one(cast(self.get(inst, *x)?, d).ok_or_else(|| "cannot cast pointers".to_string()))
            }
            Op::Bitcast(x) => {
                let (from, to) = (self.operand_dtype(inst, *x)?, self.result_dtype(inst)?);
                one(bitcast(self.get(inst, *x)?, from, to)
                    .ok_or_else(|| format!("cannot bitcast {from} to {to}")))
            }
            // Interpreter pointers are host byte addresses, as compiled code's.
            Op::IntToPtr(x) => one(match self.get(inst, *x)? {
                Data::Int(a) => Ok(Data::Ptr(a.mapv(|v| v as usize))),
                Data::UInt(a) => Ok(Data::Ptr(a.mapv(|v| v as usize))),
                _ => Err("inttoptr needs i64 or u64".to_string()),
            }),
            Op::PtrToInt(x) => one(match (self.get(inst, *x)?, self.result_dtype(inst)?) {
                (Data::Ptr(a), DType::I64) => Ok(Data::Int(a.mapv(|v| v as i64))),
                (Data::Ptr(a), DType::U64) => Ok(Data::UInt(a.mapv(|v| v as u64))),
                _ => Err("ptrtoint needs pointers and gives i64 or u64".to_string()),
            }),
            Op::AddPtr(p, o) => {
                let size = self.pointee(inst, *p)?.size_bytes();
                one(eval::add_ptr(
                    self.get(inst, *p)?,
                    self.get(inst, *o)?,
                    size,
                ))
            }
            Op::Reduce { op, x, axis } => {
                let d = self.operand_dtype(inst, *x)?;
                one(reduce(*op, d, self.get(inst, *x)?, *axis as usize))
            }
            Op::Scan {
                op,
                x,
                axis,
                reverse,
            } => {
                let d = self.operand_dtype(inst, *x)?;
                one(scan(*op, d, self.get(inst, *x)?, *axis as usize, *reverse))
            }
            Op::Dot { a, b, acc } => {
                let d = self.result_dtype(inst)?;
                one(dot(
                    d,
                    self.get(inst, *a)?,
                    self.get(inst, *b)?,
                    self.get(inst, *acc)?,
                ))
            }
            Op::Custom(c) => {
                let ins = c
                    .ins
                    .iter()
                    .map(|v| self.get(inst, *v))
                    .collect::<Result<Vec<_>>>()?;
                let outs = c
                    .outs
                    .iter()
                    .map(|v| self.get(inst, *v))
                    .collect::<Result<Vec<_>>>()?;
                let run = if c.is_builtin() {
                    super::custom::run_builtin(c, &self.f.types, &ins, &outs, self.memory)
                } else {
                    super::custom::run_user_op(
                        c,
                        &self.f.types,
                        &ins,
                        &outs,
                        self.memory,
                        &inst.loc,
                        self.user_ops,
                    )
                };
                run.map_err(|m| self.fault(inst, format!("custom op `{}`: {m}", c.name)))
            }
            Op::Load {
                ptr, mask, other, ..
            } => {
                let d = self.pointee(inst, *ptr)?;
                let other = other.map(|o| self.get(inst, o)).transpose()?;
                let (p, m) = (self.ptrs(inst, *ptr)?, self.mask(inst, *mask)?);
                let r = one(self.memory.load(d, p, m, other))?;
                self.note(inst, AccessKind::Read, p, m);
                Ok(r)
            }
            Op::Store {
                ptr, value, mask, ..
            } => {
                let d = self.pointee(inst, *ptr)?;
                let (p, v, m) = (
                    self.ptrs(inst, *ptr)?,
                    self.get(inst, *value)?,
                    self.mask(inst, *mask)?,
                );
                self.memory
                    .store(d, p, v, m)
                    .map_err(|e| self.fault(inst, e))?;
                self.note(inst, AccessKind::Write, p, m);
                if self.lane_conflicts {
                    // Each element now holds its last lane's value: a lane whose value
                    // differs from its element's lost to another lane of this store.
                    let back = self
                        .memory
                        .load(d, p, m, None)
                        .map_err(|e| self.fault(inst, e))?;
                    if let Some(lane) = v.first_difference(&back, m) {
                        return Err(self.fault(
                            inst,
                            format!(
                                "lane {lane} of the store and a later lane write different \
                                 values to address {:#x}: which one lands is unspecified",
                                p.iter().nth(lane).copied().unwrap_or(0)
                            ),
                        ));
                    }
                }
                Ok(vec![])
            }
            Op::Atomic {
                op,
                ptr,
                value,
                mask,
            } => {
                let d = self.pointee(inst, *ptr)?;
                let (p, v, m) = (
                    self.ptrs(inst, *ptr)?,
                    self.get(inst, *value)?,
                    self.mask(inst, *mask)?,
                );
                let r = one(self.memory.atomic(*op, d, p, v, m))?;
                self.note(inst, AccessKind::Atomic, p, m);
                Ok(r)
            }
            Op::Assert { cond, mask, msg } => {
                let Data::Bool(c) = self.get(inst, *cond)? else {
                    return Err(self.fault(inst, "internal: assert condition is not bool"));
                };
                let m = self.mask(inst, *mask)?;
                let failed = c
                    .indexed_iter()
                    .find(|(i, ok)| !**ok && m.is_none_or(|m| m[i.clone()]));
                if let Some((lane, _)) = failed {
                    let pid = self.pid.map(i64::from);
                    let text = crate::launch::checked::assert_failed(
                        msg,
                        ndarray::Dimension::slice(&lane),
                        pid,
                    );
                    return Err(self.fault(inst, text));
                }
                Ok(vec![])
            }
            Op::Print { prefix, args, hex } => {
                use crate::launch::print::{format_line, print_line};
                let pid = self.pid.map(i64::from);
                for (k, a) in args.iter().enumerate() {
                    let d = self.f.ty(*a).dtype().ok_or_else(|| {
                        self.fault(inst, "internal: print of a value that is not a number")
                    })?;
                    let data = self.get(inst, *a)?;
                    for (idx, bits) in lane_bits(d, data) {
                        let line = format_line(prefix, k, args.len(), pid, &idx, d, bits, *hex);
                        print_line(&line);
                    }
                }
                Ok(vec![])
            }
            Op::AtomicCas { ptr, cmp, value } => {
                let d = self.pointee(inst, *ptr)?;
                let (p, c, v) = (
                    self.ptrs(inst, *ptr)?,
                    self.get(inst, *cmp)?,
                    self.get(inst, *value)?,
                );
                let r = one(self.memory.atomic_cas(d, p, c, v))?;
                self.note(inst, AccessKind::Atomic, p, None);
                Ok(r)
            }
            Op::For {
                lo,
                hi,
                step,
                init,
                body,
                ..
            } => self.for_loop(inst, [*lo, *hi, *step], init, body),
            Op::If {
                cond,
                then_region,
                else_region,
            } => {
                let c = self.get(inst, *cond)?.first_bool();
                let c =
                    c.ok_or_else(|| self.fault(inst, "internal: if condition is not a bool"))?;
                let region = if c { then_region } else { else_region };
                let exit = self.block(region, Vec::new())?;
                self.yielded(inst, exit)
            }
            Op::While { init, cond, body } => {
                let mut carried = self.values(inst, init)?;
                loop {
                    match self.block(cond, carried.clone())? {
                        Exit::Condition(true) => {}
                        Exit::Condition(false) => return Ok(carried),
                        _ => {
                            return Err(self.fault(
                                inst,
                                "internal: while condition region did not end with `condition`",
                            ))
                        }
                    }
                    let exit = self.block(body, carried)?;
                    carried = self.yielded(inst, exit)?;
                }
            }
            Op::Yield(_) | Op::Condition(_) => {
                Err(self.fault(inst, "internal: terminator outside its place"))
            }
        }
    }

    fn values(&self, inst: &Inst, vs: &[Value]) -> Result<Vec<Data>> {
        vs.iter().map(|v| self.get(inst, *v).cloned()).collect()
    }

    fn yielded(&self, inst: &Inst, exit: Exit) -> Result<Vec<Data>> {
        match exit {
            Exit::Yield(v) => Ok(v),
            _ => Err(self.fault(inst, "internal: region did not end with `yield`")),
        }
    }

    /// `for iv in (lo..hi).step_by(step)`: counts up while `iv < hi` for a positive step,
    /// down while `iv > hi` for a negative one; a zero step is an error, not a hang.
    fn for_loop(
        &mut self,
        inst: &Inst,
        bounds: [Value; 3],
        init: &[Value],
        body: &Block,
    ) -> Result<Vec<Data>> {
        let [lo, hi, step] = bounds.map(|v| self.int_operand(inst, v));
        let (lo, hi, step) = (lo?, hi?, step?);
        if step == 0 {
            return Err(self.fault(inst, "`for` loop with step 0 would never end"));
        }
        let d = self.operand_dtype(inst, bounds[0])?;
        let mut carried = self.values(inst, init)?;
        let mut iv = lo;
        while (step > 0 && iv < hi) || (step < 0 && iv > hi) {
            // `iv` lies between `lo` and `hi`, so it is a value of the bounds' dtype.
            let mut args = vec![int_scalar(d, iv)];
            args.extend(carried);
            let exit = self.block(body, args)?;
            carried = self.yielded(inst, exit)?;
            iv += step;
        }
        Ok(carried)
    }
}

/// A grid axis (0, 1 or 2) as an index.
fn grid_axis(a: u32) -> Result<usize, String> {
    if a < 3 {
        Ok(a as usize)
    } else {
        Err(format!("internal: grid axis {a} out of range"))
    }
}

/// A scalar of integer dtype `d` holding `v`.
fn int_scalar(d: DType, v: i128) -> Data {
    if d.is_unsigned_int() {
        Data::UInt(ArrayD::from_elem(IxDyn(&[]), v as u64))
    } else {
        Data::Int(ArrayD::from_elem(IxDyn(&[]), v as i64))
    }
}

/// Each lane of `data` (dtype `d`) in row-major order: its index and its storage bits.
fn lane_bits(d: DType, data: &Data) -> Vec<(Vec<u64>, u64)> {
    fn lanes<T>(a: &ndarray::ArrayD<T>, bits: impl Fn(&T) -> u64) -> Vec<(Vec<u64>, u64)> {
        a.indexed_iter()
            .map(|(i, v)| {
                let idx = ndarray::Dimension::slice(&i).iter().map(|x| *x as u64);
                (idx.collect(), bits(v))
            })
            .collect()
    }
    match data {
        Data::Float(a) => lanes(a, |v| super::cast::float_bits(d, *v)),
        Data::Int(a) => lanes(a, |v| *v as u64),
        Data::UInt(a) => lanes(a, |v| *v),
        Data::Bool(a) => lanes(a, |v| u64::from(*v)),
        Data::Ptr(a) => lanes(a, |v| *v as u64),
    }
}
