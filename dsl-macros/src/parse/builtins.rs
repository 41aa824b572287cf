//! The kernel-language builtins a kernel calls by bare name, and Triton-style keyword
//! arguments (`load(p, mask = m, other = 0.0)`) bound to positions.

use super::assigned::keyword_arg;
use proc_macro2::Span;
use syn::spanned::Spanned;
use syn::{Error, Expr};

/// One builtin: `::tritium::dsl::trace::lang::FUNCTION(params…)`; the parameters from
/// `required` on are optional and filled with `NoArg` when missing.
#[derive(Debug)]
pub struct Builtin {
    /// The name kernels call.
    pub name: &'static str,
    /// The function in `tritium::dsl::trace::lang` (the name unless the table says
    /// `name => function`: `load` calls `load_with`, which takes every keyword).
    pub function: &'static str,
    /// Parameter names, in order (as Triton names them, for keyword arguments).
    pub params: &'static [&'static str],
    /// How many leading parameters are required.
    pub required: usize,
}

macro_rules! builtins {
    ($($name:ident $(=> $function:ident)? ($($p:ident),*) $(? $req:literal)?;)*) => {
        &[$(Builtin {
            name: stringify!($name),
            function: builtins!(@fn $name $($function)?),
            params: &[$(stringify!($p)),*],
            required: builtins!(@req [$($p),*] $($req)?),
        }),*]
    };
    (@fn $name:ident) => { stringify!($name) };
    (@fn $name:ident $function:ident) => { stringify!($function) };
    (@req [$($p:ident),*]) => { <[&str]>::len(&[$(stringify!($p)),*]) };
    (@req [$($p:ident),*] $req:literal) => { $req };
}

/// The table. `? n` marks the parameters after the first `n` as optional.
pub const BUILTINS: &[Builtin] = builtins! {
    program_id(axis);
    num_programs(axis);
    arange(start, end);
    full(shape, value, dtype);
    zeros(shape, dtype);
    scalar(value, dtype);
    broadcast_to(x, shape);
    expand_dims(x, axis);
    reshape => reshape_with(x, shape, can_reorder) ? 2;
    trans => trans_with(x, dims) ? 1;
    permute(x, dims);
    gather(src, index, axis);
    ravel(x);
    flip(x, dim) ? 1;
    view(x, shape);
    zeros_like(x);
    full_like(x, value);
    broadcast(a, b);
    join(a, b);
    interleave(a, b);
    split(x);
    cat(a, b, can_reorder) ? 2;
    swizzle2d(i, j, size_i, size_j, size_g);
    where_(cond, a, b);
    cast => cast_with(x, dtype, fp_downcast_rounding, bitcast) ? 2;
    bitcast(x, dtype);
    pointer_type(dtype);
    exp(x);
    exp2(x);
    log(x);
    log2(x);
    sqrt(x);
    rsqrt(x);
    abs(x);
    sin(x);
    cos(x);
    floor(x);
    ceil(x);
    trunc(x);
    round(x);
    rint(x);
    nearbyint(x);
    maximum => maximum_with(a, b, propagate_nan) ? 2;
    minimum => minimum_with(a, b, propagate_nan) ? 2;
    floordiv(a, b);
    fma(a, b, c);
    sum(x, axis, keep_dims) ? 1;
    max(x, axis, keep_dims) ? 1;
    min(x, axis, keep_dims) ? 1;
    argmax(x, axis, keep_dims) ? 2;
    argmin(x, axis, keep_dims) ? 2;
    xor_sum(x, axis, keep_dims) ? 1;
    cumsum(x, axis, reverse) ? 1;
    sort(x, dim, descending) ? 1;
    topk(x, k, dim) ? 2;
    cumprod(x, axis, reverse) ? 1;
    reduce(input, axis, combine_fn, keep_dims) ? 3;
    associative_scan(input, axis, combine_fn, reverse) ? 3;
    dot => dot_with(a, b, acc, input_precision, allow_tf32, max_num_imprecise_acc, out_dtype) ? 2;
    dot_scaled(lhs, lhs_scale, lhs_format, rhs, rhs_scale, rhs_format, acc, fast_math, lhs_k_pack, rhs_k_pack, out_dtype) ? 6;
    load => load_with(ptr, mask, other, boundary_check, padding_option, cache_modifier, eviction_policy, volatile) ? 1;
    store => store_with(ptr, value, mask, boundary_check, cache_modifier, eviction_policy) ? 2;
    make_block_ptr(base, shape, strides, offsets, block_shape, order);
    advance(base, offsets);
    make_tensor_descriptor(base, shape, strides, block_shape);
    load_tensor_descriptor(desc, offsets);
    store_tensor_descriptor(desc, offsets, value);
    atomic_add => atomic_add_with(ptr, value, mask, sem, scope) ? 2;
    atomic_max => atomic_max_with(ptr, value, mask, sem, scope) ? 2;
    atomic_min => atomic_min_with(ptr, value, mask, sem, scope) ? 2;
    atomic_xchg => atomic_xchg_with(ptr, value, mask, sem, scope) ? 2;
    atomic_and => atomic_and_with(ptr, value, mask, sem, scope) ? 2;
    atomic_or => atomic_or_with(ptr, value, mask, sem, scope) ? 2;
    atomic_xor => atomic_xor_with(ptr, value, mask, sem, scope) ? 2;
    atomic_cas => atomic_cas_with(ptr, cmp, value, sem, scope) ? 3;
    cdiv(a, b);
    static_assert(cond, msg) ? 1;
    static_print(x);
    device_assert(cond, msg, mask) ? 1;
    umulhi(x, y);
    clamp(x, min, max, propagate_nan) ? 3;
    sigmoid(x);
    erf(x);
    erfc(x);
    erfinv(x);
    lgamma(x);
    tgamma(x);
    tanh(x);
    sinh(x);
    cosh(x);
    asinh(x);
    acosh(x);
    atanh(x);
    atan(x);
    asin(x);
    acos(x);
    atan2(y, x);
    exp10(x);
    expm1(x);
    log1p(x);
    log10(x);
    cbrt(x);
    pow(x, y);
    hypot(x, y);
    fmod(x, y);
    remainder(x, y);
    copysign(x, y);
    nextafter(x, y);
    ldexp(x, n);
    frexp(x);
    softmax(x, dim, keep_dims, ieee_rounding) ? 1;
    fdiv(x, y, ieee_rounding) ? 2;
    div_rn(x, y);
    sqrt_rn(x);
    isnan(x);
    isinf(x);
    isfinite(x);
    signbit(x);
    histogram(x, num_bins, mask) ? 2;
    philox(seed, c0, c1, c2, c3, n_rounds) ? 5;
    randint(seed, offset, n_rounds) ? 2;
    randint4x(seed, offset, n_rounds) ? 2;
    rand(seed, offset, n_rounds) ? 2;
    rand4x(seed, offset, n_rounds) ? 2;
    randn(seed, offset, n_rounds) ? 2;
    randn4x(seed, offset, n_rounds) ? 2;
    uint_to_uniform_float(x);
    pair_uniform_to_normal(u1, u2);
    next_power_of_2(n);
    multiple_of(x, values);
    max_contiguous(x, values);
    max_constancy(x, values);
    assume(cond);
    debug_barrier();
    inline_asm_elementwise(asm, constraints, args, dtype, is_pure, pack, fallback);
};

/// The builtin called `name`, if any.
pub fn lookup(name: &str) -> Option<&'static Builtin> {
    BUILTINS.iter().find(|b| b.name == name)
}

impl Builtin {
    fn describe_arity(&self) -> String {
        let n = self.params.len();
        let count = if self.required == n {
            format!("{n} argument{}", if n == 1 { "" } else { "s" })
        } else {
            format!("{} to {n} arguments", self.required)
        };
        format!("`{}` takes {count} ({})", self.name, self.params.join(", "))
    }

    /// Binds positional and keyword `args` to parameters. Returns one entry per parameter:
    /// `None` for an optional parameter that was not given. `call_span` is where a missing
    /// argument is reported.
    pub fn bind(&self, call_span: Span, args: Vec<Expr>) -> Result<Vec<Option<Expr>>, Error> {
        let mut slots: Vec<Option<Expr>> = vec![None; self.params.len()];
        let total = args.len();
        let mut seen_keyword: Option<Span> = None;
        for (i, arg) in args.into_iter().enumerate() {
            if let Some((kw, value)) = keyword_arg(&arg) {
                let name = kw.to_string();
                let Some(slot) = self.params.iter().position(|p| *p == name) else {
                    return Err(Error::new(
                        kw.span(),
                        format!(
                            "`{}` has no parameter named `{name}`; its parameters are ({})",
                            self.name,
                            self.params.join(", ")
                        ),
                    ));
                };
                if slots[slot].is_some() {
                    return Err(Error::new(
                        kw.span(),
                        format!("argument `{name}` of `{}` is given twice", self.name),
                    ));
                }
                slots[slot] = Some(value.clone());
                seen_keyword.get_or_insert(kw.span());
            } else {
                if seen_keyword.is_some() {
                    return Err(Error::new(
                        arg.span(),
                        format!(
                            "positional argument after a keyword argument in a call to `{}`",
                            self.name
                        ),
                    ));
                }
                if i >= self.params.len() {
                    return Err(Error::new(
                        arg.span(),
                        format!("{}, got {total}", self.describe_arity()),
                    ));
                }
                slots[i] = Some(arg);
            }
        }
        if let Some(missing) = slots[..self.required].iter().position(Option::is_none) {
            let msg = if self.params[missing] == "fallback" {
                format!(
                    "{} needs `fallback = \"op\"`: the CPU, the interpreter and the emulator run it",
                    self.name
                )
            } else if seen_keyword.is_none() {
                format!("{}, got {total}", self.describe_arity())
            } else {
                format!(
                    "`{}` is missing its argument `{}`; {}",
                    self.name,
                    self.params[missing],
                    self.describe_arity()
                )
            };
            return Err(Error::new(call_span, msg));
        }
        Ok(slots)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use syn::punctuated::Punctuated;
    use syn::Token;

    fn bind(name: &str, args: &str) -> Result<Vec<Option<String>>, String> {
        let b = lookup(name).unwrap();
        let parsed =
            syn::parse::Parser::parse_str(Punctuated::<Expr, Token![,]>::parse_terminated, args)
                .unwrap();
        b.bind(Span::call_site(), parsed.into_iter().collect())
            .map(|v| {
                v.into_iter()
                    .map(|o| o.map(|e| quote::quote!(#e).to_string()))
                    .collect()
            })
            .map_err(|e| e.to_string())
    }

    #[test]
    fn table_is_consistent() {
        for b in BUILTINS {
            assert!(b.required <= b.params.len(), "{}", b.name);
        }
    }

    #[test]
    fn binding() {
        let s = |x: &str| Some(x.to_string());
        let rest = [None, None, None, None, None];
        let load = |given: [Option<String>; 3]| [given.to_vec(), rest.to_vec()].concat();
        assert_eq!(bind("load", "p").unwrap(), load([s("p"), None, None]));
        assert_eq!(
            bind("load", "p, mask = m, other = 0.0").unwrap(),
            load([s("p"), s("m"), s("0.0")])
        );
        assert_eq!(
            bind("load", "p, other = 1").unwrap(),
            load([s("p"), None, s("1")])
        );
        assert_eq!(bind("load", "ptr = p").unwrap(), load([s("p"), None, None]));
        assert_eq!(
            bind(
                "load",
                "bp, boundary_check = (0, 1), padding_option = \"nan\""
            )
            .unwrap()[3..5],
            [s("(0 , 1)"), s("\"nan\"")]
        );
        assert_eq!(
            bind("dot", "a, b, acc, out_dtype = DType::F16").unwrap(),
            [
                s("a"),
                s("b"),
                s("acc"),
                None,
                None,
                None,
                s("DType :: F16")
            ]
        );
        assert_eq!(
            bind("load", "a, b, c, d, e, f, g, h, i").unwrap_err(),
            "`load` takes 1 to 8 arguments (ptr, mask, other, boundary_check, padding_option, cache_modifier, eviction_policy, volatile), got 9"
        );
        assert_eq!(
            bind("exp", "").unwrap_err(),
            "`exp` takes 1 argument (x), got 0"
        );
        assert_eq!(
            bind("maximum", "a").unwrap_err(),
            "`maximum` takes 2 to 3 arguments (a, b, propagate_nan), got 1"
        );
        assert_eq!(
            bind("load", "p, maks = m").unwrap_err(),
            "`load` has no parameter named `maks`; its parameters are (ptr, mask, other, boundary_check, padding_option, cache_modifier, eviction_policy, volatile)"
        );
        assert_eq!(
            bind("load", "p, mask = m, mask = n").unwrap_err(),
            "argument `mask` of `load` is given twice"
        );
        assert_eq!(
            bind("load", "p, mask = m, 0.0").unwrap_err(),
            "positional argument after a keyword argument in a call to `load`"
        );
        assert_eq!(
            bind("store", "p, mask = m").unwrap_err(),
            "`store` is missing its argument `value`; `store` takes 2 to 6 arguments (ptr, value, mask, boundary_check, cache_modifier, eviction_policy)"
        );
        assert_eq!(
            bind("load", "p, ptr = q").unwrap_err(),
            "argument `ptr` of `load` is given twice"
        );
    }

    #[test]
    fn inline_asm_needs_a_fallback() {
        let msg = "inline_asm_elementwise needs `fallback = \"op\"`: the CPU, the interpreter and the emulator run it";
        let call = r#""add.u32 $0, $1, $2;", "=r,r,r", (x, y), DType::U32, true, 1"#;
        assert_eq!(bind("inline_asm_elementwise", call).unwrap_err(), msg);
        let with = format!("{call}, fallback = \"add_u32\"");
        assert_eq!(
            bind("inline_asm_elementwise", &with).unwrap()[6],
            Some("\"add_u32\"".to_string())
        );
    }
}
