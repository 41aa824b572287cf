//! Parser for the text form written by [`print_function`](super::print_function).
//!
//! Any text gives a function or an error naming its line: nothing is sized by a number read
//! from the text, value numbers stay below [`MAX_VALUES`] and regions nest at most
//! [`MAX_NESTING`] deep.

use super::{
    AtomicOp, BinOp, Bitcode, Block, CacheHints, CacheModifier, CmpPred, Const, CoreType,
    CustomAttrs, CustomCall, DType, Elem, Eviction, ExtraBuffer, Function, HintKind, InlineAsm,
    Inst, Loc, Mode, Op, Param, Pipe, ReduceOp, ScanOp, Type, UnOp, Value, MAX_NESTING, MAX_VALUES,
};
use crate::{Error, Result};
use std::collections::HashMap;

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Val(u32),
    Global(String),
    Word(String),
    Str(String),
    Punct(char),
}

struct Parser {
    toks: Vec<(Tok, usize)>,
    pos: usize,
    /// By value number: a map, as the numbers come from the text.
    types: HashMap<u32, Type>,
    /// How many regions enclose the current op.
    depth: usize,
}

/// Parses the text form of one kernel.
pub fn parse_function(text: &str) -> Result<Function> {
    let mut p = Parser {
        toks: lex(text)?,
        pos: 0,
        types: HashMap::new(),
        depth: 0,
    };
    let f = p.function()?;
    if p.pos != p.toks.len() {
        return Err(p.err("trailing text after the kernel"));
    }
    Ok(f)
}

fn lex(text: &str) -> Result<Vec<(Tok, usize)>> {
    let mut toks = Vec::new();
    for (ln, line) in text.lines().enumerate() {
        let line_no = ln + 1;
        let chars: Vec<char> = line.chars().collect();
        let mut i = 0;
        while i < chars.len() {
            let c = chars[i];
            if c.is_whitespace() {
                i += 1;
            } else if c == '/' && chars.get(i + 1) == Some(&'/') {
                break;
            } else if c == '%' || c == '@' {
                let start = i + 1;
                i += 1;
                while i < chars.len() && is_word(chars[i]) {
                    i += 1;
                }
                let s: String = chars[start..i].iter().collect();
                if c == '@' {
                    toks.push((Tok::Global(s), line_no));
                } else {
                    toks.push((Tok::Val(value_number(&s, line_no)?), line_no));
                }
            } else if c == '"' {
                let mut s = String::new();
                i += 1;
                loop {
                    match chars.get(i) {
                        None => {
                            return Err(Error::Parse {
                                line: line_no,
                                message: "unterminated string".into(),
                            })
                        }
                        Some('"') => break,
                        Some('\\') => {
                            let (c, len) = unescape(&chars[i + 1..], line_no)?;
                            s.push(c);
                            i += len;
                        }
                        Some(&c) => s.push(c),
                    }
                    i += 1;
                }
                i += 1;
                toks.push((Tok::Str(s), line_no));
            } else if is_word(c) || c == '-' {
                let start = i;
                i += 1;
                while i < chars.len() && (is_word(chars[i]) || chars[i] == '.' || chars[i] == '+') {
                    // `1e-5` keeps its sign inside a number.
                    i += 1;
                    if i < chars.len() && chars[i] == '-' && matches!(chars[i - 1], 'e' | 'E') {
                        i += 1;
                    }
                }
                toks.push((Tok::Word(chars[start..i].iter().collect()), line_no));
            } else {
                toks.push((Tok::Punct(c), line_no));
                i += 1;
            }
        }
    }
    Ok(toks)
}

/// The number of `%<s>`, below [`MAX_VALUES`].
fn value_number(s: &str, line: usize) -> Result<u32> {
    let err = |message| Err(Error::Parse { line, message });
    if s.is_empty() || !s.bytes().all(|b| b.is_ascii_digit()) {
        return err(format!("bad value name `%{s}`"));
    }
    match s.parse::<usize>() {
        Ok(n) if n < MAX_VALUES => Ok(n as u32),
        _ => err(format!(
            "value number `%{s}` is over the limit: values are numbered below {MAX_VALUES} \
             (MAX_VALUES)"
        )),
    }
}

/// The char an escape stands for and how many chars after the backslash it takes:
/// `\"`, `\\`, `\n`, `\t`, `\r`, `\0`, `\'` and `\u{hex}`.
fn unescape(rest: &[char], line: usize) -> Result<(char, usize)> {
    let err = |message: String| Err(Error::Parse { line, message });
    let c = match rest.first() {
        Some('n') => '\n',
        Some('t') => '\t',
        Some('r') => '\r',
        Some('0') => '\0',
        Some(&c @ ('"' | '\\' | '\'')) => c,
        Some('u') => {
            let close = rest.iter().take(9).position(|c| *c == '}');
            let (Some('{'), Some(close)) = (rest.get(1), close) else {
                return err("a `\\u` escape needs `{hex}` (at most 6 digits)".into());
            };
            let hex: String = rest[2..close].iter().collect();
            return match u32::from_str_radix(&hex, 16).ok().and_then(char::from_u32) {
                Some(c) if !hex.is_empty() && !hex.starts_with('+') => Ok((c, close + 1)),
                _ => err(format!("`\\u{{{hex}}}` is not a Unicode scalar value")),
            };
        }
        Some(c) => return err(format!("unknown escape `\\{c}` in a string")),
        None => return err("unterminated string".into()),
    };
    Ok((c, 1))
}

fn is_word(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

impl Parser {
    fn err(&self, message: impl Into<String>) -> Error {
        let line = self
            .toks
            .get(self.pos)
            .or(self.toks.last())
            .map(|t| t.1)
            .unwrap_or(1);
        Error::Parse {
            line,
            message: message.into(),
        }
    }

    fn peek(&self) -> Option<&Tok> {
        self.toks.get(self.pos).map(|t| &t.0)
    }

    fn next(&mut self) -> Result<Tok> {
        let t = self.toks.get(self.pos).map(|t| t.0.clone());
        self.pos += 1;
        t.ok_or_else(|| self.err("unexpected end of text"))
    }

    fn punct(&mut self, c: char) -> Result<()> {
        match self.next()? {
            Tok::Punct(p) if p == c => Ok(()),
            t => {
                self.pos -= 1;
                Err(self.err(format!("expected `{c}`, found {t:?}")))
            }
        }
    }

    fn eat_punct(&mut self, c: char) -> bool {
        if self.peek() == Some(&Tok::Punct(c)) {
            self.pos += 1;
            true
        } else {
            false
        }
    }

    fn word(&mut self) -> Result<String> {
        match self.next()? {
            Tok::Word(w) => Ok(w),
            t => {
                self.pos -= 1;
                Err(self.err(format!("expected a word, found {t:?}")))
            }
        }
    }

    fn keyword(&mut self, kw: &str) -> Result<()> {
        let w = self.word()?;
        if w == kw {
            Ok(())
        } else {
            self.pos -= 1;
            Err(self.err(format!("expected `{kw}`, found `{w}`")))
        }
    }

    fn value(&mut self) -> Result<Value> {
        match self.next()? {
            Tok::Val(n) => Ok(Value(n)),
            t => {
                self.pos -= 1;
                Err(self.err(format!("expected a value, found {t:?}")))
            }
        }
    }

    fn define(&mut self, v: Value, ty: Type) -> Result<()> {
        if self.types.insert(v.0, ty).is_some() {
            return Err(self.err(format!("value {v} defined twice")));
        }
        Ok(())
    }

    fn dtype(&self, w: &str) -> Result<DType> {
        DType::from_name(w).ok_or_else(|| self.err(format!("unknown dtype `{w}`")))
    }

    fn ty(&mut self) -> Result<Type> {
        let w = self.word()?;
        match w.as_str() {
            "ptr" => {
                self.punct('<')?;
                let d = self.word()?;
                let d = self.dtype(&d)?;
                self.punct('>')?;
                Ok(Type::ptr(d))
            }
            "tile" => {
                self.punct('<')?;
                let spec = self.word()?;
                let mut parts: Vec<&str> = spec.split('x').collect();
                let last = parts.pop().unwrap_or_default();
                let shape = parts
                    .iter()
                    .map(|p| {
                        p.parse::<usize>()
                            .map_err(|_| self.err(format!("bad dim `{p}`")))
                    })
                    .collect::<Result<Vec<_>>>()?;
                if shape.is_empty() {
                    return Err(self.err("a tile type needs at least one dim"));
                }
                let elem = if last == "ptr" {
                    self.punct('<')?;
                    let d = self.word()?;
                    let d = self.dtype(&d)?;
                    self.punct('>')?;
                    Elem::Ptr(d)
                } else {
                    Elem::Scalar(self.dtype(last)?)
                };
                self.punct('>')?;
                Ok(Type::tile(elem, shape))
            }
            d => Ok(Type::scalar(self.dtype(d)?)),
        }
    }

    fn function(&mut self) -> Result<Function> {
        self.keyword("kernel")?;
        let name = match self.next()? {
            Tok::Global(g) => g,
            _ => return Err(self.err("expected `@name`")),
        };
        self.punct('(')?;
        let mut params = Vec::new();
        while !self.eat_punct(')') {
            if !params.is_empty() {
                self.punct(',')?;
            }
            let name = self.word()?;
            let v = self.value()?;
            self.punct(':')?;
            let ty = self.ty()?;
            self.define(v, ty)?;
            params.push(Param { name, value: v });
        }
        self.punct('{')?;
        let body = self.insts()?;
        self.punct('}')?;
        // Values are numbered 0, 1, …: with n defined, a gap lies below n.
        let mut defined = std::mem::take(&mut self.types);
        let types = (0..defined.len() as u32)
            .map(|i| {
                defined
                    .remove(&i)
                    .ok_or_else(|| self.err(format!("value %{i} is never defined")))
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Function {
            name,
            params,
            body: Block {
                args: vec![],
                insts: body,
            },
            types,
        })
    }

    fn insts(&mut self) -> Result<Vec<Inst>> {
        let mut insts = Vec::new();
        while !matches!(self.peek(), Some(Tok::Punct('}')) | None) {
            insts.push(self.inst()?);
        }
        Ok(insts)
    }

    fn region(&mut self) -> Result<Block> {
        if self.depth >= MAX_NESTING {
            return Err(self.err(format!(
                "regions nest more than {MAX_NESTING} deep (MAX_NESTING)"
            )));
        }
        self.depth += 1;
        let b = self.region_body();
        self.depth -= 1;
        b
    }

    fn region_body(&mut self) -> Result<Block> {
        self.punct('{')?;
        self.punct('^')?;
        self.punct('(')?;
        let mut args = Vec::new();
        while !self.eat_punct(')') {
            if !args.is_empty() {
                self.punct(',')?;
            }
            let v = self.value()?;
            self.punct(':')?;
            let ty = self.ty()?;
            self.define(v, ty)?;
            args.push(v);
        }
        let insts = self.insts()?;
        self.punct('}')?;
        Ok(Block { args, insts })
    }

    fn attrs(&mut self) -> Result<Vec<(String, String)>> {
        let mut attrs = Vec::new();
        if !self.eat_punct('{') {
            return Ok(attrs);
        }
        while !self.eat_punct('}') {
            if !attrs.is_empty() {
                self.punct(',')?;
            }
            let k = self.word()?;
            if attrs.iter().any(|(n, _)| *n == k) {
                return Err(self.err(format!("attribute `{k}` given twice")));
            }
            self.punct('=')?;
            // A quoted value keeps a leading `"` (no word starts with one): see `string_attr`.
            let v = match self.peek() {
                Some(Tok::Str(_)) => match self.next()? {
                    Tok::Str(s) => format!("\"{s}"),
                    _ => unreachable!("peeked a string"),
                },
                _ => self.word()?,
            };
            attrs.push((k, v));
        }
        Ok(attrs)
    }

    fn inst(&mut self) -> Result<Inst> {
        let start_line = self.toks.get(self.pos).map(|t| t.1).unwrap_or(0);
        let mut results = Vec::new();
        if matches!(self.peek(), Some(Tok::Val(_))) {
            loop {
                results.push(self.value()?);
                if !self.eat_punct(',') {
                    break;
                }
            }
            self.punct('=')?;
        }
        let mnemonic = self.word()?;
        if mnemonic == "custom" {
            return self.custom(results, start_line);
        }
        // Operands: `%v` or `kw = %v`, comma separated.
        let mut operands = Vec::new();
        let mut keyed = Vec::new();
        loop {
            match self.peek() {
                Some(Tok::Val(_)) => operands.push(self.value()?),
                Some(Tok::Word(w)) if w == "mask" || w == "other" => {
                    let k = self.word()?;
                    if keyed.iter().any(|(n, _)| *n == k) {
                        return Err(self.err(format!("`{k}` given twice")));
                    }
                    self.punct('=')?;
                    keyed.push((k, self.value()?));
                }
                _ => break,
            }
            if !self.eat_punct(',') {
                break;
            }
        }
        let attrs = self.attrs()?;
        let mut types = Vec::new();
        if self.eat_punct(':') {
            loop {
                types.push(self.ty()?);
                if !self.eat_punct(',') {
                    break;
                }
            }
        }
        if types.len() != results.len() {
            return Err(self.err(format!(
                "{} results but {} types for `{mnemonic}`",
                results.len(),
                types.len()
            )));
        }
        for (r, t) in results.iter().zip(types) {
            self.define(*r, t)?;
        }
        let loc = self.loc()?;
        // Op errors point at the op's first line, not at wherever its regions end.
        let op = self
            .build_op(&mnemonic, operands, keyed, &attrs)
            .map_err(|e| match e {
                Error::Parse { message, .. }
                    if !matches!(mnemonic.as_str(), "for" | "if" | "while") =>
                {
                    Error::Parse {
                        line: start_line,
                        message,
                    }
                }
                e => e,
            })?;
        Ok(Inst { results, op, loc })
    }

    /// `loc("file":line:col)`.
    fn loc(&mut self) -> Result<Loc> {
        self.keyword("loc")?;
        self.punct('(')?;
        let file = match self.next()? {
            Tok::Str(s) => s,
            _ => return Err(self.err("expected a quoted file name in loc(...)")),
        };
        self.punct(':')?;
        let line = self
            .word()?
            .parse()
            .map_err(|_| self.err("bad line in loc"))?;
        self.punct(':')?;
        let col = self
            .word()?
            .parse()
            .map_err(|_| self.err("bad column in loc"))?;
        self.punct(')')?;
        Ok(Loc { file, line, col })
    }

    /// The rest of `custom "name" {attrs} ins(…) outs(…) -> types loc(…)`.
    fn custom(&mut self, results: Vec<Value>, start_line: usize) -> Result<Inst> {
        let at_start = |e: Error| match e {
            Error::Parse { message, .. } => Error::Parse {
                line: start_line,
                message: format!("custom op: {message}"),
            },
            e => e,
        };
        let name = match self.next()? {
            Tok::Str(s) => s,
            _ => return Err(at_start(self.err("expected the quoted op name"))),
        };
        self.punct('{')?;
        let mut attrs: Vec<(String, Tok)> = Vec::new();
        let mut extra = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        while !self.eat_punct('}') {
            if !keys.is_empty() {
                self.punct(',')?;
            }
            let k = self.word()?;
            if ![
                "core",
                "pipe",
                "mode",
                "symbol",
                "bitcode",
                "extra",
                "asm",
                "constraints",
                "pack",
                "pure",
            ]
            .contains(&k.as_str())
            {
                return Err(at_start(self.err(format!("unknown attribute `{k}`"))));
            }
            if keys.contains(&k) {
                return Err(at_start(self.err(format!("attribute `{k}` given twice"))));
            }
            keys.push(k.clone());
            self.punct('=')?;
            if k == "extra" {
                self.punct('[')?;
                while !self.eat_punct(']') {
                    if !extra.is_empty() {
                        self.punct(',')?;
                    }
                    let w = self.word()?;
                    let (len, d) = w
                        .split_once('x')
                        .ok_or_else(|| self.err(format!("bad extra buffer `{w}`")))?;
                    let len = len
                        .parse()
                        .map_err(|_| self.err(format!("bad extra buffer `{w}`")))?;
                    extra.push(ExtraBuffer {
                        dtype: self.dtype(d)?,
                        len,
                    });
                }
                continue;
            }
            attrs.push((k, self.next()?));
        }
        let attr = |k: &str| attrs.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
        let word = |k: &str| match attr(k) {
            Some(Tok::Word(w)) => Some(w),
            _ => None,
        };
        let string = |k: &str| match attr(k) {
            Some(Tok::Str(s)) => Some(s),
            _ => None,
        };
        let core = word("core")
            .and_then(|w| CoreType::from_name(&w))
            .ok_or_else(|| at_start(self.err("needs `core = <core type>`")))?;
        let pipe = word("pipe")
            .and_then(|w| Pipe::from_name(&w))
            .ok_or_else(|| at_start(self.err("needs `pipe = <pipe>`")))?;
        let mode = match word("mode") {
            Some(w) => Some(
                Mode::from_name(&w).ok_or_else(|| at_start(self.err(format!("bad mode `{w}`"))))?,
            ),
            None => None,
        };
        let symbol =
            string("symbol").ok_or_else(|| at_start(self.err("needs `symbol = \"…\"`")))?;
        let bitcode =
            string("bitcode").ok_or_else(|| at_start(self.err("needs `bitcode = \"…\"`")))?;
        let inline_asm = match string("asm") {
            None => None,
            Some(asm) => {
                let constraints = string("constraints")
                    .ok_or_else(|| at_start(self.err("`asm` needs `constraints = \"…\"`")))?;
                let pack = word("pack")
                    .and_then(|w| w.parse().ok())
                    .ok_or_else(|| at_start(self.err("`asm` needs `pack = <1, 2 or 4>`")))?;
                let pure = match word("pure").as_deref() {
                    Some("true") => true,
                    Some("false") => false,
                    _ => return Err(at_start(self.err("`asm` needs `pure = true|false`"))),
                };
                Some(InlineAsm {
                    asm,
                    constraints,
                    pack,
                    pure,
                })
            }
        };
        let ins = self.custom_group("ins")?;
        let outs = self.custom_group("outs")?;
        // The lexer reads `-` as the start of a (number) word.
        if !matches!(self.next()?, Tok::Word(w) if w == "-") {
            self.pos -= 1;
            return Err(at_start(self.err("expected `->` and the result types")));
        }
        self.punct('>')?;
        let mut types = Vec::new();
        while !matches!(self.peek(), Some(Tok::Word(w)) if w == "loc") {
            if !types.is_empty() {
                self.punct(',')?;
            }
            types.push(self.ty()?);
        }
        if types.len() != results.len() || outs.len() != results.len() {
            return Err(at_start(self.err(format!(
                "{} results, {} outs and {} result types",
                results.len(),
                outs.len(),
                types.len()
            ))));
        }
        for (r, t) in results.iter().zip(types) {
            self.define(*r, t)?;
        }
        let loc = self.loc()?;
        let call = CustomCall {
            name,
            attrs: CustomAttrs {
                core,
                pipe,
                mode,
                symbol,
                bitcode: Bitcode::unresolved(bitcode),
            },
            ins,
            outs,
            extra,
            inline_asm,
        };
        Ok(Inst {
            results,
            op: Op::Custom(Box::new(call)),
            loc,
        })
    }

    /// `ins(%a, %b : type, type)`; the types are checked by the verifier, not here.
    fn custom_group(&mut self, kw: &str) -> Result<Vec<Value>> {
        self.keyword(kw)?;
        self.punct('(')?;
        let mut vs = Vec::new();
        while matches!(self.peek(), Some(Tok::Val(_))) {
            vs.push(self.value()?);
            if !self.eat_punct(',') {
                break;
            }
        }
        if self.eat_punct(':') {
            for i in 0..vs.len() {
                if i > 0 {
                    self.punct(',')?;
                }
                self.ty()?;
            }
        }
        self.punct(')')?;
        Ok(vs)
    }

    fn build_op(
        &mut self,
        m: &str,
        ops: Vec<Value>,
        keyed: Vec<(String, Value)>,
        attrs: &[(String, String)],
    ) -> Result<Op> {
        let attr = |k: &str| -> Result<&str> {
            attrs
                .iter()
                .find(|(n, _)| n == k)
                .map(|(_, v)| v.as_str())
                .ok_or_else(|| self.err(format!("`{m}` needs attribute `{k}`")))
        };
        let int = |k: &str| -> Result<i64> {
            attr(k)?
                .parse()
                .map_err(|_| self.err(format!("attribute `{k}` must be an integer")))
        };
        let axis = || -> Result<u32> {
            let a = int("axis")?;
            u32::try_from(a).map_err(|_| self.err(format!("axis {a} is out of range")))
        };
        let string_attr = |k: &str| -> Result<String> {
            attr(k)?
                .strip_prefix('"')
                .map(str::to_string)
                .ok_or_else(|| self.err(format!("attribute `{k}` must be a quoted string")))
        };
        let key = |k: &str| keyed.iter().find(|(n, _)| n == k).map(|(_, v)| *v);
        let has = |k: &str| attrs.iter().any(|(n, _)| n == k);
        let cache_hints = || -> Result<CacheHints> {
            let mut hints = CacheHints::default();
            if has("cache") {
                let c = string_attr("cache")?;
                hints.modifier = CacheModifier::from_name(&c)
                    .ok_or_else(|| self.err(format!("bad cache modifier {c:?}")))?;
            }
            if has("eviction") {
                let v = string_attr("eviction")?;
                hints.eviction = Eviction::from_name(&v)
                    .ok_or_else(|| self.err(format!("bad eviction policy {v:?}")))?;
            }
            if has("volatile") {
                hints.volatile = match attr("volatile")? {
                    "true" => true,
                    "false" => false,
                    v => {
                        return Err(self.err(format!("`volatile` must be true or false, got `{v}`")))
                    }
                };
            }
            Ok(hints)
        };
        // What an op does not take is an error, not silently dropped.
        let (takes_attrs, takes_keys): (&[&str], &[&str]) = match m {
            "const" => (&["value"], &[]),
            "program_id" | "num_programs" | "expand_dims" | "flip" | "gather" => (&["axis"], &[]),
            "permute" => (&["dims"], &[]),
            "arange" => (&["start", "end"], &[]),
            "cmp" => (&["pred"], &[]),
            "reduce" => (&["op", "axis"], &[]),
            "scan" => (&["op", "axis", "reverse"], &[]),
            "atomic" => (&["op"], &["mask"]),
            "load" => (&["cache", "eviction", "volatile"], &["mask", "other"]),
            "store" => (&["cache", "eviction"], &["mask"]),
            "assert" => (&["msg"], &["mask"]),
            "print" => (&["prefix", "hex"], &[]),
            "for" => (&["unroll", "stages"], &[]),
            "hint" => (&["kind", "values"], &[]),
            _ => (&[], &[]),
        };
        if let Some((k, _)) = attrs
            .iter()
            .find(|(k, _)| !takes_attrs.contains(&k.as_str()))
        {
            return Err(self.err(format!("`{m}` has no attribute `{k}`")));
        }
        if let Some((k, _)) = keyed
            .iter()
            .find(|(k, _)| !takes_keys.contains(&k.as_str()))
        {
            return Err(self.err(format!("`{m}` takes no `{k}` operand")));
        }
        let arity = |n: usize| -> Result<()> {
            if ops.len() == n {
                Ok(())
            } else {
                Err(self.err(format!("`{m}` takes {n} operands, got {}", ops.len())))
            }
        };
        let op = match m {
            "const" => {
                arity(0)?;
                let v = attr("value")?;
                let is_float = v.contains(['.', 'e', 'E']) || v.contains("inf") || v == "NaN";
                if is_float {
                    let f: f64 = v
                        .parse()
                        .map_err(|_| self.err(format!("bad float `{v}`")))?;
                    if f.is_infinite() && !v.contains("inf") {
                        return Err(self.err(format!("float `{v}` is out of range of f64")));
                    }
                    Op::Const(Const::Float(f))
                } else {
                    Op::Const(Const::Int(
                        v.parse()
                            .map_err(|_| self.err(format!("bad integer `{v}`")))?,
                    ))
                }
            }
            "program_id" => Op::ProgramId(axis()?),
            "num_programs" => Op::NumPrograms(axis()?),
            "arange" => Op::Arange {
                start: int("start")?,
                end: int("end")?,
            },
            "splat" => {
                arity(1)?;
                Op::Splat(ops[0])
            }
            "broadcast" => {
                arity(1)?;
                Op::Broadcast(ops[0])
            }
            "reshape" => {
                arity(1)?;
                Op::Reshape(ops[0])
            }
            "permute" => {
                arity(1)?;
                let text = attr("dims")?;
                let dims = text
                    .split('x')
                    .map(|d| d.parse::<u32>())
                    .collect::<std::result::Result<Vec<u32>, _>>()
                    .map_err(|_| {
                        self.err(format!(
                            "`dims` must be dims joined by `x` (`1x0`), got `{text}`"
                        ))
                    })?;
                Op::Permute { x: ops[0], dims }
            }
            "hint" => {
                arity(1)?;
                let k = attr("kind")?;
                let kind =
                    HintKind::from_name(k).ok_or_else(|| self.err(format!("bad hint `{k}`")))?;
                let values = (attr("values")?.split('x'))
                    .map(|v| v.parse::<u32>())
                    .collect::<std::result::Result<Vec<u32>, _>>()
                    .map_err(|_| self.err("hint values must be integers like 16x1".to_string()))?;
                Op::Hint {
                    x: ops[0],
                    kind,
                    values,
                }
            }
            "flip" => {
                arity(1)?;
                Op::Flip {
                    x: ops[0],
                    axis: axis()?,
                }
            }
            "gather" => {
                arity(2)?;
                Op::Gather {
                    src: ops[0],
                    index: ops[1],
                    axis: axis()?,
                }
            }
            "cast" => {
                arity(1)?;
                Op::Cast(ops[0])
            }
            "bitcast" => {
                arity(1)?;
                Op::Bitcast(ops[0])
            }
            "inttoptr" => {
                arity(1)?;
                Op::IntToPtr(ops[0])
            }
            "ptrtoint" => {
                arity(1)?;
                Op::PtrToInt(ops[0])
            }
            "expand_dims" => {
                arity(1)?;
                Op::ExpandDims {
                    x: ops[0],
                    axis: axis()?,
                }
            }
            "cmp" => {
                arity(2)?;
                let p = attr("pred")?;
                let p = CmpPred::from_name(p).ok_or_else(|| self.err(format!("bad pred `{p}`")))?;
                Op::Cmp(p, ops[0], ops[1])
            }
            "select" => {
                arity(3)?;
                Op::Select(ops[0], ops[1], ops[2])
            }
            "fma" => {
                arity(3)?;
                Op::Fma(ops[0], ops[1], ops[2])
            }
            "addptr" => {
                arity(2)?;
                Op::AddPtr(ops[0], ops[1])
            }
            "scan" => {
                arity(1)?;
                let o = attr("op")?;
                let o = ScanOp::from_name(o).ok_or_else(|| self.err(format!("bad op `{o}`")))?;
                let reverse = match attr("reverse")? {
                    "true" => true,
                    "false" => false,
                    r => {
                        return Err(self.err(format!(
                            "attribute `reverse` must be true or false, got `{r}`"
                        )))
                    }
                };
                Op::Scan {
                    op: o,
                    x: ops[0],
                    axis: axis()?,
                    reverse,
                }
            }
            "reduce" => {
                arity(1)?;
                let o = attr("op")?;
                let o = ReduceOp::from_name(o).ok_or_else(|| self.err(format!("bad op `{o}`")))?;
                Op::Reduce {
                    op: o,
                    x: ops[0],
                    axis: axis()?,
                }
            }
            "dot" => {
                arity(3)?;
                Op::Dot {
                    a: ops[0],
                    b: ops[1],
                    acc: ops[2],
                }
            }
            "load" => {
                arity(1)?;
                Op::Load {
                    ptr: ops[0],
                    mask: key("mask"),
                    other: key("other"),
                    hints: cache_hints()?,
                }
            }
            "store" => {
                arity(2)?;
                Op::Store {
                    ptr: ops[0],
                    value: ops[1],
                    mask: key("mask"),
                    hints: cache_hints()?,
                }
            }
            "atomic" => {
                arity(2)?;
                let o = attr("op")?;
                let o = AtomicOp::from_name(o).ok_or_else(|| self.err(format!("bad op `{o}`")))?;
                Op::Atomic {
                    op: o,
                    ptr: ops[0],
                    value: ops[1],
                    mask: key("mask"),
                }
            }
            "print" => {
                let hex = match attr("hex")? {
                    "true" => true,
                    "false" => false,
                    h => return Err(self.err(format!("`hex` must be true or false, got `{h}`"))),
                };
                Op::Print {
                    prefix: string_attr("prefix")?,
                    args: ops,
                    hex,
                }
            }
            "assert" => {
                arity(1)?;
                Op::Assert {
                    cond: ops[0],
                    mask: key("mask"),
                    msg: string_attr("msg")?,
                }
            }
            "atomic_cas" => {
                arity(3)?;
                Op::AtomicCas {
                    ptr: ops[0],
                    cmp: ops[1],
                    value: ops[2],
                }
            }
            "for" => {
                if ops.len() < 3 {
                    return Err(self.err("`for` needs lo, hi, step"));
                }
                let count = |key: &str| -> Result<Option<u32>, Error> {
                    match has(key) {
                        true => Ok(Some(
                            u32::try_from(int(key)?)
                                .map_err(|_| self.err(format!("`{key}` must fit u32")))?,
                        )),
                        false => Ok(None),
                    }
                };
                let (unroll, stages) = (count("unroll")?, count("stages")?);
                let body = self.region()?;
                Op::For {
                    lo: ops[0],
                    hi: ops[1],
                    step: ops[2],
                    init: ops[3..].to_vec(),
                    body,
                    unroll,
                    stages,
                }
            }
            "if" => {
                arity(1)?;
                let then_region = self.region()?;
                let else_region = self.region()?;
                Op::If {
                    cond: ops[0],
                    then_region,
                    else_region,
                }
            }
            "while" => {
                let cond = self.region()?;
                let body = self.region()?;
                Op::While {
                    init: ops,
                    cond,
                    body,
                }
            }
            "yield" => Op::Yield(ops),
            "condition" => {
                arity(1)?;
                Op::Condition(ops[0])
            }
            other => {
                if let Some(b) = BinOp::from_name(other) {
                    arity(2)?;
                    Op::Binary(b, ops[0], ops[1])
                } else if let Some(u) = UnOp::from_name(other) {
                    arity(1)?;
                    Op::Unary(u, ops[0])
                } else {
                    return Err(self.err(format!("unknown op `{other}`")));
                }
            }
        };
        Ok(op)
    }
}
