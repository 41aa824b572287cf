//! The launch functions of a kernel that chooses constexprs itself (`#[autotune]`,
//! `#[heuristics]`): `Meta` (the chosen constexprs), `autotuner()`, `launch` and
//! `launch_with` (without the chosen constexprs; the grid is a function of `Meta`, as
//! Triton's `grid = lambda META: …`) and `launch_explicit` (every constexpr passed).

use super::kernel::{generic_idents, LaunchParts};
use crate::parse::signature::Kernel;
use crate::parse::tuning::{Autotune, ConfigSpec, Configs, Tuning};
use proc_macro2::{Ident, TokenStream};
use quote::quote;
use syn::{parse_quote, GenericParam, LitStr};

/// Everything the kernel module gets besides `NAME` and `trace`.
pub fn launches(
    k: &Kernel,
    tuning: &Tuning,
    source: u64,
    parts: &LaunchParts,
    launch_params: &[(&Ident, TokenStream)],
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
    let chosen = tuning.chosen();
    let ty_of = |id: &Ident| {
        &k.params
            .iter()
            .find(|p| p.ident == *id)
            .expect("checked")
            .ty
    };

    let fields = chosen.iter().map(|id| {
        let ty = ty_of(id);
        quote!(pub #id: #ty)
    });
    let meta_init = chosen
        .iter()
        .map(|id| quote!(#id: ::core::clone::Clone::clone(&#id)));
    let own: Vec<&(&Ident, TokenStream)> = launch_params
        .iter()
        .filter(|(id, _)| !chosen.contains(id))
        .collect();
    let own_params = own.iter().map(|(_, t)| t);
    let own_params2 = own_params.clone();
    let own_params3 = own_params.clone();
    let own_names = own.iter().map(|(id, _)| id);
    let own_names2 = own_names.clone();
    let all_params = launch_params.iter().map(|(_, t)| t);

    // `<'__a, generics…, __G: Into<Grid>>` and the turbofish `launch` calls `launch_with` by.
    let mut generics = k.generics.clone();
    generics.params.insert(0, parse_quote!('__a));
    generics
        .params
        .push(parse_quote!(__G: ::core::convert::Into<::tritium::backend::Grid>));
    let (grid_g, _, _) = generics.split_for_impl();
    let grid_ty: Ident = parse_quote!(__G);
    let mut generic_args = generic_idents(&k.generics);
    generic_args.push(&grid_ty);

    let heuristic_lets = tuning.heuristics.iter().map(|h| {
        let (id, expr) = (&h.ident, &h.expr);
        let ty = ty_of(id);
        quote!(let #id: #ty = #expr;)
    });
    let (config_lets, set_warps) = match &tuning.autotune {
        Some(a) => {
            let lets = a.tuned.iter().map(|id| {
                let ty = ty_of(id);
                let n = LitStr::new(&id.to_string(), id.span());
                quote!(let #id: #ty = ::tritium::autotune::config_value::<#ty>(self::NAME, __config, #n)?;)
            });
            (
                quote!(#(#lets)*),
                quote!(
                    __options.num_warps = __config.num_warps;
                    __options.num_stages = __config.num_stages;
                ),
            )
        }
        None => (quote!(), quote!()),
    };
    let body = quote! {
        #config_lets
        #(#heuristic_lets)*
        let __meta = self::Meta { #(#meta_init),* };
        let #grid = (#grid)(&__meta);
        let mut __options = ::core::clone::Clone::clone(#options);
        #set_warps
        let #options = &__options;
        #dispatch
    };
    let (tuner, run) = match &tuning.autotune {
        Some(a) => (autotuner(k, a, source), tuned_run(k, a, device, &body)),
        None => (quote!(), body),
    };

    let name = &k.ident;
    let launch_doc = LitStr::new(
        &format!(
            "Launches `{name}` on `{device}` with default options; `{grid}` computes the grid \
             from the constexprs the launch chooses (`Meta`)."
        ),
        name.span(),
    );
    quote! {
        /// The constexprs a launch chooses: from the autotuner's config, then the heuristics.
        #[derive(Debug, Clone)]
        pub struct Meta {
            #(#fields),*
        }

        #tuner

        #[doc = #launch_doc]
        pub fn launch #grid_g (
            #device: &::tritium::backend::Device,
            #grid: impl ::core::ops::Fn(&self::Meta) -> __G,
            #(#own_params),*
        ) -> ::tritium::backend::Result<()> #where_clause {
            self::launch_with::<#(#generic_args),*>(#device, #grid, &::tritium::backend::LaunchOptions::default(), #(#own_names),*)
        }

        /// [`launch`](self::launch) with no access checked at run time, not even those the
        /// kernel's bounds proof does not cover for this launch (Triton's behaviour).
        ///
        /// # Safety
        ///
        /// Every load, store and atomic of the launch (of every config the autotuner
        /// times) whose mask is true must touch only bytes of the buffer its pointer
        /// derives from, and write only buffers passed as `&mut` (see
        /// [`LaunchOptions::unchecked`](::tritium::backend::LaunchOptions::unchecked)).
        pub unsafe fn launch_unchecked #grid_g (
            #device: &::tritium::backend::Device,
            #grid: impl ::core::ops::Fn(&self::Meta) -> __G,
            #(#own_params3),*
        ) -> ::tritium::backend::Result<()> #where_clause {
            // SAFETY: this function's caller promises what `unchecked` asks.
            let __options = unsafe { ::tritium::backend::LaunchOptions::default().unchecked() };
            self::launch_with::<#(#generic_args),*>(#device, #grid, &__options, #(#own_names2),*)
        }

        /// Launches the kernel with explicit [`LaunchOptions`](::tritium::backend::LaunchOptions)
        /// (an autotuner's config sets `num_warps` and `num_stages`).
        pub fn launch_with #grid_g (
            #device: &::tritium::backend::Device,
            #grid: impl ::core::ops::Fn(&self::Meta) -> __G,
            #options: &::tritium::backend::LaunchOptions,
            #(#own_params2),*
        ) -> ::tritium::backend::Result<()> #where_clause {
            let mut __args = ::tritium::backend::KernelArgs::new();
            #(#pushes)*
            #run
        }

        /// Launches the kernel with every constexpr given, choosing nothing.
        pub fn launch_explicit #launch_g (
            #device: &::tritium::backend::Device,
            #grid: impl ::core::convert::Into<::tritium::backend::Grid>,
            #options: &::tritium::backend::LaunchOptions,
            #(#all_params),*
        ) -> ::tritium::backend::Result<()> #where_clause {
            let mut __args = ::tritium::backend::KernelArgs::new();
            #(#pushes)*
            #dispatch
        }
    }
}

/// `autotuner()`: the kernel's tuner, named by its module path and source hash.
fn autotuner(k: &Kernel, a: &Autotune, source: u64) -> TokenStream {
    let spec = |c: &ConfigSpec| {
        let values = c.values.iter().map(|(n, v)| {
            let n = LitStr::new(&n.to_string(), n.span());
            quote!((#n, (#v) as i64))
        });
        let warps = c
            .num_warps
            .as_ref()
            .map(|w| quote!(.num_warps((#w) as u32)));
        let stages = c
            .num_stages
            .as_ref()
            .map(|s| quote!(.num_stages((#s) as u32)));
        quote!(::tritium::autotune::Config::new(&[#(#values),*]) #warps #stages)
    };
    let configs = match &a.configs {
        Configs::List(list) => {
            let list = list.iter().map(spec);
            quote!(::std::vec![#(#list),*])
        }
        Configs::Comprehension {
            template,
            loops,
            filter,
        } => {
            let one = spec(template);
            let mut body = match filter {
                Some(f) => quote!(if #f { __configs.push(#one); }),
                None => quote!(__configs.push(#one);),
            };
            for (pat, over) in loops.iter().rev() {
                body = quote!(for #pat in #over { #body });
            }
            quote!({
                let mut __configs = ::std::vec::Vec::new();
                #body
                __configs
            })
        }
        Configs::Expr(e) => quote!(::std::iter::IntoIterator::into_iter(#e).collect()),
    };
    let prune = a
        .prune
        .as_ref()
        .map(|p| quote!(.prune_configs_by(::std::boxed::Box::new(#p))));
    let source = LitStr::new(&format!("{source:016x}"), k.ident.span());
    quote! {
        /// The kernel's autotuner: its configs and the choices made so far (in memory and
        /// under the cache directory, keyed by this kernel's source).
        pub fn autotuner() -> &'static ::tritium::autotune::Autotuner {
            static TUNER: ::std::sync::OnceLock<::tritium::autotune::Autotuner> = ::std::sync::OnceLock::new();
            TUNER.get_or_init(|| {
                let name = ::std::format!("{}::{}#{}", ::core::module_path!(), self::NAME, #source);
                ::tritium::autotune::Autotuner::new(&name, #configs) #prune
            })
        }
    }
}

/// The tuned launch: key values, then `launch_tuned` running `body` per config.
fn tuned_run(k: &Kernel, a: &Autotune, device: &Ident, body: &TokenStream) -> TokenStream {
    let key = a
        .key
        .iter()
        .map(|id| quote!(::tritium::autotune::KeyValue::key_value(&#id)));
    let generic_keys = k.generics.params.iter().filter_map(|g| match g {
        GenericParam::Type(t) => {
            let id = &t.ident;
            Some(quote!(::tritium::autotune::KeyValue::key_value(&<#id as ::tritium::dsl::trace::Element>::DTYPE)))
        }
        GenericParam::Const(c) => {
            let id = &c.ident;
            Some(quote!(::tritium::autotune::KeyValue::key_value(&#id)))
        }
        GenericParam::Lifetime(_) => None,
    });
    let names = |ids: &[Ident]| {
        let lits = ids.iter().map(|i| LitStr::new(&i.to_string(), i.span()));
        quote!(&[#(#lits),*])
    };
    let (resets, restores) = (names(&a.reset_to_zero), names(&a.restore_value));
    quote! {
        let __key: &[i64] = &[#(#key,)* #(#generic_keys),*];
        ::tritium::autotune::launch_tuned(
            self::NAME,
            self::autotuner(),
            #device,
            __key,
            ::tritium::autotune::InPlace { reset_to_zero: #resets, restore_value: #restores },
            __args,
            |__config: &::tritium::autotune::Config, __args: ::tritium::backend::KernelArgs<'_>| -> ::tritium::backend::Result<()> {
                #body
            },
        )
    }
}
