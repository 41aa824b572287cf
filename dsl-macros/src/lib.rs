//! Tritium's procedural macros: `#[kernel]` turns a Triton-style function into a module
//! that traces it to the tile IR and launches it; `#[device]` makes a helper callable from
//! kernels.
//!
//! Layout: [`parse`] analyses the user's code (signatures, builtins, loop ranges, assigned
//! variables); [`generate`] emits the tracing code. Every error is a `syn::Error` at the
//! user's span.

use proc_macro::TokenStream;
use syn::{parse_macro_input, Error, ItemFn, ItemStruct};

mod generate;
mod parse;

/// Turns `fn NAME(params) { body }` into a module `NAME` with `NAME::trace`,
/// `NAME::launch(&device, grid, args…)` and `NAME::launch_with(&device, grid, &options, args…)`.
///
/// Parameters: `x: Ptr<T>` is a pointer, `#[constexpr] X: T` a compile-time value the
/// kernel is specialized on, anything else a runtime scalar.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    if let Some(t) = proc_macro2::TokenStream::from(attr).into_iter().next() {
        return Error::new(t.span(), "`#[kernel]` takes no arguments")
            .to_compile_error()
            .into();
    }
    let item = parse_macro_input!(item as ItemFn);
    generate::kernel::expand(item)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Autotuning as Triton's `@triton.autotune`, written below `#[kernel]` (or above it):
///
/// ```ignore
/// #[kernel]
/// #[autotune(configs = [config(BLOCK = 256), config(BLOCK = 1024, num_warps = 8)], key = [n])]
/// fn add(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) { … }
///
/// add::launch(&device, |meta: &add::Meta| n.div_ceil(meta.BLOCK as i32) as u32, &mut out, &x, n)?;
/// ```
///
/// `prune_configs_by = f`, `reset_to_zero = [out]` and `restore_value = [x]` as Triton's.
/// The tuned constexprs leave the launch's parameters; `launch_explicit` takes them all.
#[proc_macro_attribute]
pub fn autotune(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = parse_macro_input!(item as ItemFn);
    generate::kernel::reorder_under_kernel("autotune", attr.into(), item)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Constexprs computed from the other arguments, as Triton's `@triton.heuristics`:
/// `#[heuristics(EVEN = n % BLOCK as i32 == 0)]` below `#[kernel]` (or above it).
#[proc_macro_attribute]
pub fn heuristics(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = parse_macro_input!(item as ItemFn);
    generate::kernel::reorder_under_kernel("heuristics", attr.into(), item)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Makes a helper callable from kernels: the body is rewritten like a kernel body and the
/// function gets `#[track_caller]`. Parameters are `Tile`s or plain Rust values
/// (`#[constexpr]` is accepted and removed).
#[proc_macro_attribute]
pub fn device(attr: TokenStream, item: TokenStream) -> TokenStream {
    if let Some(t) = proc_macro2::TokenStream::from(attr).into_iter().next() {
        return Error::new(t.span(), "`#[device]` takes no arguments")
            .to_compile_error()
            .into();
    }
    let item = parse_macro_input!(item as ItemFn);
    generate::device::expand(item)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}

/// Registers a custom op implemented in imported bitcode (triton-ascend's
/// `@al.register_custom_op`):
///
/// ```ignore
/// #[register_custom_op(core = Vector, pipe = PipeV, mode = Simd)]
/// struct Add; // registered as "add"; `name = "…"` overrides
///
/// impl Add {
///     fn init(args: &CustomArgs) -> Result<CustomImpl, String> {
///         Ok(CustomImpl::new(format!("custom_add_{}", args.in_dtype(0)?.str_name()))
///             .bitcode(include_bitcode!("add.bc")))
///     }
/// }
/// ```
///
/// Kernels call it as `custom("add", a, b, out = buf)` or `Add::call((a, b), buf)`.
#[proc_macro_attribute]
pub fn register_custom_op(attr: TokenStream, item: TokenStream) -> TokenStream {
    let args = parse_macro_input!(attr as parse::custom_op::CustomOpArgs);
    let item = parse_macro_input!(item as ItemStruct);
    generate::custom_op::expand(args, item)
        .unwrap_or_else(Error::into_compile_error)
        .into()
}
