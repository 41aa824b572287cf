//! `#[register_custom_op]`: keeps the struct, adds `NAME` and the typed `call`, and submits
//! the registration to the link-time registry (so any crate's kernels can call it).

use crate::parse::custom_op::{snake_case, CustomOpArgs};
use proc_macro2::TokenStream;
use quote::{quote, quote_spanned};
use syn::{Error, ItemStruct, LitStr};

pub fn expand(args: CustomOpArgs, item: ItemStruct) -> Result<TokenStream, Error> {
    if !item.generics.params.is_empty() {
        return Err(Error::new_spanned(
            &item.generics,
            "a custom op struct cannot be generic; choose the symbol per dtype in `init`",
        ));
    }
    let ty = &item.ident;
    let name = args
        .name
        .clone()
        .unwrap_or_else(|| LitStr::new(&snake_case(&ty.to_string()), ty.span()));
    if name.value().is_empty() || name.value().starts_with("__builtin") {
        return Err(Error::new(
            name.span(),
            "custom op names must be non-empty and must not start with `__builtin` (reserved for the shipped library)",
        ));
    }
    let core = &args.core;
    let pipe = &args.pipe;
    let mode = match &args.mode {
        Some(m) => quote!(::core::option::Option::Some(::tritium::dsl::ir::Mode::#m)),
        None => quote!(::core::option::Option::None),
    };
    let init = quote_spanned!(ty.span()=> {
        // `init` must be `fn(&CustomArgs) -> Result<CustomImpl, String>`.
        let init: fn(&::tritium::dsl::custom::CustomArgs)
            -> ::core::result::Result<::tritium::dsl::custom::CustomImpl, ::std::string::String> = #ty::init;
        init
    });
    let vis = &item.vis;
    Ok(quote! {
        #item

        impl #ty {
            /// The name kernels call this op by: `custom(NAME, …)`.
            #vis const NAME: &'static str = #name;

            /// Calls the op from kernel code: `Op::call((a, b), out)` or `Op::call((a,), (o1, o2))`.
            #[track_caller]
            #vis fn call<I, O>(ins: I, outs: O) -> O::Output
            where
                I: ::tritium::dsl::custom::CustomIns,
                O: ::tritium::dsl::custom::CustomOuts,
            {
                ::tritium::dsl::custom::custom(Self::NAME, ins, outs)
            }
        }

        ::tritium::dsl::custom::inventory::submit! {
            ::tritium::dsl::custom::CustomOpDef {
                name: #name,
                core: ::tritium::dsl::ir::CoreType::#core,
                pipe: ::tritium::dsl::ir::Pipe::#pipe,
                mode: #mode,
                init: #init,
                declared_at: ::core::concat!(::core::module_path!(), "::", ::core::stringify!(#ty), " at ", ::core::file!(), ":", ::core::line!()),
            }
        }
    })
}
