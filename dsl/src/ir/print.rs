//! The stable text form. [`parse_function`](super::parse_function) reads it back.
//!
//! ```text
//! kernel @add(x %0: ptr<f32>, n %1: i32) {
//!   %2 = program_id {axis = 0} : i32 loc("k.rs":3:13)
//!   %3 = load %0, mask = %4 : tile<16xf32> loc("k.rs":5:13)
//!   %5, %6 = for %a, %b, %c, %7, %8 : tile<16xf32>, i32 loc("k.rs":6:5) {
//!   ^(%9: i32, %10: tile<16xf32>, %11: i32)
//!     yield %10, %11 loc("k.rs":8:5)
//!   }
//! }
//! ```
//!
//! Strings (file names, custom-op names, symbols, bitcode labels) are quoted with `"`;
//! inside, a quote, a backslash, newline, tab and carriage return are written `\"`, `\\`,
//! `\n`, `\t` and `\r`, other control characters `\u{hex}`, everything else as itself.

use super::{Block, CacheModifier, Const, CustomCall, Eviction, Function, Inst, Op};
use std::fmt::Write;

/// Prints a function in the stable text form.
pub fn print_function(f: &Function) -> String {
    let mut out = String::new();
    let params: Vec<String> = f
        .params
        .iter()
        .map(|p| format!("{} {}: {}", p.name, p.value, f.ty(p.value)))
        .collect();
    let _ = writeln!(out, "kernel @{}({}) {{", f.name, params.join(", "));
    print_insts(f, &f.body, 1, &mut out);
    out.push_str("}\n");
    out
}

fn print_insts(f: &Function, b: &Block, depth: usize, out: &mut String) {
    for inst in &b.insts {
        print_inst(f, inst, depth, out);
    }
}

fn join(vs: impl IntoIterator<Item = impl std::fmt::Display>) -> String {
    vs.into_iter()
        .map(|v| v.to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

fn print_inst(f: &Function, inst: &Inst, depth: usize, out: &mut String) {
    let pad = "  ".repeat(depth);
    out.push_str(&pad);
    if !inst.results.is_empty() {
        let _ = write!(out, "{} = ", join(&inst.results));
    }
    out.push_str(inst.op.mnemonic());
    if let Op::Custom(c) = &inst.op {
        print_custom(f, c, out);
        let _ = writeln!(
            out,
            " loc({}:{}:{})",
            quote(&inst.loc.file),
            inst.loc.line,
            inst.loc.col
        );
        return;
    }
    let mut operands: Vec<String> = Vec::new();
    let mut attrs: Vec<String> = Vec::new();
    match &inst.op {
        Op::Const(Const::Int(v)) => attrs.push(format!("value = {v}")),
        Op::Const(Const::Float(v)) => attrs.push(format!("value = {v:?}")),
        Op::ProgramId(a) | Op::NumPrograms(a) => attrs.push(format!("axis = {a}")),
        Op::Arange { start, end } => attrs.push(format!("start = {start}, end = {end}")),
        Op::ExpandDims { axis, .. } | Op::Flip { axis, .. } | Op::Gather { axis, .. } => {
            attrs.push(format!("axis = {axis}"))
        }
        Op::Hint { kind, values, .. } => {
            let values: Vec<String> = values.iter().map(u32::to_string).collect();
            attrs.push(format!(
                "kind = {}, values = {}",
                kind.name(),
                values.join("x")
            ))
        }
        Op::Permute { dims, .. } => {
            let dims: Vec<String> = dims.iter().map(u32::to_string).collect();
            attrs.push(format!("dims = {}", dims.join("x")))
        }
        Op::Cmp(p, ..) => attrs.push(format!("pred = {}", p.name())),
        Op::Reduce { op, axis, .. } => attrs.push(format!("op = {}, axis = {axis}", op.name())),
        Op::Scan {
            op, axis, reverse, ..
        } => attrs.push(format!(
            "op = {}, axis = {axis}, reverse = {reverse}",
            op.name()
        )),
        Op::Atomic { op, .. } => attrs.push(format!("op = {}", op.name())),
        Op::Assert { msg, .. } => attrs.push(format!("msg = {}", quote(msg))),
        Op::Print { prefix, hex, .. } => {
            attrs.push(format!("prefix = {}, hex = {hex}", quote(prefix)))
        }
        Op::For { unroll, stages, .. } => {
            if let Some(n) = unroll {
                attrs.push(format!("unroll = {n}"));
            }
            if let Some(n) = stages {
                attrs.push(format!("stages = {n}"));
            }
        }
        Op::Load { hints, .. } | Op::Store { hints, .. } => {
            if hints.modifier != CacheModifier::Default {
                attrs.push(format!("cache = {}", quote(hints.modifier.name())));
            }
            if hints.eviction != Eviction::Normal {
                attrs.push(format!("eviction = {}", quote(hints.eviction.name())));
            }
            if hints.volatile {
                attrs.push("volatile = true".into());
            }
        }
        _ => {}
    }
    match &inst.op {
        Op::Load {
            ptr, mask, other, ..
        } => {
            operands.push(ptr.to_string());
            operands.extend(mask.map(|m| format!("mask = {m}")));
            operands.extend(other.map(|o| format!("other = {o}")));
        }
        Op::Store {
            ptr, value, mask, ..
        }
        | Op::Atomic {
            ptr, value, mask, ..
        } => {
            operands.push(ptr.to_string());
            operands.push(value.to_string());
            operands.extend(mask.map(|m| format!("mask = {m}")));
        }
        Op::Assert { cond, mask, .. } => {
            operands.push(cond.to_string());
            operands.extend(mask.map(|m| format!("mask = {m}")));
        }
        op => operands.extend(op.operands().iter().map(|v| v.to_string())),
    }
    if !operands.is_empty() {
        let _ = write!(out, " {}", operands.join(", "));
    }
    if !attrs.is_empty() {
        let _ = write!(out, " {{{}}}", attrs.join(", "));
    }
    if !inst.results.is_empty() {
        let _ = write!(out, " : {}", join(inst.results.iter().map(|r| f.ty(*r))));
    }
    let _ = write!(
        out,
        " loc({}:{}:{})",
        quote(&inst.loc.file),
        inst.loc.line,
        inst.loc.col
    );
    let regions = inst.op.regions();
    for region in regions {
        out.push_str(" {\n");
        let args: Vec<String> = region
            .args
            .iter()
            .map(|a| format!("{}: {}", a, f.ty(*a)))
            .collect();
        let _ = writeln!(out, "{pad}^({})", args.join(", "));
        print_insts(f, region, depth + 1, out);
        out.push_str(&pad);
        out.push('}');
    }
    out.push('\n');
}

/// ` "add" {core = vector, …} ins(%2, %3 : tile<32xi32>, …) outs(%1 : …) -> tile<32xi32>`,
/// after AscendNPU-IR's `hivm.hir.custom`.
fn print_custom(f: &Function, c: &CustomCall, out: &mut String) {
    let a = &c.attrs;
    let mut attrs = vec![
        format!("core = {}", a.core.name()),
        format!("pipe = {}", a.pipe.name()),
    ];
    if let Some(m) = a.mode {
        attrs.push(format!("mode = {}", m.name()));
    }
    attrs.push(format!("symbol = {}", quote(&a.symbol)));
    attrs.push(format!("bitcode = {}", quote(a.bitcode.label())));
    if !c.extra.is_empty() {
        let bufs = c.extra.iter().map(|e| format!("{}x{}", e.len, e.dtype));
        attrs.push(format!("extra = [{}]", join(bufs)));
    }
    if let Some(x) = &c.inline_asm {
        attrs.push(format!("asm = {}", quote(&x.asm)));
        attrs.push(format!("constraints = {}", quote(&x.constraints)));
        attrs.push(format!("pack = {}", x.pack));
        attrs.push(format!("pure = {}", x.pure));
    }
    let group = |vs: &[super::Value]| {
        if vs.is_empty() {
            String::new()
        } else {
            format!("{} : {}", join(vs), join(vs.iter().map(|v| f.ty(*v))))
        }
    };
    let _ = write!(
        out,
        " {} {{{}}} ins({}) outs({}) -> {}",
        quote(&c.name),
        attrs.join(", "),
        group(&c.ins),
        group(&c.outs),
        join(c.outs.iter().map(|v| f.ty(*v)))
    );
}

/// `s` in quotes, escaped as the module docs say; the parser reads back exactly `s`.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}
