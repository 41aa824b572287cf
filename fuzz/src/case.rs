//! A fuzz case: a kernel, its grid and its arguments, with a text form that a failing
//! program is printed in and the suite replays (`fuzz/cases/*.tir`).
//!
//! ```text
//! // tritium-fuzz case
//! // seed 42
//! // grid 2 1 1
//! // num_warps 4
//! // out_of_bounds                 (an out-of-bounds variant: see `check::check`)
//! // view 1 3 8 2                  (parameter 1 as 3 rows of 8 elements, 2 between rows)
//! // view 1 3 8 2 4                (the same, scalar parameter 4 set to its row stride, 10)
//! // row_stride 4 1 8              (scalar parameter 4 is the row stride of parameter 1's rows
//!                                   of 8 elements: see `RowStride`)
//! // arg input 16 <hex bytes>        (read-only; elements are integers of magnitude <= 16)
//! // arg input - <hex bytes>         (read-only, arbitrary values)
//! // arg output <hex bytes>          (each program writes its own region)
//! // arg shared_atomics <hex bytes>  (atomics from every program)
//! // arg scalar <hex bits>
//! // expect 2 <hex bytes>            (pinned: parameter 2's contents after the launch)
//! kernel @fuzz(...) { ... }
//! ```

use crate::info::Memory;
use tritium_dsl::ir::{parse_function, print_function, Block, Function, Op};

/// One argument's value before the launch.
#[derive(Debug, Clone, PartialEq)]
pub enum Arg {
    /// A buffer for a pointer parameter: its bytes and what the comparison knows of it.
    Buffer {
        /// What the kernel does with it.
        memory: Memory,
        /// Initial contents (little-endian elements of the parameter's dtype).
        bytes: Vec<u8>,
    },
    /// A scalar parameter's bits (little-endian, zero-extended).
    Scalar(u64),
}

/// A kernel with everything needed to launch it.
#[derive(Debug, Clone, PartialEq)]
pub struct Case {
    /// The generator seed it came from (0 when written by hand).
    pub seed: u64,
    /// The kernel.
    pub function: Function,
    /// Programs along each axis.
    pub grid: [u64; 3],
    /// Warps per program on the CUDA emulator.
    pub num_warps: u32,
    /// One per parameter.
    pub args: Vec<Arg>,
    /// Pinned results: parameter index and its bytes after the launch.
    pub expect: Vec<(usize, Vec<u8>)>,
    /// An out-of-bounds variant ([`crate::oob`]): the interpreter may reject it, and then
    /// every compiled target's default launch must reject it too, with nothing written
    /// outside the buffers; compiled targets launch it the default way.
    pub out_of_bounds: bool,
    /// Buffers given as strided views (out-of-bounds variants only): their other bytes
    /// are gaps, which no access may touch.
    pub views: Vec<View>,
    /// Scalar parameters the kernel multiplies row indices of a buffer by (from the
    /// generator), for view variants whose rows the kernel walks.
    pub row_strides: Vec<RowStride>,
}

/// A scalar parameter that is the distance, in elements, between the rows of which the
/// kernel reads up to `row` elements of a buffer (`x + (r + a)·stride + j`, `j < row`, or
/// `x + r·stride + j` under a mask of `r` and `j`): the generated case's rows (at least
/// `row`), the view's row stride in a view variant of that buffer ([`View::stride`]), so
/// that the launch's proof must place each row's accesses on one of the view's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RowStride {
    /// The scalar parameter (i32).
    pub param: usize,
    /// The buffer parameter.
    pub buffer: usize,
    /// Elements per row the kernel reads.
    pub row: usize,
}

/// A buffer parameter given as a strided view: `rows` rows of `row` elements from its
/// first element, `gap` elements between one row's end and the next row's start (the
/// buffer holds at least the last row). An access elsewhere in it falls between the
/// view's elements, as into the gaps of a column block of a wider matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct View {
    /// The parameter.
    pub param: usize,
    /// Rows (at least 2: one row is a dense buffer).
    pub rows: usize,
    /// Elements per row.
    pub row: usize,
    /// Elements between rows (at least 1).
    pub gap: usize,
    /// The scalar parameter set to the row stride (`row + gap`), when the kernel reads the
    /// buffer's rows through one ([`RowStride`]).
    pub stride: Option<usize>,
}

impl View {
    /// Elements from the first element to one past the last.
    pub fn extent(&self) -> usize {
        (self.rows - 1) * (self.row + self.gap) + self.row
    }

    /// Whether element `i` of the buffer is one of the view's.
    pub fn holds(&self, i: usize) -> bool {
        let stride = self.row + self.gap;
        i < self.extent() && i % stride < self.row
    }
}

impl Case {
    /// What the comparison knows of each parameter (`None` for scalars).
    pub fn memory(&self) -> Vec<Option<Memory>> {
        self.args
            .iter()
            .map(|a| match a {
                Arg::Buffer { memory, .. } => Some(*memory),
                Arg::Scalar(_) => None,
            })
            .collect()
    }

    /// The text form.
    pub fn to_text(&self) -> String {
        let mut out = String::from("// tritium-fuzz case\n");
        out += &format!("// seed {}\n", self.seed);
        let [x, y, z] = self.grid;
        out += &format!("// grid {x} {y} {z}\n");
        out += &format!("// num_warps {}\n", self.num_warps);
        if self.out_of_bounds {
            out += "// out_of_bounds\n";
        }
        for v in &self.views {
            out += &format!("// view {} {} {} {}", v.param, v.rows, v.row, v.gap);
            out += &v.stride.map_or("\n".into(), |s| format!(" {s}\n"));
        }
        for s in &self.row_strides {
            out += &format!("// row_stride {} {} {}\n", s.param, s.buffer, s.row);
        }
        for a in &self.args {
            match a {
                Arg::Buffer { memory, bytes } => {
                    let kind = match memory {
                        Memory::Input(Some(b)) => format!("input {b}"),
                        Memory::Input(None) => "input -".to_string(),
                        Memory::Output => "output".to_string(),
                        Memory::SharedAtomics => "shared_atomics".to_string(),
                    };
                    out += &format!("// arg {kind} {}\n", hex(bytes));
                }
                Arg::Scalar(bits) => out += &format!("// arg scalar {bits:x}\n"),
            }
        }
        for (p, bytes) in &self.expect {
            out += &format!("// expect {p} {}\n", hex(bytes));
        }
        out + &print_function(&self.function)
    }

    /// Reads the text form; errors name the line.
    pub fn from_text(text: &str) -> Result<Case, String> {
        let mut function = parse_function(text).map_err(|e| e.to_string())?;
        resolve_bitcode(&mut function.body)?;
        let mut case = Case {
            seed: 0,
            function,
            grid: [1, 1, 1],
            num_warps: 4,
            args: Vec::new(),
            expect: Vec::new(),
            out_of_bounds: false,
            views: Vec::new(),
            row_strides: Vec::new(),
        };
        for (n, line) in text.lines().enumerate() {
            let Some(rest) = line.strip_prefix("// ") else {
                continue;
            };
            let err = |m: &str| format!("case line {}: {m}: `{line}`", n + 1);
            let words: Vec<&str> = rest.split_whitespace().collect();
            let num = |i: usize| -> Result<u64, String> {
                words
                    .get(i)
                    .and_then(|w| w.parse().ok())
                    .ok_or_else(|| err("expected a number"))
            };
            match words.first().copied() {
                Some("seed") => case.seed = num(1)?,
                Some("grid") => case.grid = [num(1)?, num(2)?, num(3)?],
                Some("num_warps") => case.num_warps = num(1)? as u32,
                Some("out_of_bounds") if words.len() == 1 => case.out_of_bounds = true,
                Some("view") if matches!(words.len(), 5 | 6) => {
                    let view = View {
                        param: num(1)? as usize,
                        rows: num(2)? as usize,
                        row: num(3)? as usize,
                        gap: num(4)? as usize,
                        stride: (words.len() == 6)
                            .then(|| num(5))
                            .transpose()?
                            .map(|s| s as usize),
                    };
                    if view.rows < 2 || view.row == 0 || view.gap == 0 {
                        return Err(err("a view needs 2 rows or more, and rows and gaps"));
                    }
                    case.views.push(view);
                }
                Some("row_stride") if words.len() == 4 => case.row_strides.push(RowStride {
                    param: num(1)? as usize,
                    buffer: num(2)? as usize,
                    row: num(3)? as usize,
                }),
                Some("arg") => {
                    let arg = match (words.get(1).copied(), words.len()) {
                        (Some("scalar"), 3) => Arg::Scalar(
                            u64::from_str_radix(words[2], 16).map_err(|_| err("bad scalar"))?,
                        ),
                        (Some("input"), 4) => Arg::Buffer {
                            memory: Memory::Input(match words[2] {
                                "-" => None,
                                b => Some(b.parse().map_err(|_| err("bad bound"))?),
                            }),
                            bytes: unhex(words[3]).ok_or_else(|| err("bad bytes"))?,
                        },
                        (Some(kind @ ("output" | "shared_atomics")), 3) => Arg::Buffer {
                            memory: if kind == "output" {
                                Memory::Output
                            } else {
                                Memory::SharedAtomics
                            },
                            bytes: unhex(words[2]).ok_or_else(|| err("bad bytes"))?,
                        },
                        _ => return Err(err("unknown argument")),
                    };
                    case.args.push(arg);
                }
                Some("expect") if words.len() == 3 => case.expect.push((
                    num(1)? as usize,
                    unhex(words[2]).ok_or_else(|| err("bad bytes"))?,
                )),
                _ => {}
            }
        }
        if case.args.len() != case.function.params.len() {
            return Err(format!(
                "the case has {} arguments for {} parameters",
                case.args.len(),
                case.function.params.len()
            ));
        }
        let scalar = |p: usize| matches!(case.args.get(p), Some(Arg::Scalar(_)));
        let buffer = |p: usize| matches!(case.args.get(p), Some(Arg::Buffer { .. }));
        for s in &case.row_strides {
            if !scalar(s.param) || !buffer(s.buffer) || s.row == 0 {
                return Err(format!(
                    "row stride p{} of p{}: not a scalar of a buffer's rows",
                    s.param, s.buffer
                ));
            }
        }
        for v in &case.views {
            if v.stride.is_some_and(|s| !scalar(s)) {
                return Err(format!("view of p{}: its row stride is no scalar", v.param));
            }
            let size = (case.function.params.get(v.param))
                .and_then(|p| case.function.ty(p.value).elem.pointee())
                .map(|d| d.size_bytes());
            match (case.args.get(v.param), size) {
                (Some(Arg::Buffer { bytes, .. }), Some(size))
                    if bytes.len() >= v.extent() * size => {}
                _ => {
                    return Err(format!(
                        "view of p{}: not a buffer of {} elements or more",
                        v.param,
                        v.extent()
                    ))
                }
            }
        }
        Ok(case)
    }
}

/// Gives custom calls read back from text their bitcode: the text names it by label, and
/// the generator calls only the builtins and `tritium-kernels`' `add.bc`.
fn resolve_bitcode(b: &mut Block) -> Result<(), String> {
    for inst in &mut b.insts {
        if let Op::Custom(c) = &mut inst.op {
            let bc = &mut c.attrs.bitcode;
            if !bc.is_builtin() && bc.bytes().is_none() {
                if bc.label() != "add.bc" {
                    return Err(format!(
                        "custom `{}` at {}: unknown bitcode `{}` (cases may use `builtin` and `add.bc`)",
                        c.name,
                        inst.loc,
                        bc.label()
                    ));
                }
                *bc = tritium_kernels::custom_add::add_bitcode();
            }
        }
        for r in inst.op.regions_mut() {
            resolve_bitcode(r)?;
        }
    }
    Ok(())
}

fn hex(bytes: &[u8]) -> String {
    if bytes.is_empty() {
        return "-".into();
    }
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn unhex(s: &str) -> Option<Vec<u8>> {
    if s == "-" {
        return Some(Vec::new());
    }
    if !s.len().is_multiple_of(2) {
        return None;
    }
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(s.get(i..i + 2)?, 16).ok())
        .collect()
}
