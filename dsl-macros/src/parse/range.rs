//! Which `for` loops become runtime IR loops: `a..b`, `a..=b`, `(a..b).step_by(s)`,
//! `range(a, b)`, `range(a, b, s)` and `range(n)` (with Triton's loop options as keywords). Anything else (`static_range(a, b)`,
//! an array, an iterator) is a plain Rust loop, unrolled while tracing.

use syn::spanned::Spanned;
use syn::{Error, Expr, RangeLimits};

/// Triton's `tl.range` options: `loop_unroll_factor` and `num_stages` reach the IR (the
/// CPU and CUDA unroll by the first; CUDA pipelines a loop around a tensor-core `dot` in
/// that many stages); the others are accepted with nothing to do (flattening and warp
/// specialization are GPU schedules Tritium does not generate).
pub const LOOP_OPTIONS: &[&str] = &[
    "num_stages",
    "loop_unroll_factor",
    "flatten",
    "disallow_acc_multi_buffer",
    "warp_specialize",
];

/// The bounds of a runtime loop.
pub struct RuntimeRange {
    /// Start.
    pub lo: Expr,
    /// End (exclusive).
    pub hi: Expr,
    /// True for `a..=b`: the end is `hi + 1`.
    pub inclusive: bool,
    /// Step, 1 when absent.
    pub step: Option<Expr>,
    /// `loop_unroll_factor = …`.
    pub unroll: Option<Expr>,
    /// `num_stages = …`.
    pub stages: Option<Expr>,
}

fn strip_parens(e: &Expr) -> &Expr {
    match e {
        Expr::Paren(p) => strip_parens(&p.expr),
        Expr::Group(g) => strip_parens(&g.expr),
        e => e,
    }
}

fn range_expr(e: &Expr) -> Result<Option<RuntimeRange>, Error> {
    let Expr::Range(r) = strip_parens(e) else {
        return Ok(None);
    };
    let (Some(lo), Some(hi)) = (&r.start, &r.end) else {
        return Err(Error::new(
            r.span(),
            "a kernel `for` needs both bounds: write `a..b`, `range(a, b)` or `static_range(a, b)`",
        ));
    };
    Ok(Some(RuntimeRange {
        lo: (**lo).clone(),
        hi: (**hi).clone(),
        inclusive: matches!(r.limits, RangeLimits::Closed(_)),
        step: None,
        unroll: None,
        stages: None,
    }))
}

/// Classifies the iterated expression of a `for`: `Some` for a runtime loop.
pub fn classify(iter: &Expr) -> Result<Option<RuntimeRange>, Error> {
    match strip_parens(iter) {
        Expr::Range(_) => range_expr(iter),
        Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            match range_expr(&m.receiver)? {
                Some(mut r) => {
                    r.step = Some(m.args[0].clone());
                    Ok(Some(r))
                }
                None => Ok(None),
            }
        }
        Expr::Call(c) => {
            let Expr::Path(p) = &*c.func else {
                return Ok(None);
            };
            if p.qself.is_some() || !p.path.is_ident("range") {
                return Ok(None);
            }
            // Triton's loop options are accepted; `loop_unroll_factor` and `num_stages` are
            // kept.
            let mut args: Vec<Expr> = Vec::new();
            let (mut unroll, mut stages) = (None, None);
            for a in &c.args {
                match super::assigned::keyword_arg(a) {
                    Some((kw, v)) if kw == "loop_unroll_factor" => unroll = Some(v.clone()),
                    Some((kw, v)) if kw == "num_stages" => stages = Some(v.clone()),
                    Some((kw, _)) if LOOP_OPTIONS.contains(&kw.to_string().as_str()) => {}
                    Some((kw, _)) => {
                        return Err(Error::new(
                            kw.span(),
                            format!(
                                "`range` has no option `{kw}`; its options are {}",
                                LOOP_OPTIONS.join(", ")
                            ),
                        ))
                    }
                    None => args.push(a.clone()),
                }
            }
            let zero: Expr = syn::parse_quote_spanned!(c.span()=> 0);
            match args.len() {
                1 => Ok(Some(RuntimeRange {
                    lo: zero,
                    hi: args[0].clone(),
                    inclusive: false,
                    step: None,
                    unroll,
                    stages,
                })),
                2 | 3 => Ok(Some(RuntimeRange {
                    lo: args[0].clone(),
                    hi: args[1].clone(),
                    inclusive: false,
                    step: args.get(2).cloned(),
                    unroll,
                    stages,
                })),
                n => Err(Error::new(
                    c.span(),
                    format!("`range` takes 1 to 3 arguments (start, end, step), got {n}"),
                )),
            }
        }
        _ => Ok(None),
    }
}
