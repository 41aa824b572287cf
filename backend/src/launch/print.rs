//! `device_print`'s output, one format for every device: each lane of each argument is a
//! line `pid (x, y, z) idx (i, j) prefix: value`, written to standard output or, inside
//! [`capture_device_prints`], to the capture.
//!
//! Compiled code (the CPU's and the emulator's) fills a record of [`PRINT_WORDS`] u64 words
//! per lane and calls [`print_hook`] with it; the interpreter calls [`print_line`].

use super::super::pipeline::once::lock;
use std::io::Write;
use std::sync::Mutex;
use tritium_dsl::ir::{DType, MAX_RANK};

/// Word: the address of the prefix's UTF-8 bytes.
pub(crate) const PRINT_PREFIX: u64 = 0;
/// Word: the prefix's length in bytes.
pub(crate) const PRINT_PREFIX_LEN: u64 = 1;
/// Word: the dtype, as its index in `DType::ALL`.
pub(crate) const PRINT_DTYPE: u64 = 2;
/// Word: 1 for hexadecimal.
pub(crate) const PRINT_HEX: u64 = 3;
/// Word: which argument this is.
pub(crate) const PRINT_OPERAND: u64 = 4;
/// Word: how many arguments the print has.
pub(crate) const PRINT_OPERANDS: u64 = 5;
/// Words: the program id (x, y, z).
pub(crate) const PRINT_PID: u64 = 6;
/// Word: the value's bits (its storage bits, zero-extended).
pub(crate) const PRINT_BITS: u64 = 9;
/// Word: the argument's rank.
pub(crate) const PRINT_RANK: u64 = 10;
/// Words: the lane's index, one word per dim.
pub(crate) const PRINT_IDX: u64 = 11;
/// Words in a record.
pub(crate) const PRINT_WORDS: usize = PRINT_IDX as usize + MAX_RANK;

/// The symbol compiled CPU code calls [`print_hook`] by (defined in the JIT).
pub(crate) const PRINT_SYMBOL: &str = "tritium_device_print";

/// One printed line (without the newline).
#[allow(clippy::too_many_arguments)]
pub(crate) fn format_line(
    prefix: &str,
    operand: usize,
    operands: usize,
    pid: [i64; 3],
    idx: &[u64],
    d: DType,
    bits: u64,
    hex: bool,
) -> String {
    let mut s = format!("pid ({}, {}, {})", pid[0], pid[1], pid[2]);
    if !idx.is_empty() {
        let idx: Vec<String> = idx.iter().map(u64::to_string).collect();
        s += &format!(" idx ({})", idx.join(", "));
    }
    // Triton users often end the prefix with ": "; it is not doubled.
    let prefix = prefix.trim_end();
    let prefix = prefix.strip_suffix(':').unwrap_or(prefix);
    if !prefix.is_empty() {
        s.push(' ');
        s += prefix;
    }
    if operands > 1 {
        s += &format!(" (operand {operand})");
    }
    s += ": ";
    s += &format_value(d, bits, hex);
    s
}

/// A value of dtype `d` from its storage bits: decimal integers, `true`/`false`, floats
/// in Rust's shortest round-trip form (`1.0`, `NaN`, `-inf`); with `hex`, the bits in
/// hexadecimal at the dtype's width.
pub(crate) fn format_value(d: DType, bits: u64, hex: bool) -> String {
    let width = if d.is_bool() { 8 } else { d.size_bytes() * 8 };
    let bits = if width == 64 {
        bits
    } else {
        bits & ((1u64 << width) - 1)
    };
    if hex {
        return format!("0x{bits:0w$x}", w = width / 4);
    }
    let signed = |b: u64| ((b << (64 - width)) as i64) >> (64 - width);
    match d {
        DType::Bool => (bits != 0).to_string(),
        DType::I8 | DType::I16 | DType::I32 | DType::I64 => signed(bits).to_string(),
        DType::U8 | DType::U16 | DType::U32 | DType::U64 => bits.to_string(),
        DType::F16 => format!("{:?}", half::f16::from_bits(bits as u16).to_f32()),
        DType::BF16 => format!("{:?}", half::bf16::from_bits(bits as u16).to_f32()),
        DType::F32 => format!("{:?}", f32::from_bits(bits as u32)),
        DType::F64 => format!("{:?}", f64::from_bits(bits)),
        DType::F8E4M3 | DType::F8E5M2 | DType::F8E4B15 => {
            let f = d.fp8_format().expect("fp8");
            format!("{:?}", f.decode(bits as u8) as f32)
        }
    }
}

static CAPTURE: Mutex<Option<String>> = Mutex::new(None);
static CAPTURING: Mutex<()> = Mutex::new(());

/// Writes one line (adding the newline) to the capture or to standard output.
pub(crate) fn print_line(line: &str) {
    let mut capture = lock(&CAPTURE);
    match capture.as_mut() {
        Some(text) => {
            text.push_str(line);
            text.push('\n');
        }
        None => {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "{line}");
        }
    }
}

/// Runs `f` and returns what `device_print` printed meanwhile, from every thread (instead
/// of writing it to standard output), with `f`'s result. Captures wait for each other.
pub fn capture_device_prints<R>(f: impl FnOnce() -> R) -> (R, String) {
    let _one = lock(&CAPTURING);
    *lock(&CAPTURE) = Some(String::new());
    // Restored even when `f` panics.
    struct Reset;
    impl Drop for Reset {
        fn drop(&mut self) {
            lock(&CAPTURE).take();
        }
    }
    let reset = Reset;
    let r = f();
    let text = lock(&CAPTURE).clone().unwrap_or_default();
    drop(reset);
    (r, text)
}

/// What compiled code calls for each printed lane, with a record of [`PRINT_WORDS`] words.
///
/// # Safety
/// `words` points to a record filled as this module's constants say: the prefix address
/// and length name valid UTF-8 bytes, the rank is at most `MAX_RANK`.
pub(crate) unsafe extern "C" fn print_hook(words: *const u64) {
    // SAFETY: the caller passes a whole record.
    let w = unsafe { std::slice::from_raw_parts(words, PRINT_WORDS) };
    let at = |k: u64| w[k as usize];
    // SAFETY: the prefix is a constant of the generated module, of this length.
    let prefix = unsafe {
        std::slice::from_raw_parts(at(PRINT_PREFIX) as *const u8, at(PRINT_PREFIX_LEN) as usize)
    };
    let prefix = String::from_utf8_lossy(prefix);
    let d = DType::ALL
        .get(at(PRINT_DTYPE) as usize)
        .copied()
        .unwrap_or(DType::U64);
    let rank = (at(PRINT_RANK) as usize).min(MAX_RANK);
    let idx = &w[PRINT_IDX as usize..PRINT_IDX as usize + rank];
    let pid = [0, 1, 2].map(|k| at(PRINT_PID + k) as i32 as i64);
    let line = format_line(
        &prefix,
        at(PRINT_OPERAND) as usize,
        at(PRINT_OPERANDS) as usize,
        pid,
        idx,
        d,
        at(PRINT_BITS),
        at(PRINT_HEX) != 0,
    );
    print_line(&line);
}

/// `d`'s code in a record's [`PRINT_DTYPE`] word.
pub(crate) fn dtype_code(d: DType) -> u64 {
    DType::ALL.iter().position(|x| *x == d).unwrap_or(0) as u64
}
