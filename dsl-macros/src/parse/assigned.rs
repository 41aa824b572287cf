//! Assigned-variable analysis: which variables declared *outside* a statement does the
//! statement assign? Those become the loop-carried values of a runtime `for`/`while` and
//! the results of a runtime `if`.
//!
//! The analysis is scoped and runs in source order: a `let` (or a loop/arm/closure
//! pattern) declares a name in the innermost scope from that point on, so assignments
//! after it are local, and assignments before it still reach the outer variable.
//! An assignment to a place (`x.0 = …`, `x[i] = …`, `(a, b) = …`) assigns its root
//! variables. `name = value` directly inside a call's argument list is a keyword argument
//! (`load(p, mask = m)`), not an assignment. Macro bodies and nested items are opaque.

use proc_macro2::Ident;
use std::collections::HashSet;
use syn::visit::{self, Visit};
use syn::{
    Arm, BinOp, Block, Expr, ExprAssign, ExprBinary, ExprCall, ExprClosure, ExprForLoop,
    ExprMethodCall, Local, Pat,
};

/// The outer variables `block` assigns, in order of first assignment.
pub fn assigned_in_block(block: &Block) -> Vec<Ident> {
    let mut a = Analysis::default();
    a.visit_block(block);
    a.out
}

/// The outer variables `expr` assigns, in order of first assignment.
pub fn assigned_in_expr(expr: &Expr) -> Vec<Ident> {
    let mut a = Analysis::default();
    a.visit_expr(expr);
    a.out
}

/// The outer variables either branch of `i` assigns (its condition aside).
pub fn assigned_in_if(i: &syn::ExprIf) -> Vec<Ident> {
    merge([
        assigned_in_block(&i.then_branch),
        i.else_branch
            .as_ref()
            .map(|(_, e)| assigned_in_expr(e))
            .unwrap_or_default(),
    ])
}

/// Variables assigned by a `for` loop with pattern `pat` and `body`: the loop pattern
/// binds fresh names for the body.
pub fn assigned_in_loop(pat: &Pat, body: &Block) -> Vec<Ident> {
    let mut a = Analysis::default();
    a.scopes.push(HashSet::new());
    a.declare(pat);
    a.visit_block(body);
    a.out
}

/// Merges several assigned lists (e.g. the branches of an `if`), keeping first-seen order.
pub fn merge(lists: impl IntoIterator<Item = Vec<Ident>>) -> Vec<Ident> {
    let mut seen = HashSet::new();
    let mut out = Vec::new();
    for list in lists {
        for id in list {
            if seen.insert(id.to_string()) {
                out.push(id);
            }
        }
    }
    out
}

/// The names a pattern binds.
pub fn pattern_bindings(pat: &Pat) -> Vec<Ident> {
    struct Bindings(Vec<Ident>);
    impl<'a> Visit<'a> for Bindings {
        fn visit_pat_ident(&mut self, p: &'a syn::PatIdent) {
            self.0.push(p.ident.clone());
            visit::visit_pat_ident(self, p);
        }
        // Paths in patterns (`Some(x)`, `Mode::A`) bind nothing; only visit sub-patterns.
        fn visit_expr(&mut self, _: &'a Expr) {}
    }
    let mut b = Bindings(Vec::new());
    b.visit_pat(pat);
    b.0
}

/// True when every path through `block` assigns `name` (as Rust's definite-initialization
/// check sees it, for the statements kernel code uses: assignments, `if`/`else` with both
/// branches assigning, `match` with every arm assigning, blocks; loops may not run).
pub fn definitely_assigns(block: &Block, name: &Ident) -> bool {
    for s in &block.stmts {
        match s {
            syn::Stmt::Local(l) => {
                if l.init.as_ref().is_some_and(|i| expr_assigns(&i.expr, name)) {
                    return true;
                }
                if pattern_bindings(&l.pat).contains(name) {
                    return false;
                }
            }
            syn::Stmt::Expr(e, _) if expr_assigns(e, name) => return true,
            _ => {}
        }
    }
    false
}

/// True when every path through `e` assigns `name`.
pub fn expr_assigns(e: &Expr, name: &Ident) -> bool {
    match e {
        Expr::Assign(a) => place_is(&a.left, name) || expr_assigns(&a.right, name),
        Expr::If(i) => {
            expr_assigns(&i.cond, name)
                || (definitely_assigns(&i.then_branch, name)
                    && i.else_branch
                        .as_ref()
                        .is_some_and(|(_, e)| expr_assigns(e, name)))
        }
        Expr::Match(m) => {
            expr_assigns(&m.expr, name)
                || (!m.arms.is_empty() && m.arms.iter().all(|a| expr_assigns(&a.body, name)))
        }
        Expr::Block(b) => definitely_assigns(&b.block, name),
        Expr::Paren(p) => expr_assigns(&p.expr, name),
        // A `return`, `break` or `continue` never reaches what follows.
        Expr::Return(_) | Expr::Break(_) | Expr::Continue(_) => true,
        _ => false,
    }
}

/// True when assigning to `place` assigns `name` (`name`, or a tuple holding it).
fn place_is(place: &Expr, name: &Ident) -> bool {
    match place {
        Expr::Path(p) => p.path.is_ident(name),
        Expr::Tuple(t) => t.elems.iter().any(|e| place_is(e, name)),
        Expr::Paren(p) => place_is(&p.expr, name),
        _ => false,
    }
}

#[derive(Default)]
struct Analysis {
    /// Names declared inside the analysed statement, innermost scope last.
    scopes: Vec<HashSet<String>>,
    out: Vec<Ident>,
    seen: HashSet<String>,
}

impl Analysis {
    fn declare(&mut self, pat: &Pat) {
        let names = pattern_bindings(pat);
        let scope = self
            .scopes
            .last_mut()
            .expect("a scope is open when declaring");
        scope.extend(names.into_iter().map(|n| n.to_string()));
    }

    fn is_local(&self, name: &str) -> bool {
        self.scopes.iter().any(|s| s.contains(name))
    }

    fn assign(&mut self, id: &Ident) {
        let name = id.to_string();
        if !self.is_local(&name) && self.seen.insert(name) {
            self.out.push(id.clone());
        }
    }

    /// Records the root variables of an assigned place and visits the expressions inside it
    /// (indices, method receivers) as reads.
    fn place(&mut self, e: &Expr) {
        match e {
            Expr::Path(p)
                if p.qself.is_none()
                    && p.path.segments.len() == 1
                    && p.path.leading_colon.is_none() =>
            {
                self.assign(&p.path.segments[0].ident)
            }
            Expr::Field(f) => self.place(&f.base),
            Expr::Index(i) => {
                self.place(&i.expr);
                self.visit_expr(&i.index);
            }
            Expr::Paren(p) => self.place(&p.expr),
            Expr::Tuple(t) => t.elems.iter().for_each(|e| self.place(e)),
            Expr::Array(a) => a.elems.iter().for_each(|e| self.place(e)),
            Expr::Unary(u) => self.place(&u.expr),
            Expr::Infer(_) => {}
            other => self.visit_expr(other),
        }
    }

    fn with_scope(&mut self, f: impl FnOnce(&mut Self)) {
        self.scopes.push(HashSet::new());
        f(self);
        self.scopes.pop();
    }
}

fn is_compound_assign(op: &BinOp) -> bool {
    matches!(
        op,
        BinOp::AddAssign(_)
            | BinOp::SubAssign(_)
            | BinOp::MulAssign(_)
            | BinOp::DivAssign(_)
            | BinOp::RemAssign(_)
            | BinOp::BitXorAssign(_)
            | BinOp::BitAndAssign(_)
            | BinOp::BitOrAssign(_)
            | BinOp::ShlAssign(_)
            | BinOp::ShrAssign(_)
    )
}

/// `name = value` as a call argument: a keyword argument.
pub fn keyword_arg(e: &Expr) -> Option<(&Ident, &Expr)> {
    let Expr::Assign(ExprAssign {
        left, right, attrs, ..
    }) = e
    else {
        return None;
    };
    if !attrs.is_empty() {
        return None;
    }
    match &**left {
        Expr::Path(p) if p.qself.is_none() && p.path.leading_colon.is_none() => {
            p.path.get_ident().map(|id| (id, &**right))
        }
        _ => None,
    }
}

impl<'a> Visit<'a> for Analysis {
    fn visit_block(&mut self, b: &'a Block) {
        self.with_scope(|a| visit::visit_block(a, b));
    }

    fn visit_local(&mut self, l: &'a Local) {
        if let Some(init) = &l.init {
            self.visit_expr(&init.expr);
            if let Some((_, diverge)) = &init.diverge {
                self.visit_expr(diverge);
            }
        }
        if self.scopes.is_empty() {
            // A bare `let` analysed on its own: it declares into a scope of its own.
            self.scopes.push(HashSet::new());
        }
        self.declare(&l.pat);
    }

    fn visit_expr_assign(&mut self, e: &'a ExprAssign) {
        self.visit_expr(&e.right);
        self.place(&e.left);
    }

    fn visit_expr_binary(&mut self, e: &'a ExprBinary) {
        if is_compound_assign(&e.op) {
            self.visit_expr(&e.right);
            self.place(&e.left);
        } else {
            visit::visit_expr_binary(self, e);
        }
    }

    fn visit_expr_call(&mut self, e: &'a ExprCall) {
        self.visit_expr(&e.func);
        for arg in &e.args {
            match keyword_arg(arg) {
                Some((_, value)) => self.visit_expr(value),
                None => self.visit_expr(arg),
            }
        }
    }

    fn visit_expr_method_call(&mut self, e: &'a ExprMethodCall) {
        self.visit_expr(&e.receiver);
        for arg in &e.args {
            match keyword_arg(arg) {
                Some((_, value)) => self.visit_expr(value),
                None => self.visit_expr(arg),
            }
        }
    }

    fn visit_expr_for_loop(&mut self, e: &'a ExprForLoop) {
        self.visit_expr(&e.expr);
        self.with_scope(|a| {
            a.declare(&e.pat);
            a.visit_block(&e.body);
        });
    }

    fn visit_expr_closure(&mut self, e: &'a ExprClosure) {
        self.with_scope(|a| {
            for p in &e.inputs {
                a.declare(p);
            }
            a.visit_expr(&e.body);
        });
    }

    fn visit_arm(&mut self, arm: &'a Arm) {
        self.with_scope(|a| {
            a.declare(&arm.pat);
            if let Some((_, guard)) = &arm.guard {
                a.visit_expr(guard);
            }
            a.visit_expr(&arm.body);
        });
    }

    fn visit_expr_let(&mut self, e: &'a syn::ExprLet) {
        // `if let` is rejected elsewhere; its bindings are local to the branch.
        self.visit_expr(&e.expr);
    }

    fn visit_item(&mut self, _: &'a syn::Item) {}
    fn visit_macro(&mut self, _: &'a syn::Macro) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(ids: Vec<Ident>) -> Vec<String> {
        ids.into_iter().map(|i| i.to_string()).collect()
    }

    /// `(source of a block, expected carried variables)`.
    #[test]
    fn assigned_variables() {
        let table: &[(&str, &[&str])] = &[
            ("{}", &[]),
            ("{ x = 1; }", &["x"]),
            ("{ x += 1; y -= x; x *= 2; }", &["x", "y"]),
            ("{ let x = 0; x = 1; }", &[]),
            ("{ x = 1; let x = 0; x = 2; }", &["x"]),
            ("{ let x = x + 1; }", &[]),
            ("{ { let a = 0; a = 1; } a = 2; }", &["a"]),
            (
                "{ if c { acc = acc + 1; } else { other = 2; } }",
                &["acc", "other"],
            ),
            ("{ for i in 0..n { acc += i; i = 3; } }", &["acc"]),
            (
                "{ for k in static_range(0, 4) { let t = load(p); s = s + t; } }",
                &["s"],
            ),
            ("{ while i < n { i = i + 1; } }", &["i"]),
            ("{ (a, b) = (b, a); }", &["a", "b"]),
            ("{ (a, _) = f(); }", &["a"]),
            ("{ arr[i] = 1; }", &["arr"]),
            ("{ pair.0 = 1; }", &["pair"]),
            ("{ let x = load(p, mask = m, other = 0.0); }", &[]),
            ("{ store(p, v, mask = m); }", &[]),
            ("{ y = load(p, mask = m); }", &["y"]),
            (
                "{ match k { 0 => { a = 1; } n => { n = 2; b = n; } } }",
                &["a", "b"],
            ),
            ("{ let (p, mut q) = (1, 2); q = 3; r = p; }", &["r"]),
            ("{ let Some(v) = o else { return }; v = 1; }", &[]),
            ("{ println!(\"{}\", { x = 1; x }); }", &[]),
            ("{ fn inner() { z = 1; } }", &[]),
            ("{ b = 1; a = 2; b = 3; }", &["b", "a"]),
        ];
        for (src, want) in table {
            let block: Block = syn::parse_str(src).unwrap_or_else(|e| panic!("{src}: {e}"));
            assert_eq!(names(assigned_in_block(&block)), *want, "block {src}");
        }
    }

    #[test]
    fn loop_pattern_is_local() {
        let body: Block = syn::parse_str("{ i = i + 1; (j, acc) = (1, acc + i); }").unwrap();
        let pat: Pat = Pat::parse_single.parse_str("(i, j)").unwrap();
        assert_eq!(names(assigned_in_loop(&pat, &body)), ["acc"]);
    }

    #[test]
    fn if_branches_merge_in_order() {
        let e: Expr = syn::parse_str(
            "if c { b = 1; a = 2; } else if d { c2 = 3; b = 4; } else { let a = 0; a = 5; }",
        )
        .unwrap();
        let Expr::If(i) = e else { panic!() };
        let then = assigned_in_block(&i.then_branch);
        let els = assigned_in_expr(&i.else_branch.unwrap().1);
        assert_eq!(names(merge([then, els])), ["b", "a", "c2"]);
    }

    use syn::parse::Parser;
}
