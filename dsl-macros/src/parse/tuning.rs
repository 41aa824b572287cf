//! `#[autotune(...)]` and `#[heuristics(...)]` under `#[kernel]` (Triton's
//! `@triton.autotune` and `@triton.heuristics`): the constexprs a launch chooses instead of
//! taking them as arguments.
//!
//! ```ignore
//! #[kernel]
//! #[autotune(
//!     configs = [config(BLOCK = 256), config(BLOCK = 1024, num_warps = 8)],
//!     key = [n],
//!     prune_configs_by = my_prune,   // fn(&[Config], &[i64]) -> Vec<Config>
//!     reset_to_zero = [out],
//!     restore_value = [acc],
//! )]
//! #[heuristics(EVEN = n % BLOCK as i32 == 0)]
//! fn k(out: Ptr<f32>, acc: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize, #[constexpr] EVEN: bool) {…}
//! ```

use super::signature::{KernelParam, ParamKind};
use proc_macro2::{Ident, TokenStream, TokenTree};
use quote::ToTokens;
use syn::punctuated::Punctuated;
use syn::spanned::Spanned;
use syn::{Attribute, Error, Expr, Token};

/// One `config(NAME = value, …, num_warps = w, num_stages = s)`.
pub struct ConfigSpec {
    /// Constexpr values, in the order written.
    pub values: Vec<(Ident, Expr)>,
    /// `num_warps = …`.
    pub num_warps: Option<Expr>,
    /// `num_stages = …`.
    pub num_stages: Option<Expr>,
    /// Where it is written.
    pub span: proc_macro2::Span,
}

/// How `configs = …` gives the candidate configs.
pub enum Configs {
    /// `[config(…), config(…)]`.
    List(Vec<ConfigSpec>),
    /// Python's comprehension, `[config(BLOCK = b, num_warps = w) for b in [64, 128] for w
    /// in [4, 8] if b * w <= 1024]`: one config per combination the filter keeps.
    Comprehension {
        /// The config each combination gives.
        template: Box<ConfigSpec>,
        /// `for PAT in EXPR`, outermost first.
        loops: Vec<(syn::Pat, Expr)>,
        /// `if EXPR`.
        filter: Option<Expr>,
    },
    /// Any other expression giving the configs (`Vec<Config>` or another iterable of
    /// `tritium::autotune::Config`); it tunes every constexpr no heuristic sets.
    Expr(Expr),
}

/// A parsed `#[autotune(...)]`.
pub struct Autotune {
    /// The candidate configs.
    pub configs: Configs,
    /// The constexprs every config sets, in the first config's order.
    pub tuned: Vec<Ident>,
    /// Scalar and constexpr arguments the best config depends on.
    pub key: Vec<Ident>,
    /// `prune_configs_by = …`: a `fn(&[Config], &[i64]) -> Vec<Config>`.
    pub prune: Option<Expr>,
    /// Pointer arguments zeroed before every timed run.
    pub reset_to_zero: Vec<Ident>,
    /// Pointer arguments restored after every timed run.
    pub restore_value: Vec<Ident>,
}

/// One `NAME = expression` of `#[heuristics(...)]`.
pub struct Heuristic {
    /// The constexpr it sets.
    pub ident: Ident,
    /// Its value, computed from the scalar and constexpr arguments.
    pub expr: Expr,
}

/// What a kernel's launch chooses itself.
#[derive(Default)]
pub struct Tuning {
    /// `#[autotune(...)]`, if any.
    pub autotune: Option<Autotune>,
    /// `#[heuristics(...)]`, in order (a later one may read an earlier one).
    pub heuristics: Vec<Heuristic>,
}

impl Tuning {
    /// True when the launch chooses nothing (a plain kernel).
    pub fn is_empty(&self) -> bool {
        self.autotune.is_none() && self.heuristics.is_empty()
    }

    /// Every constexpr the launch chooses: tuned ones, then heuristic ones.
    pub fn chosen(&self) -> Vec<&Ident> {
        let tuned = self.autotune.iter().flat_map(|a| &a.tuned);
        tuned
            .chain(self.heuristics.iter().map(|h| &h.ident))
            .collect()
    }
}

/// Removes `#[autotune]` and `#[heuristics]` from a kernel's attributes and checks them
/// against its parameters.
pub fn take_tuning(attrs: &mut Vec<Attribute>, params: &[KernelParam]) -> Result<Tuning, Error> {
    let mut tuning = Tuning::default();
    let mut taken = Vec::new();
    attrs.retain(|a| {
        let ours = matches!(last_segment(a).as_deref(), Some("autotune" | "heuristics"));
        if ours {
            taken.push(a.clone());
        }
        !ours
    });
    for a in taken {
        if last_segment(&a).as_deref() == Some("autotune") {
            if tuning.autotune.is_some() {
                return Err(Error::new(
                    a.path().span(),
                    "a kernel has one `#[autotune]`",
                ));
            }
            tuning.autotune = Some(parse_autotune(&a, params)?);
        } else {
            for h in assignments(&a)? {
                let (ident, expr) = h;
                tuning.heuristics.push(Heuristic { ident, expr });
            }
        }
    }
    if let Some(a) = &mut tuning.autotune {
        if matches!(a.configs, Configs::Expr(_)) {
            // An expression's configs are known only when it runs: it tunes every constexpr
            // that no heuristic sets.
            let set: Vec<String> = tuning
                .heuristics
                .iter()
                .map(|h| h.ident.to_string())
                .collect();
            a.tuned = params
                .iter()
                .filter(|p| matches!(p.kind, ParamKind::Constexpr))
                .map(|p| p.ident.clone())
                .filter(|id| !set.contains(&id.to_string()))
                .collect();
        }
    }
    check(&tuning, params)?;
    Ok(tuning)
}

/// The last segment of an attribute's path (`tritium::autotune` → `autotune`).
pub fn last_segment(a: &Attribute) -> Option<String> {
    a.path().segments.last().map(|s| s.ident.to_string())
}

/// `NAME = expression, …` inside an attribute's parentheses.
fn assignments(a: &Attribute) -> Result<Vec<(Ident, Expr)>, Error> {
    let list = a.parse_args_with(Punctuated::<Expr, Token![,]>::parse_terminated)?;
    list.into_iter().map(assignment).collect()
}

fn assignment(e: Expr) -> Result<(Ident, Expr), Error> {
    match e {
        Expr::Assign(a) => match &*a.left {
            Expr::Path(p) if p.path.get_ident().is_some() => {
                Ok((p.path.get_ident().expect("checked").clone(), *a.right))
            }
            other => Err(Error::new(other.span(), "expected a name before `=`")),
        },
        other => Err(Error::new(other.span(), "expected `NAME = value`")),
    }
}

fn names(e: &Expr, what: &str) -> Result<Vec<Ident>, Error> {
    let Expr::Array(list) = e else {
        return Err(Error::new(
            e.span(),
            format!("`{what}` takes a list of parameter names: `{what} = [a, b]`"),
        ));
    };
    list.elems
        .iter()
        .map(|e| match e {
            Expr::Path(p) if p.path.get_ident().is_some() => {
                Ok(p.path.get_ident().expect("checked").clone())
            }
            other => Err(Error::new(other.span(), "expected a parameter name")),
        })
        .collect()
}

/// One `NAME = value` of `#[autotune(...)]`; `configs`' value may be a comprehension.
enum AutotuneArg {
    Configs(Ident, Box<Configs>),
    Other(Ident, Expr),
}

impl syn::parse::Parse for AutotuneArg {
    fn parse(input: syn::parse::ParseStream) -> syn::Result<Self> {
        let name: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        if name != "configs" {
            return Ok(AutotuneArg::Other(name, input.parse()?));
        }
        if !input.peek(syn::token::Bracket) {
            return Ok(AutotuneArg::Configs(
                name,
                Box::new(Configs::Expr(input.parse()?)),
            ));
        }
        let content;
        let brackets = syn::bracketed!(content in input);
        if content.is_empty() {
            return Err(Error::new(brackets.span.join(), "`configs` is empty"));
        }
        let first: Expr = content.parse()?;
        if !content.peek(Token![for]) {
            let mut list = vec![first];
            while !content.is_empty() {
                content.parse::<Token![,]>()?;
                if content.is_empty() {
                    break;
                }
                list.push(content.parse()?);
            }
            let specs = list.iter().map(config_spec).collect::<Result<_, _>>()?;
            return Ok(AutotuneArg::Configs(name, Box::new(Configs::List(specs))));
        }
        let mut loops = Vec::new();
        while content.peek(Token![for]) {
            content.parse::<Token![for]>()?;
            let pat = syn::Pat::parse_multi(&content)?;
            content.parse::<Token![in]>()?;
            loops.push((pat, content.parse()?));
        }
        let filter = if content.peek(Token![if]) {
            content.parse::<Token![if]>()?;
            Some(content.parse()?)
        } else {
            None
        };
        if !content.is_empty() {
            return Err(
                content.error("expected `for NAME in …` or `if …` in a comprehension of configs")
            );
        }
        let template = Box::new(config_spec(&first)?);
        Ok(AutotuneArg::Configs(
            name,
            Box::new(Configs::Comprehension {
                template,
                loops,
                filter,
            }),
        ))
    }
}

fn parse_autotune(a: &Attribute, params: &[KernelParam]) -> Result<Autotune, Error> {
    let mut configs = None;
    let mut tune = Autotune {
        configs: Configs::List(Vec::new()),
        tuned: Vec::new(),
        key: Vec::new(),
        prune: None,
        reset_to_zero: Vec::new(),
        restore_value: Vec::new(),
    };
    let mut key = None;
    let args = a.parse_args_with(Punctuated::<AutotuneArg, Token![,]>::parse_terminated)?;
    for arg in args {
        let (name, value) = match arg {
            AutotuneArg::Configs(name, c) => {
                if configs.is_some() {
                    return Err(Error::new(name.span(), "`configs` is given twice"));
                }
                configs = Some(*c);
                continue;
            }
            AutotuneArg::Other(name, value) => (name, value),
        };
        match name.to_string().as_str() {
            "key" => key = Some(names(&value, "key")?),
            "prune_configs_by" => tune.prune = Some(value),
            "reset_to_zero" => tune.reset_to_zero = names(&value, "reset_to_zero")?,
            "restore_value" => tune.restore_value = names(&value, "restore_value")?,
            other => {
                return Err(Error::new(
                    name.span(),
                    format!(
                        "unknown `#[autotune]` argument `{other}`; expected `configs`, `key`, \
                         `prune_configs_by`, `reset_to_zero` or `restore_value`"
                    ),
                ))
            }
        }
    }
    let Some(configs) = configs else {
        return Err(Error::new(
            a.path().span(),
            "`#[autotune]` needs `configs = [config(BLOCK = 128), …]`",
        ));
    };
    tune.key = key.ok_or_else(|| {
        Error::new(
            a.path().span(),
            "`#[autotune]` needs `key = [...]`: the arguments the best config depends on",
        )
    })?;
    let specs: &[ConfigSpec] = match &configs {
        Configs::List(list) => list,
        Configs::Comprehension { template, .. } => std::slice::from_ref(&**template),
        // Known once the heuristics are: `take_tuning` fills them in.
        Configs::Expr(_) => &[],
    };
    if let Some(first) = specs.first() {
        tune.tuned = first.values.iter().map(|(n, _)| n.clone()).collect();
    }
    for (c, spec) in specs.iter().enumerate() {
        for (n, _) in &spec.values {
            if !tune.tuned.contains(n) {
                return Err(Error::new(
                    n.span(),
                    format!(
                        "the first config sets no `{n}`: every config sets the same constexprs"
                    ),
                ));
            }
        }
        for t in &tune.tuned {
            if !spec.values.iter().any(|(n, _)| n == t) {
                return Err(Error::new(
                    spec.span,
                    format!("config {c} sets no `{t}`: every config sets the same constexprs"),
                ));
            }
        }
    }
    for t in &tune.tuned {
        let p = param(params, t)?;
        if !matches!(p.kind, ParamKind::Constexpr) {
            return Err(Error::new(
                t.span(),
                format!("`{t}` is not a `#[constexpr]` parameter: configs set constexprs"),
            ));
        }
    }
    tune.configs = configs;
    Ok(tune)
}

/// `config(NAME = value, …, num_warps = w, num_stages = s)`.
fn config_spec(c: &Expr) -> Result<ConfigSpec, Error> {
    let call = match c {
        Expr::Call(call) if matches!(&*call.func, Expr::Path(p) if p.path.is_ident("config")) => {
            call
        }
        other => {
            return Err(Error::new(
                other.span(),
                "expected `config(NAME = value, …, num_warps = 4, num_stages = 3)`",
            ))
        }
    };
    let mut spec = ConfigSpec {
        values: Vec::new(),
        num_warps: None,
        num_stages: None,
        span: c.span(),
    };
    for arg in call.args.iter().cloned() {
        let (n, v) = assignment(arg)?;
        match n.to_string().as_str() {
            "num_warps" => spec.num_warps = Some(v),
            "num_stages" => spec.num_stages = Some(v),
            _ if spec.values.iter().any(|(m, _)| *m == n) => {
                return Err(Error::new(n.span(), format!("`{n}` is set twice")))
            }
            _ => spec.values.push((n, v)),
        }
    }
    Ok(spec)
}

fn param<'p>(params: &'p [KernelParam], name: &Ident) -> Result<&'p KernelParam, Error> {
    params
        .iter()
        .find(|p| p.ident == *name)
        .ok_or_else(|| Error::new(name.span(), format!("the kernel has no parameter `{name}`")))
}

/// Checks names against the parameters and each other.
fn check(t: &Tuning, params: &[KernelParam]) -> Result<(), Error> {
    let tuned: Vec<&Ident> = t.autotune.iter().flat_map(|a| &a.tuned).collect();
    for (i, h) in t.heuristics.iter().enumerate() {
        let p = param(params, &h.ident)?;
        if !matches!(p.kind, ParamKind::Constexpr) {
            return Err(Error::new(
                h.ident.span(),
                format!(
                    "`{}` is not a `#[constexpr]` parameter: heuristics set constexprs",
                    h.ident
                ),
            ));
        }
        let earlier = tuned
            .iter()
            .copied()
            .chain(t.heuristics[..i].iter().map(|h| &h.ident));
        if earlier.into_iter().any(|n| *n == h.ident) {
            return Err(Error::new(
                h.ident.span(),
                format!("`{}` is already chosen by a config or heuristic", h.ident),
            ));
        }
        if let Some(ptr) = mentioned(&h.expr.to_token_stream(), params) {
            return Err(Error::new(
                ptr.span(),
                format!("heuristics read scalar and constexpr arguments; `{ptr}` is a pointer"),
            ));
        }
    }
    let Some(a) = &t.autotune else { return Ok(()) };
    let chosen = t.chosen();
    for k in &a.key {
        let p = param(params, k)?;
        if matches!(p.kind, ParamKind::Ptr { .. }) {
            return Err(Error::new(
                k.span(),
                format!("`{k}` is a pointer: a key holds scalar and constexpr arguments"),
            ));
        }
        if chosen.contains(&k) {
            return Err(Error::new(
                k.span(),
                format!("`{k}` is chosen by the tuner: a key holds the arguments passed in"),
            ));
        }
    }
    for n in a.reset_to_zero.iter().chain(&a.restore_value) {
        if !matches!(param(params, n)?.kind, ParamKind::Ptr { .. }) {
            return Err(Error::new(
                n.span(),
                format!("`{n}` is not a pointer: only buffers are reset or restored"),
            ));
        }
    }
    Ok(())
}

/// The first pointer parameter an expression names, if any.
fn mentioned(tokens: &TokenStream, params: &[KernelParam]) -> Option<Ident> {
    tokens.clone().into_iter().find_map(|t| match t {
        TokenTree::Ident(i) => params
            .iter()
            .any(|p| p.ident == i && matches!(p.kind, ParamKind::Ptr { .. }))
            .then_some(i),
        TokenTree::Group(g) => mentioned(&g.stream(), params),
        _ => None,
    })
}
