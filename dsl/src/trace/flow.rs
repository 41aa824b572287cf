//! Structured control flow as the `#[kernel]` macro emits it.
//!
//! `for`, `if` and `while` whose condition or bounds are tiles become IR regions with
//! loop-carried values; the macro passes the variables a statement assigns as a tuple
//! ([`Carry`]). When the condition is a plain Rust `bool` (a constexpr), the statement is
//! resolved while tracing, exactly as Triton resolves `if` on a `tl.constexpr`.

use super::builder::with;
use super::tile::{caller_loc, IntoOperand, Operand, Tile};
use crate::ir::{DType, Loc, Op, Type};

/// Values that can flow through control flow: tiles (become block arguments) and plain
/// Rust values (must not change under a runtime condition).
#[diagnostic::on_unimplemented(
    message = "`{Self}` cannot be assigned inside kernel control flow",
    label = "only tiles, Rust scalars and tuples of them can be loop-carried"
)]
pub trait Carry: Sized {
    /// Appends the tiles, in order.
    fn tiles(&self, out: &mut Vec<Tile>);
    /// Rebuilds a value of the same structure from `tiles`; Rust values are copied from `self`.
    fn rebuild(&self, tiles: &mut std::slice::Iter<'_, Tile>) -> Self;
    /// True when the plain Rust parts of `self` and `other` are equal.
    fn same_native(&self, other: &Self) -> bool;
}

impl Carry for Tile {
    fn tiles(&self, out: &mut Vec<Tile>) {
        out.push(*self);
    }
    fn rebuild(&self, tiles: &mut std::slice::Iter<'_, Tile>) -> Self {
        *tiles.next().expect("one tile per carried tile")
    }
    fn same_native(&self, _: &Self) -> bool {
        true
    }
}

impl Carry for () {
    fn tiles(&self, _: &mut Vec<Tile>) {}
    fn rebuild(&self, _: &mut std::slice::Iter<'_, Tile>) -> Self {}
    fn same_native(&self, _: &Self) -> bool {
        true
    }
}

macro_rules! native_carry {
    ($($t:ty),*) => {$(
        impl Carry for $t {
            fn tiles(&self, _: &mut Vec<Tile>) {}
            fn rebuild(&self, _: &mut std::slice::Iter<'_, Tile>) -> Self { self.clone() }
            fn same_native(&self, other: &Self) -> bool { self == other }
        }
    )*};
}
native_carry!(
    bool,
    i8,
    i16,
    i32,
    i64,
    u8,
    u16,
    u32,
    u64,
    usize,
    isize,
    f32,
    f64,
    DType,
    &'static str
);

/// `Carry` (and, below, `Lift`) for tuples of up to twelve.
macro_rules! tuple_impls {
    ($($name:ident $idx:tt),+) => {
        impl<$($name: Carry),+> Carry for ($($name,)+) {
            fn tiles(&self, out: &mut Vec<Tile>) { $(self.$idx.tiles(out);)+ }
            fn rebuild(&self, tiles: &mut std::slice::Iter<'_, Tile>) -> Self {
                ($(self.$idx.rebuild(tiles),)+)
            }
            fn same_native(&self, other: &Self) -> bool { true $(&& self.$idx.same_native(&other.$idx))+ }
        }
        impl<$($name: Lift),+> Lift for ($($name,)+) {
            type Lifted = ($($name::Lifted,)+);
            #[track_caller]
            fn lift(self) -> Self::Lifted {
                ($(self.$idx.lift(),)+)
            }
        }
    };
}
tuple_impls!(A 0);
tuple_impls!(A 0, B 1);
tuple_impls!(A 0, B 1, C 2);
tuple_impls!(A 0, B 1, C 2, D 3);
tuple_impls!(A 0, B 1, C 2, D 3, E 4);
tuple_impls!(A 0, B 1, C 2, D 3, E 4, F 5);
tuple_impls!(A 0, B 1, C 2, D 3, E 4, F 5, G 6);
tuple_impls!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7);
tuple_impls!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8);
tuple_impls!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9);
tuple_impls!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10);
tuple_impls!(A 0, B 1, C 2, D 3, E 4, F 5, G 6, H 7, I 8, J 9, K 10, L 11);

/// What a value becomes when a runtime `if` gives it: plain numbers and bools become tiles
/// (`let y = if c { 1.0 } else { 0.0 }` is Triton's `where`), everything else stays.
pub trait Lift: Carry {
    /// The lifted type.
    type Lifted: Carry;
    /// Lifts `self`, emitting constants into the block being traced.
    fn lift(self) -> Self::Lifted;
}

impl Lift for Tile {
    type Lifted = Tile;
    fn lift(self) -> Tile {
        self
    }
}

impl Lift for () {
    type Lifted = ();
    fn lift(self) {}
}

macro_rules! lift_to_tile {
    ($($t:ty),*) => {$(
        impl Lift for $t {
            type Lifted = Tile;
            #[track_caller]
            fn lift(self) -> Tile {
                tile_of(self)
            }
        }
    )*};
}
lift_to_tile!(bool, i8, i16, i32, i64, u8, u16, u32, u64, usize, isize, f32, f64);

macro_rules! lift_unchanged {
    ($($t:ty),*) => {$(
        impl Lift for $t {
            type Lifted = $t;
            fn lift(self) -> $t {
                self
            }
        }
    )*};
}
lift_unchanged!(
    DType,
    &'static str,
    super::lang::BlockPtr,
    super::lang::TensorDescriptor
);

/// A branch or loop condition: a Rust `bool` (resolved while tracing) or a bool tile.
pub trait Cond {
    /// What an `if` on this condition gives for a branch value `R`: `R` itself when the
    /// condition is a Rust bool, `R` lifted (plain numbers as tiles) when it is a tile.
    type Out<R: Lift>;
    /// `Ok(b)` for a Rust bool, `Err(tile)` for a runtime condition.
    fn resolve(self) -> Result<bool, Tile>;
    /// The value of an `if` resolved while tracing.
    fn resolved<R: Lift>(r: R) -> Self::Out<R>;
    /// The value of a runtime `if` (already lifted).
    fn runtime<R: Lift>(r: R::Lifted) -> Self::Out<R>;
}
impl Cond for bool {
    type Out<R: Lift> = R;
    fn resolve(self) -> Result<bool, Tile> {
        Ok(self)
    }
    fn resolved<R: Lift>(r: R) -> R {
        r
    }
    fn runtime<R: Lift>(_: R::Lifted) -> R {
        unreachable!("a Rust bool is resolved while tracing")
    }
}
impl Cond for Tile {
    type Out<R: Lift> = R::Lifted;
    fn resolve(self) -> Result<bool, Tile> {
        Err(self)
    }
    #[track_caller]
    fn resolved<R: Lift>(r: R) -> R::Lifted {
        r.lift()
    }
    fn runtime<R: Lift>(r: R::Lifted) -> R::Lifted {
        r
    }
}

fn flat(c: &impl Carry) -> Vec<Tile> {
    let mut v = Vec::new();
    c.tiles(&mut v);
    v
}

fn types(ts: &[Tile]) -> Vec<Type> {
    with(|b| ts.iter().map(|t| b.ty(t.0).clone()).collect())
}

/// Checks that `got` matches the carried types; reports the first mismatch.
fn check_types(want: &[Type], got: &[Tile], what: &str, loc: &Loc) -> bool {
    let got_t = types(got);
    if got_t.len() != want.len() {
        with(|b| {
            b.fail(
                loc,
                format!(
                    "{what}: {} values where {} were carried",
                    got_t.len(),
                    want.len()
                ),
            )
        });
        return false;
    }
    for (w, g) in want.iter().zip(&got_t) {
        if w != g {
            with(|b| {
                b.fail(loc, format!("{what}: a variable changes type from {w} to {g}; cast it or give it the same type before the statement"))
            });
            return false;
        }
    }
    true
}

/// `for iv in (lo..hi).step_by(step) { body }` with `carried` the variables the body assigns.
#[track_caller]
pub fn for_range<C: Carry>(
    lo: impl IntoOperand,
    hi: impl IntoOperand,
    step: impl IntoOperand,
    carried: C,
    body: impl FnOnce(Tile, C) -> C,
) -> C {
    for_range_with(lo, hi, step, LoopOptions::default(), carried, body)
}

/// Triton's `range` options that reach the IR (`flatten`, `disallow_acc_multi_buffer` and
/// `warp_specialize` are GPU schedules Tritium does not generate: accepted, with nothing to
/// do).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LoopOptions {
    /// `loop_unroll_factor`: unroll this many times (1 or less: do not unroll).
    pub unroll: Option<u32>,
    /// `num_stages`: software-pipelining stages on GPUs (1 or less: none).
    pub stages: Option<u32>,
}

impl LoopOptions {
    /// `loop_unroll_factor = factor` (a constexpr; below 1 means 1).
    pub fn unroll_factor(self, factor: i64) -> LoopOptions {
        LoopOptions {
            unroll: Some(factor.clamp(1, i64::from(u32::MAX)) as u32),
            ..self
        }
    }

    /// `num_stages = stages` (a constexpr; below 1 means 1).
    pub fn num_stages(self, stages: i64) -> LoopOptions {
        LoopOptions {
            stages: Some(stages.clamp(1, i64::from(u32::MAX)) as u32),
            ..self
        }
    }
}

/// [`for_range`] with Triton's loop options.
#[track_caller]
pub fn for_range_with<C: Carry>(
    lo: impl IntoOperand,
    hi: impl IntoOperand,
    step: impl IntoOperand,
    options: LoopOptions,
    carried: C,
    body: impl FnOnce(Tile, C) -> C,
) -> C {
    let loc = caller_loc(std::panic::Location::caller());
    let (lo, hi, step) = (lo.into_operand(), hi.into_operand(), step.into_operand());
    let bounds = with(|b| {
        let vs: Vec<_> = [lo, hi, step]
            .iter()
            .map(|o| b.operand(*o, None, &loc))
            .collect();
        let mut d = DType::I32;
        for v in &vs {
            match b.ty(*v).dtype() {
                Some(x) if x.is_int() && b.ty(*v).is_scalar() => d = DType::promote(d, x),
                _ => {
                    let t = b.ty(*v).clone();
                    b.fail(
                        &loc,
                        format!("loop bounds must be integer scalars, got {t}"),
                    );
                }
            }
        }
        vs.into_iter()
            .map(|v| b.cast(v, d, &loc))
            .collect::<Vec<_>>()
    });
    let init = flat(&carried);
    let init_types = types(&init);
    let iv_type = with(|b| b.ty(bounds[0]).clone());
    let mut arg_types = vec![iv_type];
    arg_types.extend(init_types.iter().cloned());
    let args = with(|b| b.open_block(arg_types));
    let args: Vec<Tile> = args.into_iter().map(Tile).collect();
    let inside = carried.rebuild(&mut args[1..].iter());
    let out = body(args[0], inside);
    let yielded = flat(&out);
    if !carried.same_native(&out) {
        with(|b| {
            b.fail(&loc, "a plain Rust variable is assigned inside a runtime `for`; make it a tile or use static_range to unroll")
        });
    }
    let ok = check_types(&init_types, &yielded, "loop-carried value", &loc);
    let body_block = with(|b| {
        let ys = if ok {
            yielded.iter().map(|t| t.0).collect()
        } else {
            args[1..].iter().map(|t| t.0).collect()
        };
        b.push(Op::Yield(ys), vec![], loc.clone());
        b.close_block()
    });
    let results = with(|b| {
        b.push(
            Op::For {
                lo: bounds[0],
                hi: bounds[1],
                step: bounds[2],
                init: init.iter().map(|t| t.0).collect(),
                body: body_block,
                unroll: options.unroll,
                stages: options.stages,
            },
            init_types,
            loc,
        )
    });
    let results: Vec<Tile> = results.into_iter().map(Tile).collect();
    carried.rebuild(&mut results.iter())
}

/// `if cond { then } else { otherwise }` with `carried` the variables the branches assign;
/// each branch gives the `if`'s value `R`, the carried variables and the variables it gives
/// their first value `F` (a deferred `let x;`). Under a runtime condition `R` and `F` are
/// lifted ([`Lift`]): plain numbers the branches give become tiles, so the branches may
/// give different ones; carried plain values must agree.
#[track_caller]
pub fn if_else<K: Cond, C: Carry, R: Lift, F: Lift>(
    cond: K,
    carried: C,
    then_branch: impl FnOnce(C) -> (R, C, F),
    else_branch: impl FnOnce(C) -> (R, C, F),
) -> (K::Out<R>, C, K::Out<F>) {
    let loc = caller_loc(std::panic::Location::caller());
    let cond = match cond.resolve() {
        Ok(b) => {
            let (r, c, f) = if b {
                then_branch(carried)
            } else {
                else_branch(carried)
            };
            return (K::resolved(r), c, K::resolved(f));
        }
        Err(t) => t,
    };
    let cond_v = with(|b| {
        let t = b.ty(cond.0).clone();
        if t != Type::scalar(DType::Bool) {
            b.fail(
                &loc,
                format!("an `if` on a runtime value needs a bool scalar, got {t}"),
            );
        }
        cond.0
    });
    let template = carried.rebuild(&mut flat(&carried).iter());
    // Each branch's value and first values are lifted inside its own region.
    let lifted = |(r, c, f): (R, C, F)| (r.lift(), c, f.lift());
    with(|b| b.open_block(vec![]));
    let then_out = lifted(then_branch(carried));
    let then_tiles = flat(&then_out);
    let then_region = with(|b| b.close_block());
    with(|b| b.open_block(vec![]));
    let else_out = lifted(else_branch(template));
    let else_tiles = flat(&else_out);
    let else_region = with(|b| b.close_block());
    if !then_out.same_native(&else_out) {
        with(|b| {
            b.fail(
                &loc,
                "the branches of a runtime `if` give a plain Rust variable different values; \
                 make it a tile before the `if` (`tile_of(x)`)",
            )
        });
    }
    // A variable one branch leaves unassigned is unassigned after the `if`: it yields
    // nothing, and reading it later is the error.
    let unassigned: Vec<Option<String>> = with(|b| {
        then_tiles
            .iter()
            .zip(&else_tiles)
            .map(|(t, e)| {
                [t, e]
                    .iter()
                    .find_map(|x| b.unassigned_var(x.0).map(|(n, _)| n.clone()))
            })
            .collect()
    });
    let kept = |ts: &[Tile]| -> Vec<Tile> {
        ts.iter()
            .zip(&unassigned)
            .filter(|(_, u)| u.is_none())
            .map(|(t, _)| *t)
            .collect()
    };
    let (then_kept, else_kept) = (kept(&then_tiles), kept(&else_tiles));
    let then_types = types(&then_kept);
    let ok = if then_tiles.len() == else_tiles.len() {
        check_types(&then_types, &else_kept, "the branches of an `if`", &loc)
    } else {
        check_types(
            &types(&then_tiles),
            &else_tiles,
            "the branches of an `if`",
            &loc,
        )
    };
    let ys = if ok { &else_kept } else { &then_kept };
    let close = |mut region: crate::ir::Block, ys: &[Tile]| {
        region.insts.push(crate::ir::Inst {
            results: vec![],
            op: Op::Yield(ys.iter().map(|t| t.0).collect()),
            loc: loc.clone(),
        });
        region
    };
    let then_block = close(then_region, &then_kept);
    let else_block = close(else_region, ys);
    let results = with(|b| {
        b.push(
            Op::If {
                cond: cond_v,
                then_region: then_block,
                else_region: else_block,
            },
            then_types,
            loc.clone(),
        )
    });
    let mut results = results.into_iter().map(Tile);
    let all: Vec<Tile> = unassigned
        .iter()
        .map(|u| match u {
            Some(name) => Tile(with(|b| b.unassigned(name, &loc))),
            None => results.next().expect("one result per kept value"),
        })
        .collect();
    let (r, c, f) = then_out.rebuild(&mut all.iter());
    (K::runtime::<R>(r), c, K::runtime::<F>(f))
}

/// What an `if` branch gives a deferred variable it leaves unassigned (the kernel macro
/// declares it with this): a stand-in that is an error only if read.
#[diagnostic::on_unimplemented(
    message = "a `{Self}` variable must be given a value on every path of the `if`",
    label = "only a tile may be left unassigned on a path and given its value later"
)]
pub trait Unassigned {
    /// The stand-in for variable `name`.
    #[track_caller]
    fn unassigned(name: &str) -> Self;
}

impl Unassigned for Tile {
    #[track_caller]
    fn unassigned(name: &str) -> Tile {
        let loc = caller_loc(std::panic::Location::caller());
        Tile(with(|b| b.unassigned(name, &loc)))
    }
}

/// `T::unassigned(name)`, as the macro spells it.
#[track_caller]
pub fn unassigned<T: Unassigned>(name: &str) -> T {
    T::unassigned(name)
}

/// `while cond { body }` with `carried` the variables the body assigns.
#[track_caller]
pub fn while_loop<C: Carry, K: Cond>(
    carried: C,
    mut cond: impl FnMut(C) -> K,
    mut body: impl FnMut(C) -> C,
) -> C {
    let loc = caller_loc(std::panic::Location::caller());
    let init = flat(&carried);
    let init_types = types(&init);
    // Trace the condition once in a region of its own to learn whether it is a runtime value.
    let cargs: Vec<Tile> = with(|b| b.open_block(init_types.clone()))
        .into_iter()
        .map(Tile)
        .collect();
    let k = cond(carried.rebuild(&mut cargs.iter()));
    let k = match k.resolve() {
        Ok(_) => {
            // A plain Rust condition: discard the region and unroll while tracing.
            with(|b| b.close_block());
            let mut c = carried;
            let mut guard = 0u64;
            while let Ok(true) = cond(c.rebuild(&mut flat(&c).iter())).resolve() {
                c = body(c);
                guard += 1;
                if guard > 1 << 20 {
                    with(|b| {
                        b.fail(
                            &loc,
                            "a compile-time `while` did not finish after 2^20 iterations",
                        )
                    });
                    break;
                }
            }
            return c;
        }
        Err(t) => t,
    };
    with(|b| {
        let t = b.ty(k.0).clone();
        if t != Type::scalar(DType::Bool) {
            b.fail(
                &loc,
                format!("a `while` on a runtime value needs a bool scalar, got {t}"),
            );
        }
        b.push(Op::Condition(k.0), vec![], loc.clone());
    });
    let cond_block = with(|b| b.close_block());
    let bargs: Vec<Tile> = with(|b| b.open_block(init_types.clone()))
        .into_iter()
        .map(Tile)
        .collect();
    let out = body(carried.rebuild(&mut bargs.iter()));
    if !carried.same_native(&out) {
        with(|b| {
            b.fail(
                &loc,
                "a plain Rust variable is assigned inside a runtime `while`",
            )
        });
    }
    let yielded = flat(&out);
    let ok = check_types(&init_types, &yielded, "loop-carried value", &loc);
    let ys = if ok {
        yielded.iter().map(|t| t.0).collect()
    } else {
        bargs.iter().map(|t| t.0).collect()
    };
    with(|b| b.push(Op::Yield(ys), vec![], loc.clone()));
    let body_block = with(|b| b.close_block());
    let results = with(|b| {
        b.push(
            Op::While {
                init: init.iter().map(|t| t.0).collect(),
                cond: cond_block,
                body: body_block,
            },
            init_types,
            loc,
        )
    });
    let results: Vec<Tile> = results.into_iter().map(Tile).collect();
    carried.rebuild(&mut results.iter())
}

/// A `for` over a compile-time range that is unrolled while tracing (Triton's `static_range`).
/// Generic over the integer type so that `static_range(0, N)` with a `usize` constexpr
/// gives `usize` indices.
pub fn static_range<T: super::lang::ConstInt>(start: T, end: T) -> std::ops::Range<T> {
    start..end
}

/// Makes an operand into a tile (used by generated code for `let` of literals in flow).
#[track_caller]
pub fn tile_of(x: impl IntoOperand) -> Tile {
    let loc = caller_loc(std::panic::Location::caller());
    let x = x.into_operand();
    match x {
        Operand::Tile(t) => t,
        op => Tile(with(|b| b.operand(op, None, &loc))),
    }
}
