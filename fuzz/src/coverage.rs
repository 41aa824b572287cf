//! Which op kinds a program uses, so that a test can insist the generator makes every one.
//!
//! [`kind`] matches every [`Op`] variant without a wildcard: an op added to the IR does not
//! compile here until it has a kind, and [`all_kinds`] then lists it, so the coverage test
//! fails until the generator makes it.

use std::collections::BTreeSet;
use tritium_dsl::ir::{
    AtomicOp, BinOp, CmpPred, Function, HintKind, Mode, Op, ReduceOp, ScanOp, UnOp,
};

/// The kind of an op: its mnemonic, refined by its operator where it has one
/// (`binary.add`, `reduce.argmax`, `load.masked.other`, `custom.simt`).
pub fn kind(op: &Op) -> String {
    match op {
        Op::Const(_) => "const".into(),
        Op::ProgramId(_) => "program_id".into(),
        Op::NumPrograms(_) => "num_programs".into(),
        Op::Arange { .. } => "arange".into(),
        Op::Splat(_) => "splat".into(),
        Op::Broadcast(_) => "broadcast".into(),
        Op::ExpandDims { .. } => "expand_dims".into(),
        Op::Reshape(_) => "reshape".into(),
        Op::Permute { .. } => "permute".into(),
        Op::Flip { .. } => "flip".into(),
        Op::Hint { kind, .. } => format!("hint.{}", kind.name()),
        Op::Gather { .. } => "gather".into(),
        Op::Binary(b, ..) => format!("binary.{}", b.name()),
        Op::Unary(u, _) => format!("unary.{}", u.name()),
        Op::Cmp(p, ..) => format!("cmp.{}", p.name()),
        Op::Select(..) => "select".into(),
        Op::Fma(..) => "fma".into(),
        Op::Cast(_) => "cast".into(),
        Op::Bitcast(_) => "bitcast".into(),
        Op::AddPtr(..) => "addptr".into(),
        Op::IntToPtr(_) => "inttoptr".into(),
        Op::PtrToInt(_) => "ptrtoint".into(),
        Op::Reduce { op, .. } => format!("reduce.{}", op.name()),
        Op::Scan { op, .. } => format!("scan.{}", op.name()),
        Op::Dot { .. } => "dot".into(),
        Op::Load { mask, other, .. } => match (mask, other) {
            (None, _) => "load".into(),
            (Some(_), None) => "load.masked".into(),
            (Some(_), Some(_)) => "load.masked.other".into(),
        },
        Op::Store { mask, .. } => match mask {
            None => "store".into(),
            Some(_) => "store.masked".into(),
        },
        Op::Atomic { op, .. } => format!("atomic.{}", op.name()),
        Op::AtomicCas { .. } => "atomic_cas".into(),
        Op::Assert { mask, .. } => match mask {
            None => "assert".into(),
            Some(_) => "assert.masked".into(),
        },
        Op::Print { hex, .. } => if *hex { "print.hex" } else { "print" }.into(),
        Op::For { .. } => "for".into(),
        Op::If { .. } => "if".into(),
        Op::While { .. } => "while".into(),
        Op::Custom(c) if c.is_builtin() => format!("custom.{}", c.name),
        Op::Custom(c) => format!("custom.{}", c.attrs.effective_mode().name()),
        Op::Yield(_) => "yield".into(),
        Op::Condition(_) => "condition".into(),
    }
}

/// Every kind the generator must make.
pub fn all_kinds() -> BTreeSet<String> {
    let mut k: BTreeSet<String> = [
        "const",
        "program_id",
        "num_programs",
        "arange",
        "splat",
        "broadcast",
        "expand_dims",
        "reshape",
        "permute",
        "flip",
        "gather",
        "select",
        "fma",
        "cast",
        "bitcast",
        "addptr",
        "inttoptr",
        "ptrtoint",
        "dot",
        "load",
        "load.masked",
        "load.masked.other",
        "store",
        "load.hints",
        "store.hints",
        "assert",
        "assert.masked",
        "print",
        "print.hex",
        "store.masked",
        "atomic_cas",
        "for",
        "for.unroll",
        "if",
        "while",
        "yield",
        "condition",
    ]
    .into_iter()
    .map(String::from)
    .collect();
    k.extend(BinOp::ALL.iter().map(|b| format!("binary.{}", b.name())));
    k.extend(HintKind::ALL.iter().map(|h| format!("hint.{}", h.name())));
    k.extend(UnOp::ALL.iter().map(|u| format!("unary.{}", u.name())));
    k.extend(CmpPred::ALL.iter().map(|p| format!("cmp.{}", p.name())));
    k.extend(ReduceOp::ALL.iter().map(|r| format!("reduce.{}", r.name())));
    k.extend(ScanOp::ALL.iter().map(|r| format!("scan.{}", r.name())));
    k.extend(AtomicOp::ALL.iter().map(|a| format!("atomic.{}", a.name())));
    k.extend(
        [Mode::Simt, Mode::Simd]
            .iter()
            .map(|m| format!("custom.{}", m.name())),
    );
    k.extend(
        tritium_dsl::custom::BUILTIN_NAMES
            .iter()
            .map(|n| format!("custom.{n}")),
    );
    k
}

/// The kinds `f` uses.
pub fn kinds(f: &Function) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    f.walk(&mut |i| {
        out.insert(kind(&i.op));
        if let Op::Load { hints, .. } | Op::Store { hints, .. } = &i.op {
            if !hints.is_default() {
                out.insert(format!("{}.hints", i.op.mnemonic()));
            }
        }
        if let Op::For {
            unroll: Some(_), ..
        } = &i.op
        {
            out.insert("for.unroll".into());
        }
    });
    out
}
