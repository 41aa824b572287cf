//! Linux `perf` map entries for JIT-loaded kernels (`TRITIUM_PERF_MAP=1`).
//!
//! `perf` names samples in JIT code from `/tmp/perf-<pid>.map`, one `START SIZE name` line
//! (hexadecimal) per function; without it every sample in a kernel is an unnamed address.
//! An object's functions are placed with their section, so a function's address is the
//! entry symbol's address plus their distance inside that section.

use llvm_sys::object::*;
use std::ffi::CStr;
use std::io::Write;

/// Whether loads append to the perf map: `TRITIUM_PERF_MAP` set to anything but `0` or
/// empty, read once.
pub(crate) fn enabled() -> bool {
    static ON: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ON.get_or_init(|| {
        std::env::var_os("TRITIUM_PERF_MAP").is_some_and(|v| !v.is_empty() && v != "0")
    })
}

/// One function of a loaded object, as a perf map line (`START SIZE name`, hexadecimal).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Entry {
    pub start: usize,
    pub size: u64,
    pub name: String,
}

impl std::fmt::Display for Entry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:x} {:x} {}", self.start, self.size, self.name)
    }
}

/// The sized symbols of `object` that lie in the section of `entry`, which was loaded at
/// `entry_addr` (the entry first). Empty when the object does not parse or lacks `entry`.
pub(crate) fn entries(object: &[u8], entry: &str, entry_addr: usize) -> Vec<Entry> {
    // (name, offset in its section, size, section) of every named, sized symbol.
    let mut symbols = Vec::new();
    // SAFETY: the memory buffer copies `object` and outlives the binary made from it; the
    // iterators belong to the binary, which outlives them; each is disposed once.
    unsafe {
        use llvm_sys::core::{LLVMCreateMemoryBufferWithMemoryRangeCopy, LLVMDisposeMemoryBuffer};
        let buf = LLVMCreateMemoryBufferWithMemoryRangeCopy(
            object.as_ptr() as *const libc::c_char,
            object.len(),
            c"perf".as_ptr(),
        );
        let mut error = std::ptr::null_mut();
        let bin = LLVMCreateBinary(buf, std::ptr::null_mut(), &mut error);
        if bin.is_null() {
            if !error.is_null() {
                llvm_sys::core::LLVMDisposeMessage(error);
            }
            LLVMDisposeMemoryBuffer(buf);
            return Vec::new();
        }
        let syms = LLVMObjectFileCopySymbolIterator(bin);
        let sections = LLVMObjectFileCopySectionIterator(bin);
        if !syms.is_null() && !sections.is_null() {
            while LLVMObjectFileIsSymbolIteratorAtEnd(bin, syms) == 0 {
                let name = LLVMGetSymbolName(syms);
                let size = LLVMGetSymbolSize(syms);
                if !name.is_null() && size > 0 {
                    let name = CStr::from_ptr(name).to_string_lossy().into_owned();
                    LLVMMoveToContainingSection(sections, syms);
                    let section = (LLVMObjectFileIsSectionIteratorAtEnd(bin, sections) == 0)
                        .then(|| CStr::from_ptr(LLVMGetSectionName(sections)).to_owned());
                    symbols.push((name, LLVMGetSymbolAddress(syms), size, section));
                }
                LLVMMoveToNextSymbol(syms);
            }
        }
        if !sections.is_null() {
            LLVMDisposeSectionIterator(sections);
        }
        if !syms.is_null() {
            LLVMDisposeSymbolIterator(syms);
        }
        LLVMDisposeBinary(bin);
        LLVMDisposeMemoryBuffer(buf);
    }
    let is_entry = |n: &str| super::jit::names(n.as_bytes(), entry);
    let Some((_, at, _, section)) = symbols.iter().find(|(n, ..)| is_entry(n)).cloned() else {
        return Vec::new();
    };
    let mut out: Vec<Entry> = symbols
        .into_iter()
        .filter(|s| s.3 == section)
        .filter_map(|(name, addr, size, _)| {
            let start = entry_addr.checked_add_signed(addr as isize - at as isize)?;
            Some(Entry { start, size, name })
        })
        .collect();
    out.sort_by_key(|e| (!is_entry(&e.name), e.start));
    out
}

/// Appends `entries` to this process's perf map; failures are ignored (profiling is a
/// convenience, never a reason for a launch to fail).
pub(crate) fn append(entries: &[Entry]) {
    if entries.is_empty() {
        return;
    }
    let path = format!("/tmp/perf-{}.map", std::process::id());
    let text: String = entries.iter().map(|e| format!("{e}\n")).collect();
    let file = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path);
    if let Ok(mut f) = file {
        let _ = f.write_all(text.as_bytes());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use inkwell::context::Context;
    use inkwell::targets::FileType;

    /// An object with two functions in `.text`, `first` then `second`, emitted for the
    /// host.
    fn object() -> Vec<u8> {
        let ctx = Context::create();
        let module = ctx.create_module("perf");
        let i64t = ctx.i64_type();
        for name in ["first", "second"] {
            let f = module.add_function(name, i64t.fn_type(&[i64t.into()], false), None);
            let b = ctx.create_builder();
            b.position_at_end(ctx.append_basic_block(f, "entry"));
            let x = f.get_nth_param(0).unwrap().into_int_value();
            let y = b.build_int_mul(x, x, "").unwrap();
            b.build_return(Some(&y)).unwrap();
        }
        let tm = crate::pipeline::host::host_machine().expect("host target machine");
        tm.write_to_memory_buffer(&module, FileType::Object)
            .unwrap()
            .as_slice()
            .to_vec()
    }

    #[test]
    fn functions_of_the_entry_section_are_placed_from_its_address() {
        let obj = object();
        let at = |e: &[Entry], n: &str| e.iter().find(|x| x.name == n).cloned();
        let base = 0x7f00_0000_0000usize;
        let e = entries(&obj, "second", base);
        assert_eq!(e[0].name, "second", "the entry comes first: {e:?}");
        let (first, second) = (at(&e, "first").unwrap(), at(&e, "second").unwrap());
        assert_eq!(second.start, base);
        assert!(first.size > 0 && second.size > 0, "{e:?}");
        // `first` precedes `second` in `.text`, by at least its own size.
        assert!(first.start + first.size as usize <= base, "{e:?}");
        let f = entries(&obj, "first", base);
        assert_eq!(at(&f, "second").unwrap().start - base, base - first.start);
        assert_eq!(
            format!("{second}"),
            format!("7f0000000000 {:x} second", second.size)
        );
    }

    #[test]
    fn unknown_entry_or_bad_object_gives_nothing() {
        assert!(entries(&object(), "missing", 0x1000).is_empty());
        assert!(entries(b"not an object", "first", 0x1000).is_empty());
    }
}
