//! Plain Rust variables that kernel control flow turns into tiles, as Triton turns a Python
//! number into a tensor when a loop or a runtime `if` assigns it one:
//!
//! ```ignore
//! let mut m = f32::NEG_INFINITY;   // → tile_of(f32::NEG_INFINITY)
//! let mut d = 0.0;                 // → tile_of(0.0)
//! for start in range(0, n, BLOCK) { let b = load(…); m = maximum(m, max(b, 0)); d = … }
//! ```
//!
//! A `let mut x = <plain value>` is promoted when a later runtime loop assigns `x`, or a
//! later `if` whose condition reads a runtime value assigns it; its later assignments then
//! go through `tile_of` too, so `x = 1.0` in a branch still type-checks. Which values are
//! plain is judged from the syntax: literals, `f32::MAX`-style constants, constexpr
//! parameters (and a `#[device]` function's non-`Tile` ones), UPPER_CASE names, and locals
//! computed from those alone.

use super::body::flow as flow_path;
use crate::parse::assigned::{
    assigned_in_block, assigned_in_expr, assigned_in_if, assigned_in_loop, merge, pattern_bindings,
};
use crate::parse::builtins;
use crate::parse::range::classify;
use proc_macro2::{Ident, TokenStream, TokenTree};
use quote::ToTokens;
use std::collections::HashSet;
use syn::spanned::Spanned;
use syn::visit::Visit;
use syn::visit_mut::VisitMut;
use syn::{Block, Expr, ExprForLoop, ExprIf, ExprWhile, Item, Pat, Stmt};

/// Names known to hold plain Rust values where a body starts: constexpr parameters, const
/// generics, a `#[device]` function's parameters of plain types.
#[derive(Debug, Clone, Default)]
pub struct PlainNames(HashSet<String>);

impl PlainNames {
    /// From the names of the plain parameters.
    pub fn new<'a>(names: impl IntoIterator<Item = &'a Ident>) -> PlainNames {
        PlainNames(names.into_iter().map(Ident::to_string).collect())
    }

    fn contains(&self, name: &str) -> bool {
        self.0.contains(name)
    }
}

/// Rust's primitive types: `f32::MAX` is a constant, `x as f32` a conversion.
const PRIMITIVES: &[&str] = &[
    "bool", "i8", "i16", "i32", "i64", "i128", "isize", "u8", "u16", "u32", "u64", "u128", "usize",
    "f32", "f64",
];

/// Keywords inside expressions (`if N > 2 { 1 } else { 2 }`).
const KEYWORDS: &[&str] = &[
    "as", "true", "false", "if", "else", "match", "let", "mut", "ref", "move", "in", "for",
    "while", "loop", "break", "continue", "return", "self", "Self", "crate", "super",
];

/// Builtins computed on the host from plain values.
const HOST_BUILTINS: &[&str] = &["cdiv", "next_power_of_2"];

/// True when `e` reads plain values only (see the module docs).
fn plain(e: &Expr, names: &PlainNames) -> bool {
    plain_tokens(e.to_token_stream(), names)
}

fn plain_tokens(tokens: TokenStream, names: &PlainNames) -> bool {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    for (i, t) in tokens.iter().enumerate() {
        let next_is =
            |c: char| matches!(tokens.get(i + 1), Some(TokenTree::Punct(p)) if p.as_char() == c);
        let prev_is_dot =
            i > 0 && matches!(&tokens[i - 1], TokenTree::Punct(p) if p.as_char() == '.');
        match t {
            TokenTree::Group(g) if !plain_tokens(g.stream(), names) => return false,
            TokenTree::Ident(id) => {
                let s = id.to_string();
                let call = matches!(tokens.get(i + 1), Some(TokenTree::Group(g)) if g.delimiter() == proc_macro2::Delimiter::Parenthesis);
                if prev_is_dot || next_is(':') || KEYWORDS.contains(&s.as_str()) {
                    continue;
                }
                if call {
                    if builtins::lookup(&s).is_some() && !HOST_BUILTINS.contains(&s.as_str()) {
                        return false;
                    }
                    continue;
                }
                let upper = s.chars().any(|c| c.is_ascii_uppercase())
                    && !s.chars().any(|c| c.is_ascii_lowercase());
                if !(upper || names.contains(&s) || PRIMITIVES.contains(&s.as_str())) {
                    return false;
                }
            }
            _ => {}
        }
    }
    true
}

/// A value `tile_of` takes: a number or bool built from plain values, not a path such as
/// `DType::F32` (a `f32::MAX`-style constant is one).
fn promotable(e: &Expr, names: &PlainNames) -> bool {
    let numeric_path = |p: &syn::ExprPath| {
        p.path.segments.len() == 1
            || PRIMITIVES.contains(&p.path.segments[0].ident.to_string().as_str())
    };
    let mut paths_ok = true;
    struct Paths<'a>(&'a mut bool, &'a dyn Fn(&syn::ExprPath) -> bool);
    impl<'v> Visit<'v> for Paths<'_> {
        fn visit_expr_path(&mut self, p: &'v syn::ExprPath) {
            if !(self.1)(p) {
                *self.0 = false;
            }
        }
    }
    Paths(&mut paths_ok, &numeric_path).visit_expr(e);
    paths_ok && !matches!(e, Expr::Tuple(_) | Expr::Array(_)) && plain(e, names)
}

/// True when `stmt` holds a runtime loop, or an `if` on a runtime value, that assigns
/// `name`.
fn assigned_under_runtime_flow(stmt: &Stmt, name: &Ident, names: &PlainNames) -> bool {
    struct Find<'n> {
        name: &'n Ident,
        names: &'n PlainNames,
        found: bool,
    }
    impl<'a> Visit<'a> for Find<'_> {
        fn visit_expr_for_loop(&mut self, f: &'a ExprForLoop) {
            if matches!(classify(&f.expr), Ok(Some(_)))
                && assigned_in_loop(&f.pat, &f.body).contains(self.name)
            {
                self.found = true;
            }
            syn::visit::visit_expr_for_loop(self, f);
        }
        fn visit_expr_while(&mut self, w: &'a ExprWhile) {
            if merge([assigned_in_expr(&w.cond), assigned_in_block(&w.body)]).contains(self.name) {
                self.found = true;
            }
            syn::visit::visit_expr_while(self, w);
        }
        fn visit_expr_if(&mut self, i: &'a ExprIf) {
            if assigned_in_if(i).contains(self.name) && !plain(&i.cond, self.names) {
                self.found = true;
            }
            syn::visit::visit_expr_if(self, i);
        }
        fn visit_expr_closure(&mut self, _: &'a syn::ExprClosure) {}
        fn visit_item(&mut self, _: &'a Item) {}
        fn visit_macro(&mut self, _: &'a syn::Macro) {}
    }
    let mut f = Find {
        name,
        names,
        found: false,
    };
    f.visit_stmt(stmt);
    f.found
}

/// `e` → `tile_of(e)`, as a call the body rewriter still looks into.
fn wrap_in_tile_of(e: &mut Expr) {
    let sp = e.span();
    let func: Expr = syn::parse2(flow_path("tile_of", sp)).expect("a path");
    let inner = std::mem::replace(e, Expr::Verbatim(TokenStream::new()));
    *e = Expr::Call(syn::ExprCall {
        attrs: Vec::new(),
        func: Box::new(func),
        paren_token: Default::default(),
        args: std::iter::once(inner).collect(),
    });
}

/// Wraps every assignment `name = value` in `tile_of`, up to a `let` that shadows `name`.
struct WrapAssignments<'n> {
    name: &'n Ident,
    shadowed: bool,
}

impl VisitMut for WrapAssignments<'_> {
    fn visit_block_mut(&mut self, b: &mut Block) {
        let outer = self.shadowed;
        for s in &mut b.stmts {
            if self.shadowed {
                break;
            }
            self.visit_stmt_mut(s);
        }
        self.shadowed = outer;
    }
    fn visit_local_mut(&mut self, l: &mut syn::Local) {
        syn::visit_mut::visit_local_mut(self, l);
        if pattern_bindings(&l.pat).contains(self.name) {
            self.shadowed = true;
        }
    }
    fn visit_expr_mut(&mut self, e: &mut Expr) {
        if let Expr::Assign(a) = e {
            if matches!(&*a.left, Expr::Path(p) if p.path.is_ident(self.name)) {
                self.visit_expr_mut(&mut a.right);
                wrap_in_tile_of(&mut a.right);
                return;
            }
        }
        syn::visit_mut::visit_expr_mut(self, e);
    }
    fn visit_expr_closure_mut(&mut self, _: &mut syn::ExprClosure) {}
    fn visit_item_mut(&mut self, _: &mut Item) {}
    fn visit_macro_mut(&mut self, _: &mut syn::Macro) {}
}

/// Promotes the plain `let mut` variables of `block` that later runtime control flow
/// assigns (see the module docs). `names` are the plain names in scope; the block's own
/// plain locals are added as they are declared.
pub fn promote_to_tiles(block: &mut Block, names: &PlainNames) {
    let mut names = names.clone();
    for i in 0..block.stmts.len() {
        let (head, rest) = block.stmts.split_at_mut(i + 1);
        let Stmt::Local(local) = &mut head[i] else {
            continue;
        };
        let Some(init) = &mut local.init else {
            continue;
        };
        let Pat::Ident(pi) = &local.pat else {
            continue;
        };
        if !plain(&init.expr, &names) || init.diverge.is_some() {
            continue;
        }
        let name = pi.ident.clone();
        let promote = pi.mutability.is_some()
            && pi.by_ref.is_none()
            && pi.subpat.is_none()
            && promotable(&init.expr, &names)
            && rest
                .iter()
                .take_while(
                    |s| !matches!(s, Stmt::Local(l) if pattern_bindings(&l.pat).contains(&name)),
                )
                .any(|s| assigned_under_runtime_flow(s, &name, &names));
        if !promote {
            // A plain local: a condition reading it is resolved while tracing.
            names.0.insert(name.to_string());
            continue;
        }
        names.0.remove(&name.to_string());
        wrap_in_tile_of(&mut init.expr);
        let mut wrap = WrapAssignments {
            name: &name,
            shadowed: false,
        };
        for s in rest.iter_mut() {
            if wrap.shadowed {
                break;
            }
            wrap.visit_stmt_mut(s);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn promoted(src: &str, plain_params: &[&str]) -> String {
        let mut b: Block = syn::parse_str(src).unwrap();
        let ids: Vec<Ident> = plain_params
            .iter()
            .map(|n| Ident::new(n, proc_macro2::Span::call_site()))
            .collect();
        promote_to_tiles(&mut b, &PlainNames::new(&ids));
        b.to_token_stream().to_string().split_whitespace().collect()
    }

    #[test]
    fn table() {
        let tile_of = "::tritium::dsl::trace::flow::tile_of";
        let cases: &[(&str, &[&str], &str)] = &[
            // Runtime loops promote any plain start value.
            (
                "{ let mut m = f32::NEG_INFINITY; for i in range(0, n) { m = maximum(m, 1.0); } }",
                &[],
                "letmutm=TILE(f32::NEG_INFINITY);",
            ),
            // A runtime `if` promotes, and its plain assignments go through `tile_of`.
            (
                "{ let mut s = 0.0; if x > 0 { s = 1.0; } else { s = load(p); } }",
                &[],
                "letmuts=TILE(0.0);ifx>0{s=TILE(1.0);}else{s=TILE(load(p));}",
            ),
            // A constexpr `if` (a constexpr, an UPPER_CASE name, a plain local) does not.
            (
                "{ let big = N > 4; let mut b = 64; if big { b = 128; } if BLOCK > 2 { b = 32; } }",
                &["N"],
                "letmutb=64;",
            ),
            // Nor a variable no runtime flow assigns, nor a path that is not a number.
            (
                "{ let mut k = 0; k += 1; let mut d = DType::F32; if x > 0 { d = DType::F16; } }",
                &[],
                "letmutk=0;k+=1;letmutd=DType::F32;",
            ),
            // A tile start value needs nothing.
            (
                "{ let mut acc = zeros([4], F32); for i in range(0, n) { acc = acc + 1; } }",
                &[],
                "letmutacc=zeros([4],F32);",
            ),
        ];
        for (src, params, want) in cases {
            let got = promoted(src, params);
            let want: String = want.replace("TILE", tile_of);
            assert!(got.contains(&want), "{src}: {got}");
        }
    }
}
