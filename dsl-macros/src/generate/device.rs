//! `#[device]`: the same function with its body rewritten and `#[track_caller]` added, so
//! the ops it traces are located at the kernel's call of the helper.

use super::body::{rewrite_block, FnKind};
use super::promote::PlainNames;
use crate::parse::builtins;
use crate::parse::signature::parse_device;
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{parse_quote, Error, ItemFn};

/// Expands `#[device] fn …`.
pub fn expand(item: ItemFn) -> Result<TokenStream, Error> {
    let name = item.sig.ident.to_string();
    if builtins::lookup(&name).is_some()
        || ["custom", "device_print", "static_range", "range"].contains(&name.as_str())
    {
        // Kernel code calls the builtin by this name; the helper would never run.
        return Err(Error::new(
            item.sig.ident.span(),
            format!(
                "a #[device] function cannot be named `{name}`: kernel code calls the builtin \
                 `{name}` by that name, so this function would never be called; rename it"
            ),
        ));
    }
    let plain = plain_params(&item);
    let mut item = parse_device(item)?;
    rewrite_block(&mut item.block, FnKind::Device, &plain)?;
    if !item.attrs.iter().any(|a| a.path().is_ident("track_caller")) {
        item.attrs.push(parse_quote!(#[track_caller]));
    }
    Ok(item.into_token_stream())
}

/// The parameters holding plain Rust values: `#[constexpr]` ones, those of a primitive
/// type (`usize`, `bool`, `f32`, …), and const generics.
fn plain_params(item: &ItemFn) -> PlainNames {
    const PLAIN_TYPES: &[&str] = &[
        "bool", "i8", "i16", "i32", "i64", "isize", "u8", "u16", "u32", "u64", "usize", "f32",
        "f64", "DType",
    ];
    let mut names = Vec::new();
    for input in &item.sig.inputs {
        let syn::FnArg::Typed(pt) = input else {
            continue;
        };
        let syn::Pat::Ident(pi) = &*pt.pat else {
            continue;
        };
        let constexpr = pt.attrs.iter().any(|a| a.path().is_ident("constexpr"));
        let primitive = matches!(&*pt.ty, syn::Type::Path(p)
            if p.path.get_ident().is_some_and(|t| PLAIN_TYPES.contains(&t.to_string().as_str())));
        if constexpr || primitive {
            names.push(&pi.ident);
        }
    }
    names.extend(item.sig.generics.params.iter().filter_map(|g| match g {
        syn::GenericParam::Const(c) => Some(&c.ident),
        _ => None,
    }));
    PlainNames::new(names)
}
