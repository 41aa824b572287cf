//! Custom ops (`hivm.hir.custom`): a call of user code or a shipped `__builtin_*`, with the
//! core/pipe/mode attributes of AscendNPU-IR and their canonicalization table.

use super::{DType, Value};
use std::fmt;
use std::sync::Arc;

named_enum! {
    /// The core type an op executes on (`hivm.tcore_type`).
    CoreType {
        /// The vector unit.
        Vector = "vector",
        /// The matrix (cube) unit; the vector mode does not apply.
        Cube = "cube",
        /// Either unit, the compiler's choice.
        CubeOrVector = "cube_or_vector",
        /// Both units together (a mixed op).
        CubeAndVector = "cube_and_vector",
    }
}

named_enum! {
    /// The pipe an op executes on (`hivm.pipe`).
    Pipe {
        /// Scalar pipe.
        PipeS = "pipe_s",
        /// Vector pipe.
        PipeV = "pipe_v",
        /// Matrix pipe.
        PipeM = "pipe_m",
        /// Memory transfer into L1/L0 (cube side).
        PipeMte1 = "pipe_mte1",
        /// Memory transfer global → local.
        PipeMte2 = "pipe_mte2",
        /// Memory transfer local → global.
        PipeMte3 = "pipe_mte3",
        /// Every pipe (a barrier-like op).
        PipeAll = "pipe_all",
        /// Fixpipe (cube output path).
        PipeFix = "pipe_fix",
    }
}

named_enum! {
    /// How the vector unit runs the op (`hivm.vf_mode`); see `docs/custom_ops.md`.
    Mode {
        /// One call per program with whole tiles (`_mlir_ciface_<symbol>`, memref descriptors).
        Simd = "simd",
        /// One call per element of a scalar function `<symbol>`, inlined and vectorized.
        Simt = "simt",
        /// The Simt entry when the bitcode defines `<symbol>`, else the Simd entry.
        Mix = "mix",
    }
}

/// The pipes each core type may use: the canonicalization table of `docs/custom_ops.md`.
pub fn allowed_pipes(core: CoreType) -> &'static [Pipe] {
    use Pipe::*;
    match core {
        CoreType::Vector => &[PipeV, PipeS, PipeMte2, PipeMte3, PipeAll],
        CoreType::Cube => &[PipeM, PipeMte1, PipeMte2, PipeFix, PipeS, PipeAll],
        // Only pipes both units have: the op may land on either.
        CoreType::CubeOrVector => &[PipeS, PipeMte2, PipeAll],
        // A mixed op occupies several pipes of both units.
        CoreType::CubeAndVector => &[PipeAll],
    }
}

/// Where a custom op's implementation lives.
#[derive(Clone)]
pub struct Bitcode {
    label: String,
    contents: BitcodeContents,
    /// The same library compiled for `nvptx64-nvidia-cuda`, for the CUDA backend.
    nvptx: Option<Arc<[u8]>>,
}

#[derive(Clone, PartialEq)]
enum BitcodeContents {
    Bytes(Arc<[u8]>),
    Builtin,
    /// Read back from IR text: only the label is known.
    Unresolved,
}

impl Bitcode {
    /// Bitcode bytes, named `label` in the IR text (e.g. `"add.bc"`).
    pub fn from_bytes(label: impl Into<String>, bytes: impl Into<Arc<[u8]>>) -> Bitcode {
        Bitcode {
            label: label.into(),
            contents: BitcodeContents::Bytes(bytes.into()),
            nvptx: None,
        }
    }

    /// Adds the same library compiled for `nvptx64-nvidia-cuda` (tritium-build's
    /// `Target::Nvptx`), which the CUDA backend links instead of the host bytes. It is not
    /// part of the IR text (the label names both).
    pub fn with_nvptx(mut self, bytes: impl Into<Arc<[u8]>>) -> Bitcode {
        self.nvptx = Some(bytes.into());
        self
    }

    /// The NVPTX bytes added by [`with_nvptx`](Self::with_nvptx).
    pub fn nvptx_bytes(&self) -> Option<&[u8]> {
        self.nvptx.as_deref()
    }

    /// Reads a bitcode file now; the error names the path. Prefer
    /// [`include_bitcode!`](crate::include_bitcode), which embeds it in the binary.
    pub fn from_file(path: impl AsRef<std::path::Path>) -> Result<Bitcode, String> {
        let path = path.as_ref();
        let bytes = std::fs::read(path)
            .map_err(|e| format!("cannot read bitcode file `{}`: {e}", path.display()))?;
        Ok(Bitcode::from_bytes(path.display().to_string(), bytes))
    }

    /// The library shipped inside the backend (for `__builtin_*` ops).
    pub fn builtin() -> Bitcode {
        Bitcode {
            label: "builtin".into(),
            contents: BitcodeContents::Builtin,
            nvptx: None,
        }
    }

    /// A label read back from IR text, with no contents.
    pub fn unresolved(label: impl Into<String>) -> Bitcode {
        let label = label.into();
        if label == "builtin" {
            return Bitcode::builtin();
        }
        Bitcode {
            label,
            contents: BitcodeContents::Unresolved,
            nvptx: None,
        }
    }

    /// The name shown in IR text.
    pub fn label(&self) -> &str {
        &self.label
    }

    /// The bytes, when this is user bitcode with contents.
    pub fn bytes(&self) -> Option<&[u8]> {
        match &self.contents {
            BitcodeContents::Bytes(b) => Some(b),
            _ => None,
        }
    }

    /// True for the backend's builtin library.
    pub fn is_builtin(&self) -> bool {
        self.contents == BitcodeContents::Builtin
    }
}

impl PartialEq for Bitcode {
    fn eq(&self, other: &Self) -> bool {
        self.label == other.label && self.contents == other.contents && self.nvptx == other.nvptx
    }
}

impl fmt::Debug for Bitcode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match &self.contents {
            BitcodeContents::Bytes(b) => format!("{} bytes", b.len()),
            BitcodeContents::Builtin => "builtin".into(),
            BitcodeContents::Unresolved => "unresolved".into(),
        };
        write!(f, "Bitcode({:?}, {what})", self.label)
    }
}

/// A per-program temp buffer the implementation gets after the outputs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExtraBuffer {
    /// Element type.
    pub dtype: DType,
    /// Number of elements.
    pub len: usize,
}

/// The attributes of a custom op after canonicalization.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomAttrs {
    /// Core type.
    pub core: CoreType,
    /// Pipe.
    pub pipe: Pipe,
    /// Vector mode; `None` on a cube core (canonicalized away).
    pub mode: Option<Mode>,
    /// Implementation function name.
    pub symbol: String,
    /// Implementation bitcode.
    pub bitcode: Bitcode,
}

impl CustomAttrs {
    /// Checks a core/pipe/mode combination against [`allowed_pipes`] and canonicalizes it:
    /// a cube core drops the mode (it only applies to vector units), a vector-capable core
    /// without a mode gets Simd. The error says what was expected.
    pub fn canonical_mode(
        core: CoreType,
        pipe: Pipe,
        mode: Option<Mode>,
    ) -> Result<Option<Mode>, String> {
        let pipes = allowed_pipes(core);
        if !pipes.contains(&pipe) {
            let names: Vec<&str> = pipes.iter().map(|p| p.name()).collect();
            return Err(format!(
                "pipe `{}` is not available on core `{}` (expected one of {})",
                pipe.name(),
                core.name(),
                names.join(", ")
            ));
        }
        Ok(match core {
            CoreType::Cube => None,
            _ => Some(mode.unwrap_or(Mode::Simd)),
        })
    }

    /// The calling convention the backend uses: Simd when no mode applies.
    pub fn effective_mode(&self) -> Mode {
        self.mode.unwrap_or(Mode::Simd)
    }
}

/// One custom-op call: `outs` are destination-passing; the results take their types.
#[derive(Debug, Clone, PartialEq)]
pub struct CustomCall {
    /// The registered op name (e.g. `"add"`, `"__builtin_gather_load"`).
    pub name: String,
    /// Canonical attributes.
    pub attrs: CustomAttrs,
    /// Inputs: tiles, scalars or pointers.
    pub ins: Vec<Value>,
    /// Initial values of the outputs.
    pub outs: Vec<Value>,
    /// Per-program temp buffers passed after the outputs.
    pub extra: Vec<ExtraBuffer>,
    /// Triton's `inline_asm_elementwise`: the inline PTX the CUDA generator emits on
    /// hardware instead of calling the (Simt) op, which every other device runs.
    pub inline_asm: Option<InlineAsm>,
}

/// The inline PTX of an `inline_asm_elementwise` call (Triton's semantics): each asm call
/// takes `pack` consecutive elements of every operand; its operands are the results'
/// registers (`$0…`, result by result), then the inputs' (input by input), as
/// [`AsmOperand`] lays them out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineAsm {
    /// The PTX text.
    pub asm: String,
    /// LLVM constraints: the outputs (`=r`), then the inputs, then clobbers (`~{…}`).
    pub constraints: String,
    /// Elements per asm call: 1, 2, 4, 8 or 16.
    pub pack: u32,
    /// Whether the asm has no side effects (Triton's `is_pure`).
    pub pure: bool,
}

/// How `pack` elements of one operand (a result or an input) of dtype `d` travel through
/// the asm, as Triton's lowering packs them: an element narrower than 32 bits shares a
/// register with its neighbours, `min(pack, 32 / bits)` of them (the first in the low
/// bits); a wider one takes a register of its own. The operand takes `pack /
/// per_register` registers, consecutive in the constraints: fp8 → f16 with `pack = 4`
/// reads one 32-bit register (`r`) and writes two (`=r,=r,r`); f32 with `pack = 2` takes
/// two, f64 (`l` or `d`) two 64-bit ones.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AsmOperand {
    /// The element's dtype.
    pub dtype: DType,
    /// Registers per asm call.
    pub registers: usize,
    /// Elements in each register.
    pub per_register: usize,
}

impl AsmOperand {
    /// The layout of `pack` elements of `dtype`.
    pub fn of(dtype: DType, pack: u32) -> AsmOperand {
        let bits = Self::elem_bits(dtype) as usize;
        let per_register = if bits < 32 {
            (32 / bits).min(pack as usize)
        } else {
            1
        };
        AsmOperand {
            dtype,
            registers: (pack as usize / per_register).max(1),
            per_register,
        }
    }

    /// The bits of one element as the asm sees it (a bool is its storage byte).
    pub fn elem_bits(d: DType) -> u32 {
        d.size_bytes() as u32 * 8
    }

    /// The bits each register holds.
    pub fn register_bits(&self) -> u32 {
        self.per_register as u32 * Self::elem_bits(self.dtype)
    }

    fn describe(&self, what: &str) -> String {
        let regs = match self.registers {
            1 => "1 register".to_string(),
            n => format!("{n} registers"),
        };
        match self.per_register {
            1 => format!("{regs} for the {} {what}", self.dtype),
            n => format!("{regs} of {n} for the {} {what}", self.dtype),
        }
    }
}

/// A register class of an asm constraint: its bits and whether it is an integer register.
fn asm_register(letter: &str) -> Option<(u32, bool)> {
    Some(match letter {
        "c" => (8, true),
        "h" => (16, true),
        "r" => (32, true),
        "l" => (64, true),
        "f" => (32, false),
        "d" => (64, false),
        _ => return None,
    })
}

impl InlineAsm {
    /// The operand constraints (outputs first), without clobbers.
    pub fn operands(&self) -> Vec<&str> {
        self.constraints
            .split(',')
            .map(str::trim)
            .filter(|c| !c.starts_with('~'))
            .collect()
    }

    /// The register class of constraint `c` (`=r`, `=&h`, `l`…): `c`, `h`, `r`, `l`, `f`
    /// or `d`, with its bits and whether it is an integer register.
    pub fn register_class(c: &str) -> Option<(&str, u32, bool)> {
        let letter = c.trim_start_matches('=').trim_start_matches('&');
        asm_register(letter).map(|(bits, int)| (letter, bits, int))
    }

    /// The layouts of the results (`outs`, in order) and the inputs (`ins`), whose
    /// registers are the asm's operands in that order.
    pub fn layout(&self, ins: &[DType], outs: &[DType]) -> (Vec<AsmOperand>, Vec<AsmOperand>) {
        let of = |ds: &[DType]| ds.iter().map(|d| AsmOperand::of(*d, self.pack)).collect();
        (of(outs), of(ins))
    }

    /// Checks the attribute against a call with inputs `ins` and results `outs` (their
    /// dtypes) of `numel` elements each; the error says what is wrong and what was
    /// expected.
    pub fn check(&self, ins: &[DType], outs: &[DType], numel: usize) -> Result<(), String> {
        if ![1, 2, 4, 8, 16].contains(&self.pack) {
            return Err(format!("pack must be 1, 2, 4, 8 or 16, not {}", self.pack));
        }
        if outs.is_empty() {
            return Err("inline asm needs at least one result".into());
        }
        if !numel.is_multiple_of(self.pack as usize) {
            return Err(format!(
                "{numel} elements are not a multiple of pack = {}",
                self.pack
            ));
        }
        let (res, args) = self.layout(ins, outs);
        let n_out: usize = res.iter().map(|o| o.registers).sum();
        let n_in: usize = args.iter().map(|o| o.registers).sum();
        let ops = self.operands();
        let plural = |n: usize, what: &str| format!("{n} {what}{}", if n == 1 { "" } else { "s" });
        if ops.len() != n_out + n_in {
            let simple = res.iter().chain(&args).all(|o| o.registers == 1);
            let mut need = format!(
                "{} and {}",
                plural(outs.len(), "result"),
                plural(ins.len(), "input")
            );
            if self.pack > 1 {
                need += &format!(" with pack = {}", self.pack);
            }
            let detail = if simple {
                " (one register each)".to_string()
            } else {
                let parts: Vec<String> = res
                    .iter()
                    .map(|o| o.describe("result"))
                    .chain(args.iter().map(|o| o.describe("input")))
                    .collect();
                format!(": {}", parts.join(", "))
            };
            return Err(format!(
                "constraints `{}` name {} operands; {need} need {}{detail}",
                self.constraints,
                ops.len(),
                n_out + n_in,
            ));
        }
        let outputs = ops.iter().take_while(|c| c.starts_with('=')).count();
        if outputs != n_out || ops[n_out..].iter().any(|c| c.starts_with('=')) {
            return Err(format!(
                "constraints `{}` must start with the {} (`=r`), then the {}",
                self.constraints,
                plural(n_out, "output register"),
                plural(n_in, "input register"),
            ));
        }
        let role = |what: &'static str| {
            move |(k, o): (usize, &AsmOperand)| std::iter::repeat_n((what, k, *o), o.registers)
        };
        let regs = (res.iter().enumerate().flat_map(role("result")))
            .chain(args.iter().enumerate().flat_map(role("input")));
        for (i, (c, (what, k, o))) in ops.iter().zip(regs).enumerate() {
            let Some((_, bits, int)) = Self::register_class(c) else {
                return Err(format!(
                    "constraint `{c}` of operand ${i}: supported registers are c, h, r, l \
                     (8, 16, 32, 64-bit integers), f, d (32, 64-bit floats), `=` marking outputs"
                ));
            };
            let want = o.register_bits();
            if want == bits || (o.per_register == 1 && want < bits && int) {
                continue;
            }
            let holds = match o.per_register {
                1 => format!("one {} element", o.dtype),
                n => format!("{n} {} elements", o.dtype),
            };
            let one_float = o.per_register == 1 && o.dtype.is_float();
            let letter = match want {
                8 => "c",
                16 => "h",
                32 if one_float && o.dtype == DType::F32 => "f` or `r",
                32 => "r",
                64 if one_float => "d` or `l",
                _ => "l",
            };
            let wider = if o.per_register == 1 && want < 64 {
                ", or a wider integer register (zero-extended)"
            } else {
                ""
            };
            return Err(format!(
                "constraint `{c}` of operand ${i} ({what} {k}) is a {bits}-bit {} register, but \
                 the operand holds {holds} per register ({want} bits, pack = {}): use `{letter}`{wider}",
                if int { "integer" } else { "float" },
                self.pack,
            ));
        }
        Ok(())
    }
}

impl CustomCall {
    /// True for the shipped `__builtin_*` ops.
    pub fn is_builtin(&self) -> bool {
        is_builtin_name(&self.name)
    }

    /// What a shipped builtin reads or writes through its pointer (input 0), as elements
    /// of the pointee from it; `None` for user ops and `__builtin_histogram`. The whole
    /// extent must lie inside one buffer for a launch to run the call: the bounds proof
    /// covers it, or generated code checks it once per call (and the interpreter too).
    /// `out_shape` gives the shape of the call's out tile.
    pub fn builtin_access(&self, out_shape: impl Fn(Value) -> Vec<usize>) -> Option<BuiltinAccess> {
        let (ptr, extent, write) = match self.name.as_str() {
            "__builtin_gather_load" => (
                *self.ins.first()?,
                BuiltinExtent::Prefix {
                    bound: *self.ins.get(2)?,
                },
                false,
            ),
            "__builtin_indirect_atomic" => (
                *self.ins.first()?,
                BuiltinExtent::Prefix {
                    bound: *self.ins.get(3)?,
                },
                true,
            ),
            "__builtin_index_select" => {
                let row_len = *out_shape(*self.outs.first()?).get(1)? as u64;
                let (stride, rows) = (*self.ins.get(2)?, *self.ins.get(3)?);
                (
                    *self.ins.first()?,
                    BuiltinExtent::Rows {
                        stride,
                        rows,
                        row_len,
                    },
                    false,
                )
            }
            _ => return None,
        };
        Some(BuiltinAccess { ptr, extent, write })
    }

    /// Whether the call may write memory through a pointer input: user code may; of the
    /// builtins only `__builtin_indirect_atomic` does.
    pub fn writes_memory(&self) -> bool {
        if self.is_builtin() {
            return self.name == "__builtin_indirect_atomic";
        }
        true
    }
}

/// The memory a builtin call touches through its pointer ([`CustomCall::builtin_access`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BuiltinAccess {
    /// The pointer input (a scalar pointer).
    pub ptr: Value,
    /// The elements it may touch from `ptr`.
    pub extent: BuiltinExtent,
    /// Whether it writes them (an atomic).
    pub write: bool,
}

/// The elements a builtin may touch from its pointer: a function of its scalar inputs
/// (all i64), independent of the index tile, so one range test covers every lane.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BuiltinExtent {
    /// `[0, bound)`, nothing when `bound <= 0` (`__builtin_gather_load`,
    /// `__builtin_indirect_atomic`).
    Prefix {
        /// The `bound` input.
        bound: Value,
    },
    /// `r · stride + [0, row_len)` for every `r` in `[0, rows)`, nothing when `rows <= 0`
    /// (`__builtin_index_select`; `row_len` is the out tile's second extent).
    Rows {
        /// The `row_stride` input.
        stride: Value,
        /// The `num_rows` input.
        rows: Value,
        /// Elements per row.
        row_len: u64,
    },
}

impl BuiltinExtent {
    /// The elements `[lo, hi)` touched, given the scalar inputs' values: `None` when
    /// nothing is, `Some(Err(()))` when the range does not fit in i64.
    pub fn elements(&self, value: impl Fn(Value) -> i64) -> Option<Result<(i64, i64), ()>> {
        match *self {
            BuiltinExtent::Prefix { bound } => {
                let n = value(bound);
                (n > 0).then_some(Ok((0, n)))
            }
            BuiltinExtent::Rows {
                stride,
                rows,
                row_len,
            } => {
                let rows = value(rows);
                if rows <= 0 || row_len == 0 {
                    return None;
                }
                let Some(last) = (rows - 1).checked_mul(value(stride)) else {
                    return Some(Err(()));
                };
                let end = (last.max(0)).checked_add(row_len as i64).ok_or(());
                Some(end.map(|end| (last.min(0), end)))
            }
        }
    }
}

/// Names reserved for the shipped library start with `__builtin`.
pub fn is_builtin_name(name: &str) -> bool {
    name.starts_with("__builtin")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Triton's packing: elements per register and registers per operand for each pack.
    #[test]
    fn asm_operands_pack_as_triton() {
        let cases = [
            (DType::F8E4M3, 1, 1, 1),
            (DType::F8E4M3, 2, 1, 2),
            (DType::U8, 4, 1, 4),
            (DType::U8, 8, 2, 4),
            (DType::F16, 1, 1, 1),
            (DType::F16, 2, 1, 2),
            (DType::F16, 4, 2, 2),
            (DType::F32, 1, 1, 1),
            (DType::F32, 4, 4, 1),
            (DType::I64, 2, 2, 1),
            (DType::Bool, 4, 1, 4),
        ];
        for (d, pack, registers, per_register) in cases {
            let o = AsmOperand::of(d, pack);
            assert_eq!(
                (o.registers, o.per_register),
                (registers, per_register),
                "{d} pack {pack}"
            );
        }
        assert_eq!(AsmOperand::of(DType::F8E4M3, 2).register_bits(), 16);
        assert_eq!(AsmOperand::of(DType::F64, 2).register_bits(), 64);
    }

    #[test]
    fn constraints_are_checked_against_the_registers() {
        let asm = |constraints: &str, pack| InlineAsm {
            asm: String::new(),
            constraints: constraints.into(),
            pack,
            pure: true,
        };
        let (f16, u32, i64) = (DType::F16, DType::U32, DType::I64);
        assert!(asm("=r,=r,r,r", 4)
            .check(&[DType::F8E4M3], &[f16], 8)
            .is_err());
        assert!(asm("=r,=r,r", 4).check(&[DType::F8E4M3], &[f16], 8).is_ok());
        assert!(asm("=r,h", 2).check(&[DType::F8E4M3], &[f16], 8).is_ok());
        assert!(asm("=l,=l,l,l,~{memory}", 2)
            .check(&[i64], &[i64], 8)
            .is_ok());
        assert!(asm("=d,=d,l,l", 2).check(&[i64], &[DType::F64], 8).is_ok());
        assert!(asm("=r,=&r,r,r", 1)
            .check(&[u32, u32], &[u32, u32], 8)
            .is_ok());
        // A narrower element zero-extended into an integer register; not a float one.
        assert!(asm("=r,c", 1).check(&[DType::U8], &[u32], 8).is_ok());
        assert!(asm("=r,r", 1).check(&[f16], &[u32], 8).is_ok());
        let e = asm("=f,h", 1).check(&[f16], &[f16], 8).unwrap_err();
        assert!(
            e.contains("constraint `=f` of operand $0 (result 0) is a 32-bit float register"),
            "{e}"
        );
        let e = asm("=r,h", 1).check(&[u32], &[u32], 8).unwrap_err();
        assert!(
            e.contains("operand $1 (input 0) is a 16-bit integer"),
            "{e}"
        );
        assert!(
            e.ends_with("use `r`, or a wider integer register (zero-extended)"),
            "{e}"
        );
        let e = asm("=r,r", 4).check(&[u32], &[u32], 6).unwrap_err();
        assert_eq!(e, "6 elements are not a multiple of pack = 4");
        let e = asm("r,=r", 1).check(&[u32], &[u32], 8).unwrap_err();
        assert!(e.contains("must start with the 1 output register"), "{e}");
        let e = asm("", 1).check(&[u32], &[], 8).unwrap_err();
        assert_eq!(e, "inline asm needs at least one result");
    }
}
