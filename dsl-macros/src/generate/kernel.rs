//! `#[kernel]`: the module with `NAME`, `trace`, `launch` and `launch_with`.

use super::body::{rewrite_block, FnKind};
use super::promote::PlainNames;
use super::tuned;
use crate::parse::signature::{parse_kernel, Kernel, KernelParam, ParamKind};
use crate::parse::tuning::{last_segment, take_tuning, Tuning};
use proc_macro2::{Ident, Span, TokenStream};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{parse_quote, Error, GenericParam, Generics, ItemFn, LitStr};

/// Expands `#[kernel] fn …`.
pub fn expand(item: ItemFn) -> Result<TokenStream, Error> {
    let source = fnv1a(quote!(#item).to_string().as_bytes());
    let mut k = parse_kernel(item)?;
    let tuning = take_tuning(&mut k.attrs, &k.params)?;
    let const_generics = k.generics.params.iter().filter_map(|g| match g {
        syn::GenericParam::Const(c) => Some(&c.ident),
        _ => None,
    });
    let plain = PlainNames::new(
        k.params
            .iter()
            .filter(|p| matches!(p.kind, ParamKind::Constexpr))
            .map(|p| &p.ident)
            .chain(const_generics),
    );
    rewrite_block(&mut k.body, FnKind::Kernel, &plain)?;
    Ok(generate(&k, &tuning, source))
}

/// `#[autotune(…)]` or `#[heuristics(…)]` written above `#[kernel]`: re-emits the function
/// with `#[kernel]` first and the attribute under it, where `#[kernel]` reads it.
pub fn reorder_under_kernel(
    what: &str,
    args: TokenStream,
    mut item: ItemFn,
) -> Result<TokenStream, Error> {
    let Some(at) = item
        .attrs
        .iter()
        .position(|a| last_segment(a).as_deref() == Some("kernel"))
    else {
        return Err(Error::new(
            item.sig.ident.span(),
            format!("`#[{what}]` goes on a `#[kernel]` function"),
        ));
    };
    let kernel = item.attrs.remove(at);
    let what = format_ident!("{}", what);
    item.attrs.insert(0, parse_quote!(#[#what(#args)]));
    item.attrs.insert(0, kernel);
    Ok(quote!(#item))
}

/// A 64-bit FNV-1a hash: the kernel's source in the autotuner's cache key, so an edited
/// kernel is tuned again.
fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |h, &b| {
        (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
    })
}

/// The type and const generics' idents, in order (what a turbofish passes).
pub(super) fn generic_idents(g: &Generics) -> Vec<&Ident> {
    g.params
        .iter()
        .filter_map(|p| match p {
            GenericParam::Type(t) => Some(&t.ident),
            GenericParam::Const(c) => Some(&c.ident),
            GenericParam::Lifetime(_) => None,
        })
        .collect()
}

/// `::<T, N>` for the generics, or nothing.
pub(super) fn turbofish(g: &Generics) -> TokenStream {
    let args = generic_idents(g);
    if args.is_empty() {
        quote!()
    } else {
        quote!(::<#(#args),*>)
    }
}

/// `BLOCK={:?};T={}` and its arguments: constexprs, then generic dtypes and const generics.
pub(super) fn key(k: &Kernel) -> TokenStream {
    let mut parts = Vec::new();
    let mut args = Vec::new();
    for p in k.params.iter().filter(|p| !p.is_runtime()) {
        parts.push(format!("{}={{:?}}", p.ident));
        let id = &p.ident;
        args.push(quote!(#id));
    }
    for g in &k.generics.params {
        match g {
            GenericParam::Type(t) => {
                parts.push(format!("{}={{}}", t.ident));
                let id = &t.ident;
                args.push(quote!(<#id as ::tritium::dsl::trace::Element>::DTYPE));
            }
            GenericParam::Const(c) => {
                parts.push(format!("{}={{:?}}", c.ident));
                let id = &c.ident;
                args.push(quote!(#id));
            }
            GenericParam::Lifetime(_) => {}
        }
    }
    if parts.is_empty() {
        return quote!(::std::string::String::new());
    }
    let fmt = LitStr::new(&parts.join(";"), Span::call_site());
    quote!(::std::format!(#fmt, #(#args),*))
}

/// `let x = ptr_param(…)` / `scalar_param(…)` at the start of the trace.
fn param_let(p: &KernelParam) -> Option<TokenStream> {
    let (id, m) = (&p.ident, &p.mutability);
    let name = LitStr::new(&id.to_string(), id.span());
    let sp = p.ty.span();
    match &p.kind {
        ParamKind::Constexpr => None,
        ParamKind::Ptr { elem, index } => {
            let esp = elem.span();
            let dtype = quote_spanned!(esp=> <#elem as ::tritium::dsl::trace::Element>::DTYPE);
            Some(
                quote_spanned!(sp=> let #m #id = ::tritium::dsl::trace::ptr_param_at(#name, #dtype, #index, __spec);),
            )
        }
        ParamKind::Scalar { index } => {
            let ty = &p.ty;
            let dtype = quote_spanned!(sp=> <#ty as ::tritium::dsl::trace::Element>::DTYPE);
            Some(
                quote_spanned!(sp=> let #m #id = ::tritium::dsl::trace::scalar_param(#name, #dtype, #index, __spec);),
            )
        }
    }
}

fn generate(k: &Kernel, tuning: &Tuning, source: u64) -> TokenStream {
    let name = &k.ident;
    let name_str = LitStr::new(&name.to_string(), name.span());
    let vis = &k.vis;
    let attrs = &k.attrs;
    let default_doc = if attrs.iter().any(|a| a.path().is_ident("doc")) {
        quote!()
    } else {
        let doc = LitStr::new(
            &format!("The `{name}` kernel (generated by `#[kernel]`)."),
            name.span(),
        );
        quote!(#[doc = #doc])
    };

    let (impl_g, _, where_clause) = k.generics.split_for_impl();
    let mut launch_generics = k.generics.clone();
    launch_generics.params.insert(0, parse_quote!('__a));
    let (launch_g, _, _) = launch_generics.split_for_impl();
    let tf = turbofish(&k.generics);

    // The launch's own parameters, renamed when a kernel parameter takes the name.
    let taken = |n: &str| k.params.iter().any(|p| p.ident == n);
    let own = |n: &str| {
        if taken(n) {
            format_ident!("__{}", n)
        } else {
            format_ident!("{}", n)
        }
    };
    let (device, grid, options) = (own("device"), own("grid"), own("options"));

    let constexprs: Vec<&KernelParam> = k.params.iter().filter(|p| !p.is_runtime()).collect();
    let trace_params = constexprs.iter().map(|p| {
        let (attrs, m, id, ty) = (&p.attrs, &p.mutability, &p.ident, &p.ty);
        quote!(#(#attrs)* #m #id: #ty)
    });
    let cx_clones = constexprs.iter().map(|p| {
        let id = &p.ident;
        quote!(::core::clone::Clone::clone(&#id))
    });
    let lets = k.params.iter().filter_map(param_let);
    let stmts = &k.body.stmts;

    let launch_params: Vec<(&Ident, TokenStream)> = k
        .params
        .iter()
        .map(|p| {
            let (attrs, id, ty) = (&p.attrs, &p.ident, &p.ty);
            let tokens = match &p.kind {
                ParamKind::Ptr { elem, .. } => {
                    quote!(#(#attrs)* #id: impl ::tritium::backend::PtrArg<'__a, #elem>)
                }
                _ => quote!(#(#attrs)* #id: #ty),
            };
            (id, tokens)
        })
        .collect();
    let pushes: Vec<TokenStream> = k
        .params
        .iter()
        .filter_map(|p| {
            let id = &p.ident;
            let n = LitStr::new(&id.to_string(), id.span());
            match &p.kind {
                ParamKind::Ptr { elem, .. } => Some(quote!(__args.ptr::<#elem>(#n, #id);)),
                ParamKind::Scalar { .. } => {
                    let ty = &p.ty;
                    Some(quote!(__args.scalar::<#ty>(#n, #id);))
                }
                ParamKind::Constexpr => None,
            }
        })
        .collect();
    let key = key(k);
    let dispatch = quote! {
        ::tritium::backend::launch(
            #device,
            #grid,
            #options,
            ::tritium::backend::KernelKey { name: self::NAME, constexprs: #key },
            __args,
            &|__spec: &::tritium::dsl::trace::Specialization| self::trace #tf (__spec, #(#cx_clones),*),
        )
    };
    let parts = LaunchParts {
        device,
        grid,
        options,
        launch_g: quote!(#launch_g),
        where_clause: quote!(#where_clause),
        pushes,
        dispatch,
    };
    let launches = if tuning.is_empty() {
        plain_launches(&parts, &launch_params, &tf, name)
    } else {
        tuned::launches(k, tuning, source, &parts, &launch_params)
    };

    quote! {
        #(#attrs)*
        #default_doc
        #[allow(non_snake_case, unused_mut, unused_variables, unused_parens, unused_braces, unused_assignments, unused_unsafe, clippy::all)]
        #vis mod #name {
            use super::*;

            /// The kernel's name.
            pub const NAME: &str = #name_str;

            /// Traces the kernel for these constexprs (and generic dtypes) into a verified IR function.
            pub fn trace #impl_g (
                __spec: &::tritium::dsl::trace::Specialization,
                #(#trace_params),*
            ) -> ::tritium::dsl::Result<::tritium::dsl::ir::Function> #where_clause {
                let __tracer = ::tritium::dsl::trace::Tracer::begin(self::NAME)?;
                {
                    #(#lets)*
                    #(#stmts)*
                }
                __tracer.finish()
            }

            #launches
        }
    }
}

/// What every launch function of a kernel shares.
pub(super) struct LaunchParts {
    /// The launch's own parameter names (renamed when a kernel parameter takes one).
    pub device: Ident,
    pub grid: Ident,
    pub options: Ident,
    /// `<'__a, generics…>` of the launch functions, and their where clause.
    pub launch_g: TokenStream,
    pub where_clause: TokenStream,
    /// `__args.ptr(…)`/`__args.scalar(…)` for every runtime parameter.
    pub pushes: Vec<TokenStream>,
    /// The call of `tritium::backend::launch` with `__args`, every constexpr in scope.
    pub dispatch: TokenStream,
}

/// `launch` and `launch_with` of a kernel that chooses no constexprs itself.
fn plain_launches(
    parts: &LaunchParts,
    launch_params: &[(&Ident, TokenStream)],
    tf: &TokenStream,
    name: &Ident,
) -> TokenStream {
    let LaunchParts {
        device,
        grid,
        options,
        launch_g,
        where_clause,
        pushes,
        dispatch,
    } = parts;
    let params = launch_params.iter().map(|(_, t)| t);
    let params2 = params.clone();
    let params3 = params.clone();
    let arg_names = launch_params.iter().map(|(id, _)| id);
    let arg_names2 = arg_names.clone();
    let launch_doc = LitStr::new(
        &format!(
            "Launches `{name}` on `{device}` over `{grid}` with default options: \
             pointer arguments take ndarray arrays/views, slices or vectors (`&mut` where the kernel writes)."
        ),
        Span::call_site(),
    );
    quote! {
        #[doc = #launch_doc]
        pub fn launch #launch_g (
            #device: &::tritium::backend::Device,
            #grid: impl ::core::convert::Into<::tritium::backend::Grid>,
            #(#params),*
        ) -> ::tritium::backend::Result<()> #where_clause {
            self::launch_with #tf (#device, #grid, &::tritium::backend::LaunchOptions::default(), #(#arg_names),*)
        }

        /// [`launch`](self::launch) with no access checked at run time, not even those the
        /// kernel's bounds proof does not cover for this launch (Triton's behaviour).
        ///
        /// # Safety
        ///
        /// Every load, store and atomic of the launch whose mask is true must touch only
        /// bytes of the buffer its pointer derives from, and write only buffers passed as
        /// `&mut` (see [`LaunchOptions::unchecked`](::tritium::backend::LaunchOptions::unchecked)).
        pub unsafe fn launch_unchecked #launch_g (
            #device: &::tritium::backend::Device,
            #grid: impl ::core::convert::Into<::tritium::backend::Grid>,
            #(#params3),*
        ) -> ::tritium::backend::Result<()> #where_clause {
            // SAFETY: this function's caller promises what `unchecked` asks.
            let __options = unsafe { ::tritium::backend::LaunchOptions::default().unchecked() };
            self::launch_with #tf (#device, #grid, &__options, #(#arg_names2),*)
        }

        /// Launches the kernel with explicit [`LaunchOptions`](::tritium::backend::LaunchOptions).
        pub fn launch_with #launch_g (
            #device: &::tritium::backend::Device,
            #grid: impl ::core::convert::Into<::tritium::backend::Grid>,
            #options: &::tritium::backend::LaunchOptions,
            #(#params2),*
        ) -> ::tritium::backend::Result<()> #where_clause {
            let mut __args = ::tritium::backend::KernelArgs::new();
            #(#pushes)*
            #dispatch
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn expand_str(src: &str) -> Result<String, String> {
        let item: ItemFn = syn::parse_str(src).unwrap();
        expand(item)
            .map(|t| t.to_string())
            .map_err(|e| e.to_string())
    }

    fn squash(s: &str) -> String {
        s.split_whitespace().collect()
    }

    #[test]
    fn vadd_shape() {
        let out = expand_str(
            "/// Adds.\npub fn vadd<T: Float>(out: Ptr<T>, x: Ptr<T>, n: i32, #[constexpr] BLOCK: usize) {
                let offs = program_id(0) * BLOCK as i32 + arange(0, BLOCK);
                store(out + offs, load(x + offs, mask = offs < n), mask = offs < n);
            }",
        )
        .unwrap();
        let s = squash(&out);
        for want in [
            "pubmodvadd{usesuper::*;",
            "pubconstNAME:&str=\"vadd\";",
            "pubfntrace<T:Float>(__spec:&::tritium::dsl::trace::Specialization,BLOCK:usize)",
            "letout=::tritium::dsl::trace::ptr_param_at(\"out\",<TastritiumElement>::DTYPE,0usize,__spec);",
            "letn=::tritium::dsl::trace::scalar_param(\"n\",<i32as::tritium::dsl::trace::Element>::DTYPE,2usize,__spec);",
            "pubfnlaunch<'__a,T:Float>(device:&::tritium::backend::Device,grid:impl::core::convert::Into<::tritium::backend::Grid>,out:impl::tritium::backend::PtrArg<'__a,T>,x:impl::tritium::backend::PtrArg<'__a,T>,n:i32,BLOCK:usize)",
            "self::launch_with::<T>(device,grid,&::tritium::backend::LaunchOptions::default(),out,x,n,BLOCK)",
            "__args.ptr::<T>(\"out\",out);",
            "__args.scalar::<i32>(\"n\",n);",
            "constexprs:::std::format!(\"BLOCK={:?};T={}\",BLOCK,<Tas::tritium::dsl::trace::Element>::DTYPE)",
            "self::trace::<T>(__spec,::core::clone::Clone::clone(&BLOCK))",
            "#[doc=\" Adds.\"]",
        ] {
            let want = squash(&want.replace("<TastritiumElement>", "<Tas::tritium::dsl::trace::Element>"));
            assert!(s.contains(&want), "missing {want}\nin {out}");
        }
    }

    #[test]
    fn renames_launch_params() {
        let out = expand_str("fn k(device: Ptr<f32>, #[constexpr] grid: usize) {}").unwrap();
        let s = squash(&out);
        assert!(
            s.contains("pubfnlaunch<'__a>(__device:&::tritium::backend::Device,__grid:impl"),
            "{out}"
        );
        assert!(
            s.contains("options:&::tritium::backend::LaunchOptions"),
            "{out}"
        );
    }

    #[test]
    fn signature_errors() {
        let table: &[(&str, &str)] = &[
            (
                "fn k(x: Ptr<f32>) -> i32 { 0 }",
                "a kernel cannot return a value",
            ),
            (
                "fn k<'a>(x: Ptr<f32>) {}",
                "a kernel cannot have lifetime parameters",
            ),
            ("async fn k() {}", "a kernel cannot be `async`"),
            (
                "fn k((a, b): (i32, i32)) {}",
                "kernel parameters must be plain names",
            ),
            (
                "fn k(#[constexpr(1)] a: usize) {}",
                "`#[constexpr]` takes no arguments",
            ),
            ("fn k(__x: i32) {}", "reserved"),
        ];
        for (src, want) in table {
            let e = expand_str(src).unwrap_err();
            assert!(e.contains(want), "{src}: {e}");
        }
    }
}
