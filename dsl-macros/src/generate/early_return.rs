//! `return` anywhere in a kernel or `#[device]` body, lowered before the body is rewritten:
//! what follows an `if` (or `match`, or block) holding a `return` moves into the branches
//! that do not return, so each `return` ends its branch and its value becomes the branch's
//! value. Both kinds of `if` work: a constexpr one picks its branch while tracing, a
//! runtime one becomes an IR `if` whose other branch holds the rest of the kernel.
//!
//! The lowered statement is the last of its block, so nothing after it reads what it
//! assigns: it is marked [`TAIL`] and carries nothing out. As in Triton, a `return` inside
//! a loop is refused.

use crate::parse::assigned::pattern_bindings;
use proc_macro2::{Ident, Span, TokenStream, TokenTree};
use quote::ToTokens;
use std::collections::HashSet;
use syn::visit::{self, Visit};
use syn::{parse_quote, Block, Error, Expr, ExprIf, Stmt};

/// The marker attribute on an `if` that ends its block after lowering.
pub const TAIL: &str = "tritium_tail_if";

/// Lowers every `return` of `block` (a function body).
pub fn lower_returns(block: &mut Block) -> Result<(), Error> {
    if find_return(&Expr::Block(syn::ExprBlock {
        attrs: Vec::new(),
        label: None,
        block: block.clone(),
    }))
    .is_none()
    {
        return Ok(());
    }
    let stmts = std::mem::take(&mut block.stmts);
    block.stmts = lower(stmts, &[])?;
    Ok(())
}

/// Where a `return` sits, if `e` holds one (closures and nested items are their own
/// functions).
#[derive(Debug, Clone, Copy)]
struct Found {
    span: Span,
    in_loop: bool,
}

fn find_return(e: &Expr) -> Option<Found> {
    struct Find {
        loops: usize,
        found: Option<Found>,
    }
    impl<'a> Visit<'a> for Find {
        fn visit_expr_return(&mut self, r: &'a syn::ExprReturn) {
            if self.found.is_none() {
                self.found = Some(Found {
                    span: r.return_token.span,
                    in_loop: self.loops > 0,
                });
            }
        }
        fn visit_expr_for_loop(&mut self, f: &'a syn::ExprForLoop) {
            self.loops += 1;
            visit::visit_expr_for_loop(self, f);
            self.loops -= 1;
        }
        fn visit_expr_while(&mut self, w: &'a syn::ExprWhile) {
            self.loops += 1;
            visit::visit_expr_while(self, w);
            self.loops -= 1;
        }
        fn visit_expr_loop(&mut self, l: &'a syn::ExprLoop) {
            self.loops += 1;
            visit::visit_expr_loop(self, l);
            self.loops -= 1;
        }
        fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'a syn::Item) {}
        fn visit_macro(&mut self, _: &'a syn::Macro) {}
    }
    let mut f = Find {
        loops: 0,
        found: None,
    };
    f.visit_expr(e);
    f.found
}

fn stmt_return(s: &Stmt) -> Option<Found> {
    match s {
        Stmt::Expr(e, _) => find_return(e),
        Stmt::Local(l) => l.init.as_ref().and_then(|i| {
            find_return(&i.expr).or_else(|| i.diverge.as_ref().and_then(|d| find_return(&d.1)))
        }),
        Stmt::Item(_) | Stmt::Macro(_) => None,
    }
}

/// Statements moved after an `if` that returns, with the names of the `let`s they were
/// moved past (which could shadow what they read).
#[derive(Clone)]
struct Moved {
    stmts: Vec<Stmt>,
    past: Vec<Ident>,
}

/// `prefix` followed by `rest`, with the `return`s of `prefix` lowered: `rest` runs only
/// on the paths of `prefix` that do not return.
fn lower(prefix: Vec<Stmt>, rest: &[Moved]) -> Result<Vec<Stmt>, Error> {
    let Some(i) = prefix.iter().position(|s| stmt_return(s).is_some()) else {
        // `prefix` runs whole; then the first moved statements, themselves lowered with
        // the others after them.
        let bound = let_bindings(&prefix);
        let mut out = prefix;
        if let Some((first, others)) = rest.split_first() {
            let past: Vec<Ident> = first.past.iter().chain(&bound).cloned().collect();
            check_shadowing(&past, &first.stmts)?;
            let others: Vec<Moved> = others
                .iter()
                .map(|m| Moved {
                    stmts: m.stmts.clone(),
                    past: m.past.iter().chain(&bound).cloned().collect(),
                })
                .collect();
            out.extend(lower(first.stmts.clone(), &others)?);
        }
        return Ok(out);
    };
    let found = stmt_return(&prefix[i]).expect("found above");
    if found.in_loop {
        return Err(Error::new(
            found.span,
            "`return` inside a loop is not supported (nor in Triton); end the loop with a \
             `while` condition and return after it",
        ));
    }
    let before = let_bindings(&prefix[..i]);
    let mut after = vec![Moved {
        stmts: prefix[i + 1..].to_vec(),
        past: Vec::new(),
    }];
    after.extend(rest.iter().map(|m| Moved {
        stmts: m.stmts.clone(),
        past: m.past.iter().chain(&before).cloned().collect(),
    }));
    let mut out: Vec<Stmt> = prefix[..i].to_vec();
    match &prefix[i] {
        Stmt::Expr(Expr::Return(r), _) => {
            // What follows a `return` is unreachable.
            if let Some(value) = &r.expr {
                out.push(Stmt::Expr((**value).clone(), None));
            }
        }
        Stmt::Expr(Expr::If(e), _) => out.push(Stmt::Expr(Expr::If(lower_if(e, &after)?), None)),
        Stmt::Expr(Expr::Match(m), _) => {
            let mut m = m.clone();
            for arm in &mut m.arms {
                let stmts = lower(branch_stmts(&arm.body), &after)?;
                *arm.body = block_expr(stmts);
            }
            out.push(Stmt::Expr(Expr::Match(m), None));
        }
        Stmt::Expr(Expr::Block(b), _) if b.label.is_none() && b.attrs.is_empty() => {
            out.extend(lower(b.block.stmts.clone(), &after)?);
        }
        _ => {
            return Err(Error::new(
                found.span,
                "`return` is supported as a statement, in the branches of an `if` or `match` \
                 statement and in blocks; not inside an expression",
            ))
        }
    }
    Ok(out)
}

/// `if c { A } else { B }` followed by `rest` → `if c { A; rest } else { B; rest }`, each
/// lowered (a branch that returns drops `rest`).
fn lower_if(e: &ExprIf, rest: &[Moved]) -> Result<ExprIf, Error> {
    let then = lower(e.then_branch.stmts.clone(), rest)?;
    let otherwise = match &e.else_branch {
        None => lower(Vec::new(), rest)?,
        Some((_, other)) => lower(branch_stmts(other), rest)?,
    };
    let mut e = e.clone();
    e.then_branch.stmts = then;
    let else_block = block_expr(otherwise);
    e.else_branch = Some((parse_quote!(else), Box::new(else_block)));
    let tail = Ident::new(TAIL, e.if_token.span);
    e.attrs.push(parse_quote!(#[#tail]));
    Ok(e)
}

/// The names the `let`s of `stmts` bind.
fn let_bindings(stmts: &[Stmt]) -> Vec<Ident> {
    stmts
        .iter()
        .filter_map(|s| match s {
            Stmt::Local(l) => Some(pattern_bindings(&l.pat)),
            _ => None,
        })
        .flatten()
        .collect()
}

/// The statements of a branch: a block's, or the expression (`else if …`, an arm's value)
/// as the one statement.
fn branch_stmts(e: &Expr) -> Vec<Stmt> {
    match e {
        Expr::Block(b) if b.label.is_none() && b.attrs.is_empty() => b.block.stmts.clone(),
        e => vec![Stmt::Expr(e.clone(), None)],
    }
}

fn block_expr(stmts: Vec<Stmt>) -> Expr {
    Expr::Block(syn::ExprBlock {
        attrs: Vec::new(),
        label: None,
        block: Block {
            brace_token: Default::default(),
            stmts,
        },
    })
}

/// Moving `rest` past the `let`s binding `bound` would let one of them shadow a variable
/// `rest` reads, and change what it computes.
fn check_shadowing(bound: &[Ident], rest: &[Stmt]) -> Result<(), Error> {
    if bound.is_empty() {
        return Ok(());
    }
    let mut redeclared: HashSet<String> = HashSet::new();
    for s in rest {
        let read = match s {
            Stmt::Local(l) => l
                .init
                .as_ref()
                .map(|i| i.expr.to_token_stream())
                .unwrap_or_default(),
            s => s.to_token_stream(),
        };
        let mut names = HashSet::new();
        idents(read, &mut names);
        if let Some(b) = bound
            .iter()
            .find(|b| names.contains(&b.to_string()) && !redeclared.contains(&b.to_string()))
        {
            return Err(Error::new(
                b.span(),
                format!(
                    "`{b}` shadows a variable that the code after this branch reads, and an \
                     early `return` moves that code into this branch; rename `{b}`"
                ),
            ));
        }
        if let Stmt::Local(l) = s {
            redeclared.extend(pattern_bindings(&l.pat).iter().map(|i| i.to_string()));
        }
    }
    Ok(())
}

fn idents(tokens: TokenStream, out: &mut HashSet<String>) {
    for t in tokens {
        match t {
            TokenTree::Ident(i) => {
                out.insert(i.to_string());
            }
            TokenTree::Group(g) => idents(g.stream(), out),
            _ => {}
        }
    }
}

/// Removes the [`TAIL`] marker from `attrs`; true when it was there.
pub fn take_tail_marker(attrs: &mut Vec<syn::Attribute>) -> bool {
    let before = attrs.len();
    attrs.retain(|a| !a.path().is_ident(TAIL));
    attrs.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lowered(src: &str) -> Result<String, String> {
        let mut b: Block = syn::parse_str(src).unwrap();
        lower_returns(&mut b).map_err(|e| e.to_string())?;
        Ok(b.to_token_stream().to_string().split_whitespace().collect())
    }

    #[test]
    fn table() {
        let cases: &[(&str, Result<&str, &str>)] = &[
            (
                "{ let a = 1; if c { return; } store(a); }",
                Ok("{leta=1;#[tritium_tail_if]ifc{}else{store(a);}}"),
            ),
            (
                "{ if c { x = 1; } else if d { return; } store(x); }",
                Ok("{#[tritium_tail_if]ifc{x=1;store(x);}else{#[tritium_tail_if]ifd{}else{store(x);}}}"),
            ),
            (
                "{ if c { return a; } b }",
                Ok("{#[tritium_tail_if]ifc{a}else{b}}"),
            ),
            (
                "{ match K { 0 => return a, _ => {} } b }",
                Ok("{matchK{0=>{a},_=>{b}}}"),
            ),
            ("{ { f(); return; } g(); }", Ok("{f();}")),
            (
                "{ if a { return; } if b { return; } f(); }",
                Ok("{#[tritium_tail_if]ifa{}else{#[tritium_tail_if]ifb{}else{f();}}}"),
            ),
            ("{ for i in range(0, n) { if c { return; } } }", Err("`return` inside a loop")),
            ("{ let x = if c { return; } else { 1 }; }", Err("not inside an expression")),
            (
                "{ let v = 1; if c { let v = 2; if d { return; } } store(v); }",
                Err("`v` shadows a variable"),
            ),
            (
                "{ if c { let v = 2; store(v); return; } let v = 1; store(v); }",
                Ok("{#[tritium_tail_if]ifc{letv=2;store(v);}else{letv=1;store(v);}}"),
            ),
            ("{ let f = |x| { return x; }; }", Ok("{letf=|x|{returnx;};}")),
        ];
        for (src, want) in cases {
            match (lowered(src), want) {
                (Ok(got), Ok(want)) => assert_eq!(&got, want, "{src}"),
                (Err(got), Err(want)) => assert!(got.contains(want), "{src}: {got}"),
                (got, want) => panic!("{src}: got {got:?}, want {want:?}"),
            }
        }
    }
}
