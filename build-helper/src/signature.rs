//! C++ signatures of custom-op entry points, read from the debug info clang writes with
//! `-g` into textual LLVM IR, and embedded into the bitcode as one string per function:
//! `__tritium_sig_<function>`, `"<ret>|<param>,<param>,…"` where each is `v` (void),
//! `s<dtype>` (a scalar), `m<dtype>x<rank>` (a `memref_t<T, R>*`, const or not) or `?`
//! (anything else, or a type this reader does not know). Dtypes are Tritium's names (`f32`,
//! `i64`, `bool`…). Tritium's kernel linker compares each custom call with its record.
//!
//! The reader is deliberately forgiving: what it cannot follow becomes `?`, and a
//! function it cannot read gets no record (the linker then checks only that tiles are
//! passed as pointers).

use std::collections::HashMap;

/// The symbol of `function`'s record.
pub const RECORD_PREFIX: &str = "__tritium_sig_";

/// `(function, record)` for every function defined in `ll` (textual LLVM IR with debug
/// info) that has a subprogram.
pub fn records(ll: &str) -> Vec<(String, String)> {
    let meta: HashMap<&str, &str> = ll
        .lines()
        .filter_map(|l| {
            let l = l.trim_start();
            let rest = l.strip_prefix('!')?;
            let (id, body) = rest.split_once(" = ")?;
            id.bytes().all(|b| b.is_ascii_digit()).then_some((id, body))
        })
        .collect();
    let mut out = Vec::new();
    // Externally visible definitions only (custom_op.h's weak thread helpers are in every
    // source).
    let local = [
        " weak ",
        " weak_odr ",
        " linkonce",
        " internal ",
        " private ",
        " available_externally ",
    ];
    for line in ll
        .lines()
        .filter(|l| l.starts_with("define ") && !local.iter().any(|k| l.contains(k)))
    {
        let Some(name) = line
            .split_once('@')
            .and_then(|(_, r)| r.split_once('('))
            .map(|(n, _)| n.trim_matches('"'))
        else {
            continue;
        };
        let Some(sp) = line.rsplit_once("!dbg !").map(|(_, r)| id_prefix(r)) else {
            continue;
        };
        if let Some(record) = record_of(&meta, sp) {
            out.push((name.to_string(), record));
        }
    }
    out
}

/// The C++ lines that define the records.
pub fn definitions(records: &[(String, String)]) -> String {
    let mut s = String::new();
    for (f, r) in records {
        if !f.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        s += &format!(
            "extern \"C\" __attribute__((weak)) const char {RECORD_PREFIX}{f}[] = \"{r}\";\n"
        );
    }
    s
}

/// The leading digits of `s` (a metadata id after `!`).
fn id_prefix(s: &str) -> &str {
    let end = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    &s[..end]
}

/// The value of `field: !N` in a metadata body.
fn field<'a>(body: &'a str, name: &str) -> Option<&'a str> {
    let at = body.find(&format!("{name}: !"))? + name.len() + 3;
    Some(id_prefix(&body[at..]))
}

/// The value of `field: "…"` in a metadata body.
fn string_field<'a>(body: &'a str, name: &str) -> Option<&'a str> {
    let at = body.find(&format!("{name}: \""))? + name.len() + 3;
    body[at..].split('"').next()
}

fn record_of(meta: &HashMap<&str, &str>, sp: &str) -> Option<String> {
    let body = meta.get(sp)?;
    if !body.contains("DISubprogram(") {
        return None;
    }
    let ty = meta.get(field(body, "type")?)?;
    let list = meta.get(field(ty, "types")?)?;
    let items = list.trim().strip_prefix("!{")?.strip_suffix('}')?;
    // Line-tables-only debug info (NVPTX's) lists no types: nothing to record.
    if items.trim().is_empty() {
        return None;
    }
    let mut kinds = items.split(',').map(|t| {
        let t = t.trim();
        if t == "null" {
            "v".to_string()
        } else {
            t.strip_prefix('!')
                .map_or_else(|| "?".to_string(), |id| kind(meta, id, 0))
        }
    });
    let ret = kinds.next()?;
    let params: Vec<String> = kinds.collect();
    Some(format!("{ret}|{}", params.join(",")))
}

/// The record of the type `!id`.
fn kind(meta: &HashMap<&str, &str>, id: &str, depth: usize) -> String {
    let Some(body) = meta.get(id).filter(|_| depth < 16) else {
        return "?".into();
    };
    let base = || field(body, "baseType");
    if body.contains("DIBasicType(") {
        return basic(body).map_or("?".into(), |d| format!("s{d}"));
    }
    if body.contains("DW_TAG_typedef") || body.contains("DW_TAG_const_type") {
        return base().map_or("?".into(), |b| kind(meta, b, depth + 1));
    }
    if body.contains("DW_TAG_pointer_type") {
        // A pointer to (a const) memref_t<T, R>.
        let mut b = base();
        for _ in 0..4 {
            let Some(t) = b.and_then(|b| meta.get(b)) else {
                break;
            };
            if t.contains("DW_TAG_const_type") || t.contains("DW_TAG_typedef") {
                b = field(t, "baseType");
                continue;
            }
            if let Some(m) = string_field(t, "name").and_then(memref) {
                return m;
            }
            break;
        }
        return "?".into();
    }
    "?".into()
}

/// `m<dtype>x<rank>` of a `memref_t<T, RUL>` name.
fn memref(name: &str) -> Option<String> {
    let inner = name.strip_prefix("memref_t<")?.strip_suffix('>')?;
    let (elem, rank) = inner.rsplit_once(',')?;
    let rank: u32 = rank
        .trim()
        .trim_end_matches(['U', 'L', 'u', 'l'])
        .parse()
        .ok()?;
    Some(format!("m{}x{rank}", c_name(elem.trim())?))
}

/// The dtype of a basic type's metadata body.
fn basic(body: &str) -> Option<&'static str> {
    let name = string_field(body, "name")?;
    if let Some(d) = c_name(name) {
        return Some(d);
    }
    let size: u32 = body
        .split("size: ")
        .nth(1)?
        .split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()?;
    let enc = body.split("encoding: ").nth(1)?;
    Some(
        match (
            enc.starts_with("DW_ATE_signed"),
            enc.starts_with("DW_ATE_unsigned"),
            size,
        ) {
            (true, _, 8) => "i8",
            (true, _, 16) => "i16",
            (true, _, 32) => "i32",
            (true, _, 64) => "i64",
            (_, true, 8) => "u8",
            (_, true, 16) => "u16",
            (_, true, 32) => "u32",
            (_, true, 64) => "u64",
            _ => return None,
        },
    )
}

/// The dtype of a C++ type name as clang spells it in debug info.
fn c_name(name: &str) -> Option<&'static str> {
    Some(match name {
        "float" => "f32",
        "double" => "f64",
        "_Float16" | "__fp16" | "half" => "f16",
        "__bf16" | "bfloat16_t" => "bf16",
        "bool" | "_Bool" => "bool",
        "signed char" | "char" | "int8_t" => "i8",
        "short" | "int16_t" => "i16",
        "int" | "int32_t" => "i32",
        "long" | "long long" | "int64_t" => "i64",
        "unsigned char" | "uint8_t" => "u8",
        "unsigned short" | "uint16_t" => "u16",
        "unsigned int" | "uint32_t" => "u32",
        "unsigned long" | "unsigned long long" | "uint64_t" => "u64",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What clang 19 writes for two entries (trimmed to the lines the reader uses).
    const LL: &str = r#"
define dso_local void @_mlir_ciface_add(ptr %0, ptr %1, ptr %2, i64 %3) #1 !dbg !26 {
define dso_local noundef i32 @simt_add(i32 %0, i8 %1, i1 %2, bfloat %3) #1 !dbg !43 {
!14 = !DIDerivedType(tag: DW_TAG_typedef, name: "int64_t", file: !15, line: 27, baseType: !16)
!16 = !DIDerivedType(tag: DW_TAG_typedef, name: "__int64_t", file: !17, line: 44, baseType: !18)
!18 = !DIBasicType(name: "long", size: 64, encoding: DW_ATE_signed)
!26 = distinct !DISubprogram(name: "_mlir_ciface_add", scope: !1, file: !1, line: 2, type: !27, scopeLine: 2, unit: !0)
!27 = !DISubroutineType(types: !28)
!28 = !{null, !29, !31, !34, !14}
!29 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !30, size: 64)
!30 = !DICompositeType(tag: DW_TAG_structure_type, name: "memref_t<float, 1UL>", file: !11, line: 75, identifier: "_ZTS8memref_tIfLm1EE")
!31 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !32, size: 64)
!32 = !DIDerivedType(tag: DW_TAG_const_type, baseType: !33)
!33 = !DICompositeType(tag: DW_TAG_structure_type, name: "memref_t<_Float16, 2UL>", file: !11, line: 75)
!34 = !DIDerivedType(tag: DW_TAG_pointer_type, baseType: !35, size: 64)
!35 = !DICompositeType(tag: DW_TAG_structure_type, name: "memref_t<int, 1UL>", file: !11, line: 75)
!43 = distinct !DISubprogram(name: "simt_add", scope: !1, file: !1, line: 3, type: !44, unit: !0)
!44 = !DISubroutineType(types: !45)
!45 = !{!46, !46, !49, !53, !54}
!46 = !DIDerivedType(tag: DW_TAG_typedef, name: "int32_t", file: !15, line: 26, baseType: !47)
!47 = !DIDerivedType(tag: DW_TAG_typedef, name: "__int32_t", file: !17, line: 41, baseType: !48)
!48 = !DIBasicType(name: "int", size: 32, encoding: DW_ATE_signed)
!49 = !DIDerivedType(tag: DW_TAG_typedef, name: "uint8_t", file: !50, line: 24, baseType: !51)
!51 = !DIDerivedType(tag: DW_TAG_typedef, name: "__uint8_t", file: !17, line: 38, baseType: !52)
!52 = !DIBasicType(name: "unsigned char", size: 8, encoding: DW_ATE_unsigned_char)
!53 = !DIBasicType(name: "bool", size: 8, encoding: DW_ATE_boolean)
!54 = !DIDerivedType(tag: DW_TAG_typedef, name: "bfloat16_t", file: !11, line: 55, baseType: !55)
!55 = !DIBasicType(name: "__bf16", size: 16, encoding: DW_ATE_float)
"#;

    #[test]
    fn records_of_simd_and_simt_entries() {
        let r = records(LL);
        assert_eq!(
            r,
            [
                (
                    "_mlir_ciface_add".to_string(),
                    "v|mf32x1,mf16x2,mi32x1,si64".to_string()
                ),
                (
                    "simt_add".to_string(),
                    "si32|si32,su8,sbool,sbf16".to_string()
                ),
            ]
        );
        let d = definitions(&r);
        assert!(d.contains("extern \"C\" __attribute__((weak)) const char __tritium_sig__mlir_ciface_add[] = \"v|mf32x1,mf16x2,mi32x1,si64\";"), "{d}");
    }

    #[test]
    fn unreadable_types_are_unknown_not_errors() {
        assert!(records("define void @f() !dbg !9 {\n!9 = !{}\n").is_empty());
        let lines_only = "define void @f() !dbg !9 {\n!9 = distinct !DISubprogram(name: \"f\", type: !10)\n!10 = !DISubroutineType(types: !11)\n!11 = !{}\n";
        assert!(records(lines_only).is_empty());
        assert!(records("garbage").is_empty());
        assert_eq!(memref("memref_t<my_struct, 2UL>"), None);
        assert_eq!(memref("memref_t<double, 3UL>").as_deref(), Some("mf64x3"));
    }
}
