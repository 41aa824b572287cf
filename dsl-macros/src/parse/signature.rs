//! Kernel and device-function signatures: parameters classified as pointer, runtime
//! scalar or `#[constexpr]`.

use proc_macro2::Ident;
use syn::spanned::Spanned;
use syn::{
    Attribute, Block, Error, FnArg, GenericArgument, GenericParam, Generics, ItemFn, Pat,
    PathArguments, ReturnType, Signature, Token, Type, Visibility,
};

/// What a kernel parameter is.
#[derive(Debug, Clone)]
pub enum ParamKind {
    /// `x: Ptr<T>`: a pointer to `T` elements.
    Ptr {
        /// The element type `T`.
        elem: Box<Type>,
        /// Position among runtime parameters.
        index: usize,
    },
    /// `x: T`: a runtime scalar; `index` counts pointer and scalar parameters.
    Scalar {
        /// Position among runtime parameters.
        index: usize,
    },
    /// `#[constexpr] x: T`: a plain Rust value the kernel is specialized on.
    Constexpr,
}

/// One kernel parameter.
#[derive(Debug, Clone)]
pub struct KernelParam {
    /// Attributes other than `#[constexpr]`.
    pub attrs: Vec<Attribute>,
    /// `mut` on the binding.
    pub mutability: Option<Token![mut]>,
    /// The name.
    pub ident: Ident,
    /// The declared type.
    pub ty: Type,
    /// Pointer, scalar or constexpr.
    pub kind: ParamKind,
}

impl KernelParam {
    /// True for pointer and scalar parameters.
    pub fn is_runtime(&self) -> bool {
        !matches!(self.kind, ParamKind::Constexpr)
    }
}

/// A parsed `#[kernel]` function.
pub struct Kernel {
    /// Outer attributes (doc comments included); they go onto the generated module.
    pub attrs: Vec<Attribute>,
    /// Visibility of the function, used for the module.
    pub vis: Visibility,
    /// The kernel's name.
    pub ident: Ident,
    /// Type and const generics (no lifetimes).
    pub generics: Generics,
    /// Parameters, in order.
    pub params: Vec<KernelParam>,
    /// The body.
    pub body: Block,
}

/// Removes `#[constexpr]` from `attrs`; returns whether it was there.
pub fn take_constexpr(attrs: &mut Vec<Attribute>) -> Result<bool, Error> {
    let mut found = false;
    let mut err = None;
    attrs.retain(|a| {
        if a.path().is_ident("constexpr") {
            if !matches!(a.meta, syn::Meta::Path(_)) {
                err = Some(Error::new(a.span(), "`#[constexpr]` takes no arguments"));
            }
            found = true;
            false
        } else {
            true
        }
    });
    match err {
        Some(e) => Err(e),
        None => Ok(found),
    }
}

/// `Ptr<T>` → `Some(T)`.
fn ptr_elem(ty: &Type) -> Option<Type> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() {
        return None;
    }
    let last = p.path.segments.last()?;
    if last.ident != "Ptr" {
        return None;
    }
    let PathArguments::AngleBracketed(args) = &last.arguments else {
        return None;
    };
    if args.args.len() != 1 {
        return None;
    }
    match &args.args[0] {
        GenericArgument::Type(t) => Some(t.clone()),
        _ => None,
    }
}

/// Checks what a kernel and a device function share: no `async`, `unsafe`, `extern`,
/// variadics or receivers.
fn check_signature(sig: &Signature, what: &str) -> Result<(), Error> {
    if let Some(a) = &sig.asyncness {
        return Err(Error::new(a.span(), format!("a {what} cannot be `async`")));
    }
    if let Some(u) = &sig.unsafety {
        return Err(Error::new(u.span(), format!("a {what} cannot be `unsafe`")));
    }
    if let Some(c) = &sig.constness {
        return Err(Error::new(c.span(), format!("a {what} cannot be `const`")));
    }
    if let Some(abi) = &sig.abi {
        return Err(Error::new(
            abi.span(),
            format!("a {what} cannot have an `extern` ABI"),
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(Error::new(v.span(), format!("a {what} cannot be variadic")));
    }
    Ok(())
}

/// Parses a `#[kernel]` function.
pub fn parse_kernel(item: ItemFn) -> Result<Kernel, Error> {
    let sig = &item.sig;
    check_signature(sig, "kernel")?;
    if let ReturnType::Type(_, ty) = &sig.output {
        return Err(Error::new(
            ty.span(),
            "a kernel cannot return a value; write results through a `Ptr` parameter with `store`",
        ));
    }
    for g in &sig.generics.params {
        if let GenericParam::Lifetime(l) = g {
            return Err(Error::new(
                l.span(),
                "a kernel cannot have lifetime parameters",
            ));
        }
    }
    let mut params = Vec::new();
    let mut runtime = 0usize;
    for input in &sig.inputs {
        let pt = match input {
            FnArg::Receiver(r) => return Err(Error::new(r.span(), "a kernel cannot take `self`")),
            FnArg::Typed(pt) => pt,
        };
        let mut attrs = pt.attrs.clone();
        let constexpr = take_constexpr(&mut attrs)?;
        let (ident, mutability) = match &*pt.pat {
            Pat::Ident(pi) if pi.by_ref.is_none() && pi.subpat.is_none() => {
                (pi.ident.clone(), pi.mutability)
            }
            other => {
                return Err(Error::new(
                    other.span(),
                    "kernel parameters must be plain names (`x: Ptr<f32>`)",
                ));
            }
        };
        if ident.to_string().starts_with("__") {
            return Err(Error::new(
                ident.span(),
                "kernel parameter names starting with `__` are reserved",
            ));
        }
        let ty = (*pt.ty).clone();
        let kind = if constexpr {
            ParamKind::Constexpr
        } else if let Some(elem) = ptr_elem(&ty) {
            runtime += 1;
            ParamKind::Ptr {
                elem: Box::new(elem),
                index: runtime - 1,
            }
        } else {
            runtime += 1;
            ParamKind::Scalar { index: runtime - 1 }
        };
        params.push(KernelParam {
            attrs,
            mutability,
            ident,
            ty,
            kind,
        });
    }
    Ok(Kernel {
        attrs: item.attrs,
        vis: item.vis,
        ident: item.sig.ident.clone(),
        generics: item.sig.generics.clone(),
        params,
        body: *item.block,
    })
}

/// Parses a `#[device]` function: checks the signature and strips `#[constexpr]` from its
/// parameters (device parameters are plain Rust values: `Tile`s or constexprs); a
/// constexpr parameter may be UPPER_CASE.
pub fn parse_device(mut item: ItemFn) -> Result<ItemFn, Error> {
    check_signature(&item.sig, "device function")?;
    for input in item.sig.inputs.iter_mut() {
        match input {
            FnArg::Receiver(_) => {}
            FnArg::Typed(pt) => {
                if take_constexpr(&mut pt.attrs)? {
                    // Constexprs are conventionally UPPER_CASE, as in Triton.
                    pt.attrs.push(syn::parse_quote!(#[allow(non_snake_case)]));
                }
            }
        }
    }
    Ok(item)
}
