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

/// The inline PTX of an `inline_asm_elementwise` call (Triton's semantics): `$0` is the
/// result, `$1…` the inputs; each asm call takes `pack` consecutive elements.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InlineAsm {
    /// The PTX text.
    pub asm: String,
    /// LLVM constraints: one output (`=r`), then one per input, then clobbers (`~{…}`).
    pub constraints: String,
    /// Elements per asm call: 1, 2 or 4.
    pub pack: u32,
    /// Whether the asm has no side effects (Triton's `is_pure`).
    pub pure: bool,
}

impl InlineAsm {
    /// The operand constraints (output first), without clobbers.
    pub fn operands(&self) -> Vec<&str> {
        self.constraints
            .split(',')
            .map(str::trim)
            .filter(|c| !c.starts_with('~'))
            .collect()
    }

    /// Checks the attribute against a call with `ins` inputs, `outs` outputs and `numel`
    /// elements per output; the error says what is wrong.
    pub fn check(&self, ins: usize, outs: usize, numel: usize) -> Result<(), String> {
        if ![1, 2, 4].contains(&self.pack) {
            return Err(format!("pack must be 1, 2 or 4, not {}", self.pack));
        }
        if outs != 1 {
            return Err(format!("inline asm has one result, not {outs}"));
        }
        if !numel.is_multiple_of(self.pack as usize) {
            return Err(format!(
                "{numel} elements are not a multiple of pack = {}",
                self.pack
            ));
        }
        let ops = self.operands();
        if ops.len() != 1 + ins {
            return Err(format!(
                "constraints `{}` name {} operands; one output and {ins} inputs need {}",
                self.constraints,
                ops.len(),
                1 + ins
            ));
        }
        if !ops[0].starts_with('=') || ops[1..].iter().any(|c| c.starts_with('=')) {
            return Err(format!(
                "constraints `{}` must start with the one output (`=r`), then the inputs",
                self.constraints
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
