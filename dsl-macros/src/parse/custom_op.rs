//! The arguments of `#[register_custom_op(core = …, pipe = …, mode = …, name = "…")]`.

use proc_macro2::Span;
use syn::parse::{Parse, ParseStream};
use syn::punctuated::Punctuated;
use syn::{Error, Ident, LitStr, Token};

/// The enum variants the attribute accepts, as DESIGN.md names them.
pub const CORES: &[&str] = &["Vector", "Cube", "CubeOrVector", "CubeAndVector"];
/// Pipes.
pub const PIPES: &[&str] = &[
    "PipeS", "PipeV", "PipeM", "PipeMte1", "PipeMte2", "PipeMte3", "PipeAll", "PipeFix",
];
/// Vector modes.
pub const MODES: &[&str] = &["Simd", "Simt", "Mix"];

/// The parsed attribute.
pub struct CustomOpArgs {
    /// `core = …`.
    pub core: Ident,
    /// `pipe = …`.
    pub pipe: Ident,
    /// `mode = …`, if given.
    pub mode: Option<Ident>,
    /// `name = "…"`, if given.
    pub name: Option<LitStr>,
}

enum Value {
    Ident(Ident),
    Str(LitStr),
}

struct Arg {
    key: Ident,
    value: Value,
}

impl Parse for Arg {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let key: Ident = input.parse()?;
        input.parse::<Token![=]>()?;
        let value = if input.peek(LitStr) {
            Value::Str(input.parse()?)
        } else {
            Value::Ident(input.parse()?)
        };
        Ok(Arg { key, value })
    }
}

fn variant(key: &Ident, value: Value, allowed: &[&str]) -> syn::Result<Ident> {
    match value {
        Value::Ident(id) if allowed.contains(&id.to_string().as_str()) => Ok(id),
        Value::Ident(id) => Err(Error::new(
            id.span(),
            format!(
                "unknown {key} `{id}`; expected one of {}",
                allowed.join(", ")
            ),
        )),
        Value::Str(s) => Err(Error::new(
            s.span(),
            format!("`{key}` takes a name, one of {}", allowed.join(", ")),
        )),
    }
}

impl Parse for CustomOpArgs {
    fn parse(input: ParseStream) -> syn::Result<Self> {
        let args = Punctuated::<Arg, Token![,]>::parse_terminated(input)?;
        let (mut core, mut pipe, mut mode, mut name) = (None, None, None, None);
        for Arg { key, value } in args {
            let k = key.to_string();
            let dup = |set: bool| -> syn::Result<()> {
                if set {
                    return Err(Error::new(key.span(), format!("`{k}` is given twice")));
                }
                Ok(())
            };
            match k.as_str() {
                "core" => {
                    dup(core.is_some())?;
                    core = Some(variant(&key, value, CORES)?);
                }
                "pipe" => {
                    dup(pipe.is_some())?;
                    pipe = Some(variant(&key, value, PIPES)?);
                }
                "mode" => {
                    dup(mode.is_some())?;
                    mode = Some(variant(&key, value, MODES)?);
                }
                "name" => {
                    dup(name.is_some())?;
                    match value {
                        Value::Str(s) => name = Some(s),
                        Value::Ident(id) => {
                            return Err(Error::new(id.span(), "`name` takes a string, e.g. `name = \"add\"`"))
                        }
                    }
                }
                _ => {
                    return Err(Error::new(
                        key.span(),
                        format!("unknown argument `{k}`; `#[register_custom_op]` takes core, pipe, mode and name"),
                    ))
                }
            }
        }
        let missing = |what: &str, allowed: &[&str]| {
            Error::new(
                Span::call_site(),
                format!(
                    "`#[register_custom_op]` needs `{what} = …` (one of {})",
                    allowed.join(", ")
                ),
            )
        };
        Ok(CustomOpArgs {
            core: core.ok_or_else(|| missing("core", CORES))?,
            pipe: pipe.ok_or_else(|| missing("pipe", PIPES))?,
            mode,
            name,
        })
    }
}

/// `CustomAdd` → `custom_add`.
pub fn snake_case(name: &str) -> String {
    let mut out = String::new();
    let chars: Vec<char> = name.chars().collect();
    for (i, c) in chars.iter().enumerate() {
        if c.is_uppercase() {
            let prev_lower =
                i > 0 && (chars[i - 1].is_lowercase() || chars[i - 1].is_ascii_digit());
            let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
            if i > 0 && (prev_lower || (next_lower && chars[i - 1].is_uppercase())) {
                out.push('_');
            }
            out.extend(c.to_lowercase());
        } else {
            out.push(*c);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::snake_case;

    #[test]
    fn snake_case_names() {
        for (input, want) in [
            ("Add", "add"),
            ("CustomAdd", "custom_add"),
            ("HTTPServer", "http_server"),
            ("Add2D", "add2_d"),
            ("already_snake", "already_snake"),
        ] {
            assert_eq!(snake_case(input), want, "{input}");
        }
    }
}
