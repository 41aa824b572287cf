//! `#[device]`: the same function with its body rewritten and `#[track_caller]` added, so
//! the ops it traces are located at the kernel's call of the helper.

use super::body::{rewrite_block, FnKind};
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
    let mut item = parse_device(item)?;
    rewrite_block(&mut item.block, FnKind::Device)?;
    if !item.attrs.iter().any(|a| a.path().is_ident("track_caller")) {
        item.attrs.push(parse_quote!(#[track_caller]));
    }
    Ok(item.into_token_stream())
}
