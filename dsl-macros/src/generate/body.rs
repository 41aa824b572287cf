//! Rewrites a kernel or device-function body into tracing code: comparisons and `&&`/`||`
//! become `compare`/`logic`, builtins get their full path and keyword arguments, the
//! `x[(.., None)]` idiom becomes `expand_dims`, and `for`/`if`/`while` become the
//! closures of `tritium::dsl::trace::flow` with the assigned variables carried.
//!
//! Every generated call carries the span of the user's code it replaces, so the
//! `#[track_caller]` tracing API records the user's `file:line:col`.

use super::early_return::{lower_returns, take_tail_marker};
use super::promote::{promote_to_tiles, PlainNames};
use crate::parse::assigned::{
    assigned_in_block, assigned_in_expr, assigned_in_if, assigned_in_loop, definitely_assigns,
    expr_assigns, keyword_arg, merge,
};
use crate::parse::builtins;
use crate::parse::range::{classify, RuntimeRange};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{quote_spanned, ToTokens};
use syn::spanned::Spanned;
use syn::visit_mut::{self, VisitMut};
use syn::{BinOp, Block, Error, Expr, ExprForLoop, ExprIf, ExprWhile, Item, Pat, Stmt};

/// Which kind of function a body belongs to (it changes a few messages).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FnKind {
    /// A `#[kernel]`.
    Kernel,
    /// A `#[device]` helper.
    Device,
}

/// What encloses the code being rewritten, innermost last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ctx {
    /// A plain Rust `for` (unrolled while tracing): `break`/`continue` work.
    PlainLoop,
    /// A runtime `for`/`while` (an IR loop, traced once as a closure).
    RuntimeLoop,
    /// A branch of an `if` (traced as a closure).
    Branch,
}

/// Rewrites `block` in place; returns every error found.
pub fn rewrite_block(block: &mut Block, kind: FnKind, plain: &PlainNames) -> Result<(), Error> {
    lower_returns(block)?;
    let mut r = Rewriter {
        kind,
        plain: plain.clone(),
        errors: Vec::new(),
        ctx: Vec::new(),
        deferred: Vec::new(),
    };
    r.visit_block_mut(block);
    let mut errors = r.errors.into_iter();
    match errors.next() {
        None => Ok(()),
        Some(mut first) => {
            errors.for_each(|e| first.combine(e));
            Err(first)
        }
    }
}

struct Rewriter {
    kind: FnKind,
    /// The parameters known to hold plain Rust values.
    plain: PlainNames,
    errors: Vec<Error>,
    ctx: Vec<Ctx>,
    /// Variables declared without a value (`let x;`) and not yet assigned by a kernel
    /// `if`: such an `if` gives them their first value instead of carrying one in.
    deferred: Vec<Ident>,
}

fn lang(name: &str, span: Span) -> TokenStream {
    let id = Ident::new(name, span);
    quote_spanned!(span=> ::tritium::dsl::trace::lang::#id)
}

pub(super) fn flow(name: &str, span: Span) -> TokenStream {
    let id = Ident::new(name, span);
    quote_spanned!(span=> ::tritium::dsl::trace::flow::#id)
}

fn verbatim(tokens: TokenStream) -> Expr {
    Expr::Verbatim(tokens)
}

/// `(a, b,)`: the carried tuple.
fn tuple(vars: &[Ident], span: Span) -> TokenStream {
    quote_spanned!(span=> (#(#vars,)*))
}

/// `(mut a, mut b,)`: the carried tuple as a closure parameter.
fn tuple_pat(vars: &[Ident], mutable: bool, span: Span) -> TokenStream {
    if mutable {
        quote_spanned!(span=> #[allow(unused_mut, unused_variables)] (#(mut #vars,)*))
    } else {
        quote_spanned!(span=> #[allow(unused_variables)] (#(#vars,)*))
    }
}

fn cmp_pred(op: &BinOp) -> Option<&'static str> {
    Some(match op {
        BinOp::Lt(_) => "Lt",
        BinOp::Le(_) => "Le",
        BinOp::Gt(_) => "Gt",
        BinOp::Ge(_) => "Ge",
        BinOp::Eq(_) => "Eq",
        BinOp::Ne(_) => "Ne",
        _ => return None,
    })
}

/// Builtin parameters where a `None` argument means the parameter is absent.
const NONE_MEANS_ABSENT: &[&str] = &["acc", "lhs_scale", "rhs_scale", "mask", "other"];

fn is_none(e: &Expr) -> bool {
    matches!(e, Expr::Path(p) if p.qself.is_none() && p.path.is_ident("None"))
}

fn is_full_range(e: &Expr) -> bool {
    matches!(e, Expr::Range(r) if r.start.is_none() && r.end.is_none() && matches!(r.limits, syn::RangeLimits::HalfOpen(_)))
}

fn bare_name(func: &Expr) -> Option<&Ident> {
    match func {
        Expr::Path(p) if p.qself.is_none() && p.path.leading_colon.is_none() => p.path.get_ident(),
        _ => None,
    }
}

impl Rewriter {
    fn error(&mut self, span: Span, message: impl std::fmt::Display) {
        self.errors.push(Error::new(span, message));
    }

    fn unsupported(&mut self, e: &Expr) -> Option<(Span, String)> {
        let kernel = match self.kind {
            FnKind::Kernel => "kernel",
            FnKind::Device => "#[device] function",
        };
        Some(match e {
            Expr::Loop(l) => {
                (
                    l.loop_token.span,
                    "`loop` is not supported in kernel code; use `while cond { … }` or `for i in range(a, b)`".into(),
                )
            }
            // Every other `return` was lowered by `early_return`.
            Expr::Return(r) => (
                r.return_token.span,
                format!("`return` is not supported in a closure of a {kernel}"),
            ),
            Expr::Closure(c) => {
                (
                    c.or1_token.span,
                    format!("closures are not supported in a {kernel}; write a #[device] function instead"),
                )
            }
            Expr::Async(a) => (a.async_token.span, format!("`async` is not supported in a {kernel}")),
            Expr::Await(a) => (a.await_token.span, format!("`.await` is not supported in a {kernel}")),
            Expr::Try(t) => {
                (
                    t.question_token.span,
                    format!(
                        "the `?` operator is not supported in a {kernel}; tracing errors are reported when the kernel is traced"
                    ),
                )
            }
            Expr::TryBlock(t) => (t.try_token.span, format!("`try` blocks are not supported in a {kernel}")),
            Expr::Yield(y) => (y.yield_token.span, format!("`yield` is not supported in a {kernel}")),
            Expr::Unsafe(u) => {
                (
                    u.unsafe_token.span,
                    format!("`unsafe` is not supported in a {kernel}; kernels access memory through `load`/`store`"),
                )
            }
            Expr::Block(b) if b.label.is_some() => {
                let l = b.label.as_ref().expect("checked");
                (l.name.span(), format!("labeled blocks are not supported in a {kernel}; use `if`"))
            }
            Expr::Let(l) => {
                (
                    l.let_token.span,
                    format!("`let` expressions (`if let`, `while let`) are not supported in a {kernel}; use `match`"),
                )
            }
            _ => return None,
        })
    }

    fn check_jump(&mut self, span: Span, what: &str) {
        if self.ctx.last() == Some(&Ctx::PlainLoop) {
            return;
        }
        let msg = if self.ctx.contains(&Ctx::RuntimeLoop) {
            format!("`{what}` is not supported in a kernel loop; use a mask or a `while` with a condition")
        } else if self.ctx.contains(&Ctx::Branch) {
            format!(
                "`{what}` is not supported inside a kernel `if` (both branches are traced); \
                 use a mask, or `match` on a constexpr"
            )
        } else {
            format!("`{what}` outside of a loop")
        };
        self.error(span, msg);
    }

    /// Marks `vars` as declared without a value from here on.
    fn defer(&mut self, vars: &[Ident]) {
        for v in vars {
            if !self.deferred.contains(v) {
                self.deferred.push(v.clone());
            }
        }
    }

    fn in_ctx(&mut self, ctx: Ctx, f: impl FnOnce(&mut Self)) {
        self.ctx.push(ctx);
        f(self);
        self.ctx.pop();
    }

    fn rewrite_for(&mut self, f: &mut ExprForLoop) -> Option<Expr> {
        let range = match classify(&f.expr) {
            Ok(r) => r,
            Err(e) => {
                self.errors.push(e);
                None
            }
        };
        let Some(RuntimeRange {
            mut lo,
            mut hi,
            inclusive,
            step,
            unroll,
            stages,
        }) = range
        else {
            self.visit_expr_mut(&mut f.expr);
            self.in_ctx(Ctx::PlainLoop, |r| r.visit_block_mut(&mut f.body));
            return None;
        };
        if let Some(label) = &f.label {
            self.error(
                label.name.span(),
                "labels are not supported on a kernel `for` over a range",
            );
        }
        let sp = f.for_token.span;
        let carried = assigned_in_loop(&f.pat, &f.body);
        self.visit_expr_mut(&mut lo);
        self.visit_expr_mut(&mut hi);
        let step = step.map(|mut s| {
            self.visit_expr_mut(&mut s);
            s.into_token_stream()
        });
        self.in_ctx(Ctx::RuntimeLoop, |r| r.visit_block_mut(&mut f.body));
        let hi = if inclusive {
            quote_spanned!(sp=> (#hi) + 1)
        } else {
            hi.into_token_stream()
        };
        let step = step.unwrap_or_else(|| quote_spanned!(sp=> 1));
        let (pat, body) = (&f.pat, &f.body);
        // With `loop_unroll_factor` or `num_stages`, `for_range_with(lo, hi, step, options,
        // …)`.
        let (for_range, step) = match (unroll, stages) {
            (None, None) => (flow("for_range", sp), step),
            (unroll, stages) => {
                let options = flow("LoopOptions", sp);
                let unroll = unroll.map(|u| quote_spanned!(sp=> .unroll_factor((#u) as i64)));
                let stages = stages.map(|s| quote_spanned!(sp=> .num_stages((#s) as i64)));
                let f = flow("for_range_with", sp);
                (
                    f,
                    quote_spanned!(sp=> #step, #options::default() #unroll #stages),
                )
            }
        };
        let tokens = if carried.is_empty() {
            quote_spanned!(sp=> { #for_range(#lo, #hi, #step, (), |#pat, ()| #body); })
        } else {
            let (t, p) = (tuple(&carried, sp), tuple_pat(&carried, true, sp));
            quote_spanned!(sp=> {
                #t = #for_range(#lo, #hi, #step, #t, |#pat, #p| { #body; #t });
            })
        };
        Some(verbatim(tokens))
    }

    fn rewrite_if(&mut self, i: &mut ExprIf) -> Expr {
        let sp = i.if_token.span;
        // An `if` that ends its block after `return`s were lowered: nothing after it reads
        // what it assigns, so it carries values in but none out.
        let tail = take_tail_marker(&mut i.attrs);
        let carried = assigned_in_if(i);
        if let Expr::Let(l) = &*i.cond {
            self.error(
                l.let_token.span,
                "`if let` is not supported in kernel code; use `match` (resolved while tracing) or `where_`",
            );
        } else {
            self.visit_expr_mut(&mut i.cond);
        }
        // A deferred `let x;` is not carried in: each branch declares and assigns it, and
        // the `if` gives it its first value. Inside each branch it is deferred again, so an
        // `if` nested there (an `else if` chain) gives it its value the same way.
        let (fresh, carried): (Vec<Ident>, Vec<Ident>) =
            carried.into_iter().partition(|v| self.deferred.contains(v));
        // A branch that may leave a first value unassigned declares it with a stand-in
        // that is an error only if read (a constexpr `if` without `else`).
        let declare = |assigns: &dyn Fn(&Ident) -> bool| -> Vec<TokenStream> {
            fresh
                .iter()
                .map(|v| {
                    if assigns(v) {
                        quote_spanned!(sp=> let #v;)
                    } else {
                        let (name, f) = (v.to_string(), flow("unassigned", sp));
                        quote_spanned!(sp=>
                            #[allow(unused_mut, unused_assignments)]
                            let mut #v = #f(#name);
                        )
                    }
                })
                .collect()
        };
        let then_decls = declare(&|v| definitely_assigns(&i.then_branch, v));
        let else_decls = declare(&|v| {
            i.else_branch
                .as_ref()
                .is_some_and(|(_, e)| expr_assigns(e, v))
        });
        self.in_ctx(Ctx::Branch, |r| {
            r.defer(&fresh);
            r.visit_block_mut(&mut i.then_branch);
            if let Some((_, e)) = &mut i.else_branch {
                r.defer(&fresh);
                r.visit_expr_mut(e);
            }
        });
        self.deferred.retain(|v| !fresh.contains(v));
        let (cond, then) = (&i.cond, &i.then_branch);
        let otherwise = match &i.else_branch {
            Some((_, e)) => e.to_token_stream(),
            None => quote_spanned!(sp=> {}),
        };
        let if_else = flow("if_else", sp);
        let (t, p) = (tuple(&carried, sp), tuple_pat(&carried, true, sp));
        let f = tuple(&fresh, sp);
        let (t_out, f_out) = if tail {
            (quote_spanned!(sp=> ()), quote_spanned!(sp=> ()))
        } else {
            (t.clone(), f.clone())
        };
        let branch = |decls: &[TokenStream], body: &dyn ToTokens| {
            quote_spanned!(sp=> |#p| {
                #(#decls)*
                #[allow(clippy::let_unit_value)]
                let __r = #body;
                (__r, #t_out, #f_out)
            })
        };
        let (then_c, else_c) = (branch(&then_decls, then), branch(&else_decls, &otherwise));
        let call = quote_spanned!(sp=> #if_else(#cond, #t, #then_c, #else_c));
        let tokens = if tail || (carried.is_empty() && fresh.is_empty()) {
            quote_spanned!(sp=> { #call.0 })
        } else {
            quote_spanned!(sp=> {
                let (__r, __c, __f) = #call;
                #[allow(unused_assignments)]
                { #t = __c; }
                #f = __f;
                __r
            })
        };
        verbatim(tokens)
    }

    fn rewrite_while(&mut self, w: &mut ExprWhile) -> Expr {
        let sp = w.while_token.span;
        if let Some(label) = &w.label {
            self.error(
                label.name.span(),
                "labels are not supported on a kernel `while`",
            );
        }
        let carried = merge([assigned_in_expr(&w.cond), assigned_in_block(&w.body)]);
        if let Expr::Let(l) = &*w.cond {
            self.error(
                l.let_token.span,
                "`while let` is not supported in kernel code; use `while cond { … }`",
            );
        } else {
            self.in_ctx(Ctx::Branch, |r| r.visit_expr_mut(&mut w.cond));
        }
        self.in_ctx(Ctx::RuntimeLoop, |r| r.visit_block_mut(&mut w.body));
        let (cond, body) = (&w.cond, &w.body);
        let while_loop = flow("while_loop", sp);
        let (t, p, pc) = (
            tuple(&carried, sp),
            tuple_pat(&carried, true, sp),
            tuple_pat(&carried, false, sp),
        );
        let tokens = if carried.is_empty() {
            quote_spanned!(sp=> { #while_loop((), |()| #cond, |()| #body); })
        } else {
            quote_spanned!(sp=> {
                #t = #while_loop(#t, |#pc| #cond, |#p| { #body; #t });
            })
        };
        verbatim(tokens)
    }

    /// `name(args)` for a builtin: full path, keyword arguments bound, `NoArg` filled in.
    fn rewrite_builtin(
        &mut self,
        b: &'static builtins::Builtin,
        call: &mut syn::ExprCall,
        sp: Span,
    ) -> Option<Expr> {
        let args: Vec<Expr> = std::mem::take(&mut call.args).into_iter().collect();
        let slots = match b.bind(sp, args.clone()) {
            Ok(s) => s,
            Err(e) => {
                self.errors.push(e);
                call.args = args.into_iter().collect();
                for a in call.args.iter_mut() {
                    self.visit_expr_mut(a);
                }
                return None;
            }
        };
        let args: Vec<TokenStream> = slots
            .into_iter()
            .zip(b.params)
            .map(|(slot, param)| match slot {
                // Triton's combine functions: a closure whose body is kernel code.
                Some(Expr::Closure(mut c)) if *param == "combine_fn" => {
                    self.visit_expr_mut(&mut c.body);
                    c.into_token_stream()
                }
                // Python's `None` for an optional operand: absent, as Triton reads it.
                Some(e) if is_none(&e) && NONE_MEANS_ABSENT.contains(param) => {
                    quote_spanned!(sp=> ::tritium::dsl::trace::lang::NoArg)
                }
                Some(mut e) => {
                    self.visit_expr_mut(&mut e);
                    e.into_token_stream()
                }
                None => quote_spanned!(sp=> ::tritium::dsl::trace::lang::NoArg),
            })
            .collect();
        let f = lang(b.function, sp);
        Some(verbatim(quote_spanned!(sp=> #f(#(#args),*))))
    }

    /// `custom("add", a, b, out = buf)` (triton-ascend's `al.custom`) →
    /// `custom_with("add", options, (a, b,), buf)`; `out = (o1, o2)` gives several outs,
    /// `core = …`, `pipe = …`, `mode = …` set a builtin's attributes.
    fn rewrite_custom(&mut self, call: &mut syn::ExprCall, sp: Span) -> Option<Expr> {
        let args: Vec<Expr> = std::mem::take(&mut call.args).into_iter().collect();
        let mut it = args.into_iter();
        let Some(mut name) = it.next() else {
            self.error(sp, "`custom` takes the op name, its inputs and `out = …`, e.g. `custom(\"add\", a, b, out = buf)`");
            return None;
        };
        self.visit_expr_mut(&mut name);
        let mut ins = Vec::new();
        let mut out = None;
        let mut attrs: Vec<(Ident, TokenStream)> = Vec::new();
        for mut arg in it {
            if let Some((kw, value)) = keyword_arg(&arg) {
                let (kw, mut value) = (kw.clone(), value.clone());
                match kw.to_string().as_str() {
                    "out" if out.is_none() => {
                        self.visit_expr_mut(&mut value);
                        out = Some(value);
                    }
                    "out" => self.error(kw.span(), "`out` is given twice"),
                    k @ ("core" | "pipe" | "mode") => {
                        if attrs.iter().any(|(a, _)| a == &kw) {
                            self.error(kw.span(), format!("`{k}` is given twice"));
                        }
                        let ty = match k {
                            "core" => quote_spanned!(kw.span()=> CoreType),
                            "pipe" => quote_spanned!(kw.span()=> Pipe),
                            _ => quote_spanned!(kw.span()=> Mode),
                        };
                        // A bare variant name (`Vector`) is looked up in its enum.
                        let v = match &value {
                            Expr::Path(p) if p.path.get_ident().is_some() => {
                                quote_spanned!(value.span()=> ::tritium::dsl::ir::#ty::#p)
                            }
                            e => e.to_token_stream(),
                        };
                        attrs.push((kw, v));
                    }
                    k => self.error(
                        kw.span(),
                        format!("`custom` has no keyword `{k}`; it takes `out`, and `core`, `pipe`, `mode` for builtins"),
                    ),
                }
            } else {
                if out.is_some() {
                    self.error(arg.span(), "inputs of `custom` come before `out = …`");
                }
                self.visit_expr_mut(&mut arg);
                ins.push(arg);
            }
        }
        let Some(out) = out else {
            self.error(
                sp,
                "`custom` needs `out = <tile>` (destination passing; results take its type)",
            );
            return None;
        };
        let fields = attrs
            .iter()
            .map(|(k, v)| quote_spanned!(k.span()=> #k: ::core::option::Option::Some(#v)));
        let options = quote_spanned!(sp=> ::tritium::dsl::custom::CustomOptions {
            #(#fields,)*
            ..::core::default::Default::default()
        });
        Some(verbatim(quote_spanned!(sp=>
            ::tritium::dsl::custom::custom_with(#name, #options, (#(#ins,)*), #out)
        )))
    }

    /// `device_print("x", a, b, hex = true)` (Triton's varargs) →
    /// `device_print_with("x", (a, b,), true)`.
    fn rewrite_device_print(&mut self, call: &mut syn::ExprCall, sp: Span) -> Option<Expr> {
        let args: Vec<Expr> = std::mem::take(&mut call.args).into_iter().collect();
        let mut it = args.into_iter();
        let Some(mut prefix) = it.next() else {
            self.error(
                sp,
                "`device_print` takes a prefix, then the values: `device_print(\"x\", x)`",
            );
            return None;
        };
        if keyword_arg(&prefix).is_some() {
            self.error(
                prefix.span(),
                "`device_print`'s first argument is the prefix text",
            );
            return None;
        }
        self.visit_expr_mut(&mut prefix);
        let mut values = Vec::new();
        let mut hex = None;
        for mut arg in it {
            if let Some((kw, value)) = keyword_arg(&arg) {
                let (kw, mut value) = (kw.clone(), value.clone());
                if kw != "hex" {
                    self.error(
                        kw.span(),
                        format!("`device_print` has no keyword `{kw}`; it takes `hex`"),
                    );
                } else if hex.is_some() {
                    self.error(kw.span(), "`hex` is given twice");
                } else {
                    self.visit_expr_mut(&mut value);
                    hex = Some(value.into_token_stream());
                }
            } else {
                if hex.is_some() {
                    self.error(arg.span(), "values of `device_print` come before `hex = …`");
                }
                self.visit_expr_mut(&mut arg);
                values.push(arg);
            }
        }
        let hex = hex.unwrap_or_else(|| quote_spanned!(sp=> ::tritium::dsl::trace::lang::NoArg));
        let f = lang("device_print_with", sp);
        Some(verbatim(
            quote_spanned!(sp=> #f(#prefix, (#(#values,)*), #hex)),
        ))
    }

    /// `x[(.., None)]` → `expand_dims(x, 1)`; `None` in a tuple of `..`/`None` inserts a dim.
    fn rewrite_index(&mut self, ix: &mut syn::ExprIndex) -> Option<Expr> {
        let mut idx = &*ix.index;
        while let Expr::Paren(p) = idx {
            idx = &p.expr;
        }
        let elems: Vec<&Expr> = match idx {
            Expr::Tuple(t) => t.elems.iter().collect(),
            e if is_none(e) => vec![e],
            _ => return None,
        };
        if !elems.iter().any(|e| is_none(e)) {
            return None;
        }
        let sp = ix.bracket_token.span.join();
        if let Some(bad) = elems.iter().find(|e| !is_none(e) && !is_full_range(e)) {
            self.error(bad.span(), "tile indexing takes only `..` and `None` (e.g. `x[(.., None)]`); use `load` with offsets to select elements");
            return None;
        }
        self.visit_expr_mut(&mut ix.expr);
        let mut out = ix.expr.to_token_stream();
        let expand = lang("expand_dims", sp);
        for (pos, e) in elems.iter().enumerate() {
            if is_none(e) {
                let pos = syn::LitInt::new(&pos.to_string(), sp);
                out = quote_spanned!(sp=> #expand(#out, #pos));
            }
        }
        Some(verbatim(out))
    }
}

/// An unsuffixed number on the left of an arithmetic or bitwise operator, with a right
/// operand that is not plain literal arithmetic: `1 / n`, `-0.5 * x`.
struct WeakLhs {
    /// `WeakInt` or `WeakFloat`.
    ty: &'static str,
    /// The literal, as `i128` or `f64` tokens.
    literal: TokenStream,
}

fn weak_lhs(b: &syn::ExprBinary) -> Option<WeakLhs> {
    let bits = match b.op {
        BinOp::Add(_) | BinOp::Sub(_) | BinOp::Mul(_) | BinOp::Div(_) | BinOp::Rem(_) => false,
        BinOp::BitAnd(_) | BinOp::BitOr(_) | BinOp::BitXor(_) => true,
        _ => return None,
    };
    if literal_arithmetic(&b.right) {
        return None;
    }
    let (mut e, mut negative) = (&*b.left, false);
    loop {
        match e {
            Expr::Paren(p) => e = &p.expr,
            Expr::Unary(u) if matches!(u.op, syn::UnOp::Neg(_)) => {
                negative = !negative;
                e = &u.expr;
            }
            _ => break,
        }
    }
    let Expr::Lit(l) = e else { return None };
    let sp = l.span();
    let sign = if negative {
        quote_spanned!(sp=> -)
    } else {
        TokenStream::new()
    };
    let (ty, literal) = match &l.lit {
        syn::Lit::Int(i) if i.suffix().is_empty() => {
            let digits = syn::LitInt::new(&format!("{}i128", i.base10_digits()), sp);
            ("WeakInt", quote_spanned!(sp=> #sign #digits))
        }
        syn::Lit::Float(f) if f.suffix().is_empty() => {
            let digits = syn::LitFloat::new(&format!("{}f64", f.base10_digits()), sp);
            ("WeakFloat", quote_spanned!(sp=> #sign #digits))
        }
        _ => return None,
    };
    if ty == "WeakFloat" && bits {
        return None;
    }
    Some(WeakLhs { ty, literal })
}

/// Literals combined by operators only (`2 * (3 + 4)`): plain Rust arithmetic.
fn literal_arithmetic(e: &Expr) -> bool {
    match e {
        Expr::Lit(_) => true,
        Expr::Paren(p) => literal_arithmetic(&p.expr),
        Expr::Unary(u) => literal_arithmetic(&u.expr),
        Expr::Binary(b) => literal_arithmetic(&b.left) && literal_arithmetic(&b.right),
        _ => false,
    }
}

impl VisitMut for Rewriter {
    fn visit_block_mut(&mut self, b: &mut Block) {
        promote_to_tiles(b, &self.plain);
        visit_mut::visit_block_mut(self, b);
    }

    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Some((span, msg)) = self.unsupported(e) {
            self.error(span, msg);
            // Keep looking for more errors inside.
            visit_mut::visit_expr_mut(self, e);
            return;
        }
        let replacement = match e {
            Expr::ForLoop(f) => self.rewrite_for(f),
            Expr::If(i) => Some(self.rewrite_if(i)),
            Expr::While(w) => Some(self.rewrite_while(w)),
            Expr::Break(b) => {
                self.check_jump(b.break_token.span, "break");
                None
            }
            Expr::Continue(c) => {
                self.check_jump(c.continue_token.span, "continue");
                None
            }
            Expr::Binary(b) => {
                let sp = b.left.span();
                if let Some(pred) = cmp_pred(&b.op) {
                    self.visit_expr_mut(&mut b.left);
                    self.visit_expr_mut(&mut b.right);
                    let (l, r) = (&b.left, &b.right);
                    let f = lang("compare", sp);
                    let pred = Ident::new(pred, sp);
                    Some(verbatim(
                        quote_spanned!(sp=> #f(#l, ::tritium::dsl::ir::CmpPred::#pred, #r)),
                    ))
                } else if let BinOp::And(_) | BinOp::Or(_) = b.op {
                    self.visit_expr_mut(&mut b.left);
                    self.visit_expr_mut(&mut b.right);
                    let (l, r) = (&b.left, &b.right);
                    let f = lang("logic", sp);
                    let is_and = matches!(b.op, BinOp::And(_));
                    Some(verbatim(quote_spanned!(sp=> #f(#l, #is_and, #r))))
                } else if let Some(weak) = weak_lhs(b) {
                    self.visit_expr_mut(&mut b.right);
                    let (op, r) = (&b.op, &b.right);
                    let (ty, lit) = (Ident::new(weak.ty, sp), weak.literal);
                    Some(verbatim(quote_spanned!(sp=>
                        (::tritium::dsl::trace::weak::#ty(#lit) #op #r)
                    )))
                } else {
                    visit_mut::visit_expr_binary_mut(self, b);
                    None
                }
            }
            Expr::Call(c) => {
                let name = bare_name(&c.func).cloned();
                match name {
                    Some(n) if builtins::lookup(&n.to_string()).is_some() => {
                        let b = builtins::lookup(&n.to_string()).expect("checked");
                        self.rewrite_builtin(b, c, n.span())
                    }
                    Some(n) if n == "custom" => self.rewrite_custom(c, n.span()),
                    Some(n) if n == "device_print" => self.rewrite_device_print(c, n.span()),
                    Some(n) if n == "static_range" => {
                        let f = flow("static_range", n.span());
                        *c.func = syn::parse2(f).expect("a path");
                        for a in c.args.iter_mut() {
                            self.visit_expr_mut(a);
                        }
                        None
                    }
                    _ => {
                        for a in c.args.iter() {
                            if let Some((kw, _)) = keyword_arg(a) {
                                let kw = kw.clone();
                                // `range`'s loop options are checked by `parse::range`.
                                let name = bare_name(&c.func).map(Ident::to_string);
                                if name.is_some_and(|n| n != "range") {
                                    self.error(
                                        kw.span(),
                                        format!(
                                            "keyword argument `{kw}` in a call that is not a kernel builtin; pass arguments by position"
                                        ),
                                    );
                                }
                            }
                        }
                        visit_mut::visit_expr_call_mut(self, c);
                        None
                    }
                }
            }
            // Triton's attributes `x.dtype` and `p.dtype.element_ty` are methods here.
            Expr::Field(f) if matches!(&f.member, syn::Member::Named(m) if m == "dtype" || m == "element_ty") =>
            {
                self.visit_expr_mut(&mut f.base);
                let (base, member) = (&f.base, &f.member);
                Some(verbatim(quote_spanned!(member.span()=> #base.#member())))
            }
            Expr::Index(ix) => match self.rewrite_index(ix) {
                Some(r) => Some(r),
                None => {
                    visit_mut::visit_expr_index_mut(self, ix);
                    None
                }
            },
            _ => {
                visit_mut::visit_expr_mut(self, e);
                None
            }
        };
        if let Some(r) = replacement {
            *e = r;
        }
    }

    fn visit_stmt_mut(&mut self, s: &mut Stmt) {
        match s {
            Stmt::Item(Item::Fn(f)) => self.error(
                f.sig.fn_token.span,
                "nested functions are not supported in kernel code; define a #[device] function outside",
            ),
            Stmt::Item(_) => {}
            Stmt::Local(l) => {
                if let Some(init) = &l.init {
                    if let Some((else_token, _)) = &init.diverge {
                        self.error(else_token.span, "`let … else` is not supported in kernel code; use `match`");
                    }
                }
                if let (None, Pat::Ident(pi)) = (&l.init, &l.pat) {
                    self.deferred.push(pi.ident.clone());
                }
                visit_mut::visit_local_mut(self, l);
            }
            _ => visit_mut::visit_stmt_mut(self, s),
        }
    }

    fn visit_item_mut(&mut self, _: &mut Item) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rewrite(src: &str) -> Result<String, String> {
        let mut b: Block = syn::parse_str(src).unwrap();
        rewrite_block(&mut b, FnKind::Kernel, &PlainNames::default()).map_err(|e| e.to_string())?;
        Ok(b.to_token_stream().to_string())
    }

    fn squash(s: &str) -> String {
        s.split_whitespace().collect()
    }

    #[test]
    fn comparisons_and_builtins() {
        let out =
            rewrite("{ let m = offs < n && x >= 0; let v = load(p + offs, mask = m); }").unwrap();
        assert!(squash(&out).contains(&squash(
            "::tritium::dsl::trace::lang::logic(::tritium::dsl::trace::lang::compare(offs, ::tritium::dsl::ir::CmpPred::Lt, n), true, ::tritium::dsl::trace::lang::compare(x, ::tritium::dsl::ir::CmpPred::Ge, 0))"
        )), "{out}");
        assert!(
            squash(&out).contains(&squash(&format!(
                "::tritium::dsl::trace::lang::load_with(p + offs, m{})",
                ", ::tritium::dsl::trace::lang::NoArg".repeat(6)
            ))),
            "{out}"
        );
    }

    #[test]
    fn index_sugar() {
        let out =
            rewrite("{ let y = x[(.., None)] + z[(None, ..)] + w[(None, .., None)]; }").unwrap();
        let s = squash(&out);
        assert!(s.contains("expand_dims(x,1)"), "{out}");
        assert!(s.contains("expand_dims(z,0)"), "{out}");
        assert!(
            s.contains("expand_dims(::tritium::dsl::trace::lang::expand_dims(w,0),2)"),
            "{out}"
        );
    }

    #[test]
    fn for_loop_carries() {
        let out = rewrite("{ let mut acc = zeros([4], F32); for k in 0..n { let t = load(p + k); acc = acc + t; } }").unwrap();
        assert!(squash(&out).contains(&squash(
            "(acc,) = ::tritium::dsl::trace::flow::for_range(0, n, 1, (acc,), |k, #[allow(unused_mut, unused_variables)] (mut acc,)|"
        )), "{out}");
        let out = rewrite("{ for k in range(0, n, 2) { store(p + k, 1); } }").unwrap();
        assert!(
            squash(&out).contains(&squash("for_range(0, n, 2, (), |k, ()|")),
            "{out}"
        );
        let out = rewrite("{ for k in static_range(0, 4) { s = s + k; } }").unwrap();
        assert!(
            squash(&out).contains(&squash(
                "for k in ::tritium::dsl::trace::flow::static_range(0, 4)"
            )),
            "{out}"
        );
    }

    #[test]
    fn literals_carried_by_runtime_loops_become_tiles() {
        let out = rewrite("{ let mut i = 0; let mut k = 0; while i < n { i += 1; } for _ in static_range(0, 2) { k += 1; } }").unwrap();
        let s = squash(&out);
        assert!(
            s.contains("letmuti=::tritium::dsl::trace::flow::tile_of(0);"),
            "{out}"
        );
        assert!(s.contains("letmutk=0;"), "{out}");
    }

    #[test]
    fn literals_on_the_left_take_the_right_operand_type() {
        let table: &[(&str, &str)] = &[
            ("1 / n", "(::tritium::dsl::trace::weak::WeakInt(1i128) / n)"),
            (
                "-(0.5) * x",
                "(::tritium::dsl::trace::weak::WeakFloat(-0.5f64) * x)",
            ),
            ("3 & m", "(::tritium::dsl::trace::weak::WeakInt(3i128) & m)"),
            ("2 * (3 + 4)", "2*(3+4)"),
            ("2i32 * n", "2i32*n"),
            ("x * 2", "x*2"),
            ("1 << n", "1<<n"),
            ("1.5 & n", "1.5&n"),
        ];
        for (src, want) in table {
            let out = rewrite(&format!("{{ let y = {src}; }}")).unwrap();
            assert!(squash(&out).contains(&squash(want)), "{src}: {out}");
        }
    }

    #[test]
    fn triton_attributes_are_method_calls() {
        let out = rewrite("{ let d = p.dtype.element_ty; let e = x.dtype; let f = t.0; }").unwrap();
        let s = squash(&out);
        assert!(s.contains("letd=p.dtype().element_ty();"), "{out}");
        assert!(
            s.contains("lete=x.dtype();") && s.contains("letf=t.0;"),
            "{out}"
        );
    }

    #[test]
    fn if_and_while() {
        let out = rewrite("{ if x > 0 { a = 1; } else if y { b = 2; } }").unwrap();
        assert!(
            squash(&out).contains(&squash(
                "let (__r, __c, __f) = ::tritium::dsl::trace::flow::if_else("
            )),
            "{out}"
        );
        assert!(squash(&out).contains("{(a,b,)=__c;}"), "{out}");
        // A deferred `let m;` is declared in each branch and given its value by the `if`.
        let out = rewrite("{ let m; if x > 0 { m = 1; } else { m = 2; } }").unwrap();
        assert!(
            squash(&out).contains("|#[allow(unused_mut,unused_variables)]()|{letm;"),
            "{out}"
        );
        assert!(squash(&out).contains("(m,)=__f;"), "{out}");
        let out = rewrite("{ while i < n { i = i + 1; } }").unwrap();
        assert!(
            squash(&out).contains(&squash(
                "(i,) = ::tritium::dsl::trace::flow::while_loop((i,),"
            )),
            "{out}"
        );
    }

    #[test]
    fn errors() {
        let table: &[(&str, &str)] = &[
            ("{ loop {} }", "`loop` is not supported"),
            ("{ for i in 0..n { return; } }", "`return` inside a loop is not supported"),
            ("{ let f = |x| x; }", "closures are not supported"),
            ("{ for i in 0..n { break; } }", "`break` is not supported in a kernel loop; use a mask or a `while` with a condition"),
            ("{ for i in static_range(0, 2) { continue; } }", ""),
            ("{ for i in static_range(0, 2) { if c { break; } } }", "`break` is not supported inside a kernel `if`"),
            ("{ if let Some(x) = y {} }", "`if let` is not supported"),
            ("{ while let Some(x) = y {} }", "`while let` is not supported"),
            ("{ let x = f()?; }", "the `?` operator is not supported"),
            ("{ unsafe {} }", "`unsafe` is not supported"),
            ("{ fn g() {} }", "nested functions are not supported"),
            ("{ 'a: { 1 } }", "labeled blocks are not supported"),
            ("{ maximum(a, b, c, d); }", "`maximum` takes 2 to 3 arguments (a, b, propagate_nan), got 4"),
            ("{ x[(0, None)]; }", "tile indexing takes only"),
            ("{ helper(a, mask = m); }", "keyword argument `mask` in a call that is not a kernel builtin"),
        ];
        for (src, want) in table {
            match rewrite(src) {
                Ok(out) => assert!(want.is_empty(), "{src}: expected an error, got {out}"),
                Err(e) => assert!(!want.is_empty() && e.contains(want), "{src}: got {e}"),
            }
        }
    }
}
