//! `#[device]`: the same function with its body rewritten and `#[track_caller]` added, so
//! the ops it traces are located at the kernel's call of the helper.

use super::body::{rewrite_block, FnKind};
use crate::parse::signature::parse_device;
use proc_macro2::TokenStream;
use quote::ToTokens;
use syn::{parse_quote, Error, ItemFn};

/// Expands `#[device] fn …`.
pub fn expand(item: ItemFn) -> Result<TokenStream, Error> {
    let mut item = parse_device(item)?;
    rewrite_block(&mut item.block, FnKind::Device)?;
    if !item.attrs.iter().any(|a| a.path().is_ident("track_caller")) {
        item.attrs.push(parse_quote!(#[track_caller]));
    }
    Ok(item.into_token_stream())
}
