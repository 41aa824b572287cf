//! One random edit of kernel text: bytes, lines, tokens, numbers, types, strings.

use crate::Rng;

/// Numbers a new user reaches for: limits ±1, values over every integer width, floats that
/// overflow or underflow.
const EXTREME_NUMBERS: &[&str] = &[
    "4000000000",
    "99999999999",
    "-1",
    "1e400",
    "-1e400",
    "0",
    "1",
    "2",
    "3",
    "255",
    "256",
    "-129",
    "65536",
    "2147483647",
    "2147483648",
    "-2147483649",
    "4294967295",
    "4294967296",
    "16777216",
    "16777217",
    "9223372036854775807",
    "-9223372036854775808",
    "18446744073709551615",
    "18446744073709551616",
    "170141183460469231731687303715884105728",
    "NaN",
    "inf",
    "-inf",
    "-0.0",
    "5e-324",
    "1e-310",
    "65504.0",
    "65520.0",
    "3.4028235e38",
    "1e39",
    "0.1",
];

/// Value numbers around the parser's limits and far beyond them.
const EXTREME_VALUES: &[&str] = &[
    "4000000000",
    "4294967295",
    "4294967296",
    "99999999999",
    "16777215",
    "16777216",
    "1000000",
    "0",
];

/// Tile types over the size, rank and dim limits, or degenerate.
const HUGE_TYPES: &[&str] = &[
    "tile<4294967296x4294967296xi32>",
    "tile<18446744073709551615x2xi8>",
    "tile<16777217xf32>",
    "tile<65536x65536xf16>",
    "tile<4096x4096xf32>",
    "tile<1x1x1x1x1x1x1x1x1x1x1x1xi32>",
    "tile<0xi32>",
    "tile<4x0xbool>",
    "tile<16777216xptr<f32>>",
    "tile<99999999999999999999xi32>",
];

/// Snippets that stress the lexer: escapes, unbalanced brackets, stray sigils.
const SNIPPETS: &[&str] = &[
    "\"",
    "\\",
    "\\u{f}",
    "\\u{",
    "\\u{d800}",
    "\\u{110000}",
    "\\q",
    "\\n",
    "{",
    "}",
    "(",
    ")",
    "<",
    ">",
    "^(",
    "%",
    "@",
    ":",
    ",",
    "=",
    "-",
    "->",
    "//",
    "\u{0}",
    "\u{f}",
    "é",
    "\t",
    "\r",
    " ",
    "\n",
];

/// Applies one random edit. The result is always valid UTF-8 (replaced bytes are read
/// lossily, as a user's editor would).
pub(super) fn apply(text: &str, rng: &mut Rng) -> String {
    // Weights: bytes, snippet, truncate, lines (delete, duplicate, swap), tokens (delete,
    // duplicate, swap), number, value, huge type, another value, another dtype. The last
    // two mostly keep the text parseable, for the verifier.
    match rng.weighted(&[6, 3, 2, 4, 4, 3, 4, 3, 3, 5, 3, 3, 4, 4]) {
        0 => flip_byte(text, rng),
        1 => insert_snippet(text, rng),
        2 => truncate(text, rng),
        3 => edit_lines(text, rng, LineEdit::Delete),
        4 => edit_lines(text, rng, LineEdit::Duplicate),
        5 => edit_lines(text, rng, LineEdit::Swap),
        6 => edit_tokens(text, rng, LineEdit::Delete),
        7 => edit_tokens(text, rng, LineEdit::Duplicate),
        8 => edit_tokens(text, rng, LineEdit::Swap),
        9 => replace_token(text, rng, is_number, EXTREME_NUMBERS, ""),
        10 => replace_token(text, rng, |t| t.starts_with('%'), EXTREME_VALUES, "%"),
        11 => replace_type(text, rng),
        12 => other_value(text, rng),
        _ => other_dtype(text, rng),
    }
}

fn flip_byte(text: &str, rng: &mut Rng) -> String {
    let mut bytes = text.as_bytes().to_vec();
    if bytes.is_empty() {
        return insert_snippet(text, rng);
    }
    let i = rng.below(bytes.len());
    bytes[i] = match rng.below(3) {
        0 => bytes[i] ^ (1 << rng.below(8)),
        1 => *rng.pick(b"0123456789%@{}()<>^:,=\"\\-x. \n"),
        _ => rng.below(256) as u8,
    };
    String::from_utf8_lossy(&bytes).into_owned()
}

fn insert_snippet(text: &str, rng: &mut Rng) -> String {
    let at = boundary(text, rng.below(text.len() + 1));
    format!("{}{}{}", &text[..at], rng.pick(SNIPPETS), &text[at..])
}

fn truncate(text: &str, rng: &mut Rng) -> String {
    text[..boundary(text, rng.below(text.len() + 1))].to_string()
}

/// The char boundary at or before byte `i`.
fn boundary(text: &str, mut i: usize) -> usize {
    while !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

#[derive(Clone, Copy)]
enum LineEdit {
    Delete,
    Duplicate,
    Swap,
}

/// Deletes, duplicates or swaps items of `items` (at least one).
fn edit<T: Clone>(items: &mut Vec<T>, picks: &[usize], rng: &mut Rng, how: LineEdit) {
    let i = *rng.pick(picks);
    match how {
        LineEdit::Delete => {
            items.remove(i);
        }
        LineEdit::Duplicate => {
            let to = *rng.pick(picks);
            items.insert(to, items[i].clone());
        }
        LineEdit::Swap => {
            let j = *rng.pick(picks);
            items.swap(i, j);
        }
    }
}

fn edit_lines(text: &str, rng: &mut Rng, how: LineEdit) -> String {
    let mut lines: Vec<&str> = text.split_inclusive('\n').collect();
    if lines.is_empty() {
        return insert_snippet(text, rng);
    }
    let all: Vec<usize> = (0..lines.len()).collect();
    edit(&mut lines, &all, rng, how);
    lines.concat()
}

/// The text cut into words (`%12`, `tile`, `16x16xf32`, `-1e-5`), quoted strings, single
/// punctuation and runs of whitespace; concatenated they give the text back.
fn pieces(text: &str) -> Vec<&str> {
    let is_word = |c: char| c.is_alphanumeric() || "_%@.+-".contains(c);
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(c) = rest.chars().next() {
        let len = if c == '"' {
            // To the closing quote (escapes skipped) or the end of the line.
            let mut end = rest.len();
            let mut escaped = false;
            for (i, ch) in rest.char_indices().skip(1) {
                match ch {
                    '\n' => {
                        end = i;
                        break;
                    }
                    '"' if !escaped => {
                        end = i + 1;
                        break;
                    }
                    _ => escaped = ch == '\\' && !escaped,
                }
            }
            end
        } else if is_word(c) || c.is_whitespace() {
            let same =
                |ch: char| is_word(ch) == is_word(c) && ch.is_whitespace() == c.is_whitespace();
            rest.find(|ch: char| !same(ch)).unwrap_or(rest.len())
        } else {
            c.len_utf8()
        };
        out.push(&rest[..len]);
        rest = &rest[len..];
    }
    out
}

fn is_token(p: &str) -> bool {
    !p.starts_with(char::is_whitespace)
}

fn edit_tokens(text: &str, rng: &mut Rng, how: LineEdit) -> String {
    let mut ps = pieces(text);
    let tokens: Vec<usize> = (0..ps.len()).filter(|i| is_token(ps[*i])).collect();
    if tokens.is_empty() {
        return insert_snippet(text, rng);
    }
    // A duplicated token needs a space to stay a token of its own.
    if let LineEdit::Duplicate = how {
        let i = *rng.pick(&tokens);
        let copy = format!("{} ", ps[i]);
        let to = *rng.pick(&tokens);
        let mut out: Vec<String> = ps.iter().map(|p| p.to_string()).collect();
        out.insert(to, copy);
        return out.concat();
    }
    edit(&mut ps, &tokens, rng, how);
    ps.concat()
}

fn is_number(p: &str) -> bool {
    p.parse::<f64>().is_ok() || p.parse::<i128>().is_ok()
}

/// Replaces a token for which `want` holds (or, lacking one, any token) by `prefix` and one
/// of `by`.
fn replace_token(
    text: &str,
    rng: &mut Rng,
    want: impl Fn(&str) -> bool,
    by: &[&str],
    prefix: &str,
) -> String {
    let ps = pieces(text);
    let mut picks: Vec<usize> = (0..ps.len()).filter(|i| want(ps[*i])).collect();
    if picks.is_empty() {
        picks = (0..ps.len()).filter(|i| is_token(ps[*i])).collect();
    }
    if picks.is_empty() {
        return insert_snippet(text, rng);
    }
    let i = *rng.pick(&picks);
    let new = format!("{prefix}{}", rng.pick(by));
    let mut out: Vec<&str> = ps.clone();
    out[i] = &new;
    out.concat()
}

/// Replaces a type (a dtype name, a tile's `16x16xf32`, or a whole `tile<…>`) by a huge one.
fn replace_type(text: &str, rng: &mut Rng) -> String {
    let ps = pieces(text);
    let is_type = |p: &str| {
        tritium_dsl::DType::from_name(p).is_some()
            || p == "tile"
            || p.split('x')
                .next()
                .is_some_and(|d| d.parse::<usize>().is_ok())
                && p.contains('x')
    };
    let picks: Vec<usize> = (0..ps.len()).filter(|i| is_type(ps[*i])).collect();
    if picks.is_empty() {
        return replace_token(text, rng, is_number, EXTREME_NUMBERS, "");
    }
    let i = *rng.pick(&picks);
    let huge = *rng.pick(HUGE_TYPES);
    let mut out: Vec<&str> = ps.clone();
    let spec = &huge["tile<".len()..huge.len() - 1];
    if ps[i] == "tile" || tritium_dsl::DType::from_name(ps[i]).is_some() {
        out[i] = huge;
        // `tile` `<` spec `>`: drop the old angle-bracketed part.
        if ps[i] == "tile" && ps.get(i + 1) == Some(&"<") && ps.get(i + 3) == Some(&">") {
            out[i + 1] = "";
            out[i + 2] = "";
            out[i + 3] = "";
        }
    } else {
        out[i] = spec;
    }
    out.concat()
}

/// Replaces a value by another value of the same text.
fn other_value(text: &str, rng: &mut Rng) -> String {
    let ps = pieces(text);
    let values: Vec<usize> = (0..ps.len())
        .filter(|i| ps[*i].len() > 1 && ps[*i].starts_with('%'))
        .collect();
    if values.is_empty() {
        return insert_snippet(text, rng);
    }
    let (i, j) = (*rng.pick(&values), *rng.pick(&values));
    let mut out = ps.clone();
    out[i] = ps[j];
    out.concat()
}

/// Replaces the dtype of a scalar type, a pointer or a tile by another dtype.
fn other_dtype(text: &str, rng: &mut Rng) -> String {
    use tritium_dsl::DType;
    let ps = pieces(text);
    // The dtype at the end of `f32` or `16x16xf32`.
    let dtype_at = |p: &str| {
        let start = p.rfind('x').map_or(0, |x| x + 1);
        DType::from_name(&p[start..]).map(|_| start)
    };
    let picks: Vec<usize> = (0..ps.len())
        .filter(|i| dtype_at(ps[*i]).is_some())
        .collect();
    if picks.is_empty() {
        return insert_snippet(text, rng);
    }
    let i = *rng.pick(&picks);
    let start = dtype_at(ps[i]).unwrap_or(0);
    let new = format!("{}{}", &ps[i][..start], rng.pick(&DType::ALL).name());
    let mut out = ps.clone();
    out[i] = &new;
    out.concat()
}
