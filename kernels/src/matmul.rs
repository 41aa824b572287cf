//! Triton tutorial 03: blocked matrix multiplication with f32 accumulation.

use ndarray::{Array2, ArrayView2, ArrayViewMut2};
use tritium::prelude::*;

/// `c = a @ b` for row-major strided matrices; one `BM × BN` block of `c` per program,
/// accumulated in f32 over `BK`-wide slices of `k` (f16 inputs too). As in Triton's
/// tutorial 03, `matmul::launch` times the blocks once per shape (and dtypes) and keeps the
/// fastest; `matmul::launch_explicit` takes them. 144-row blocks fit odd sizes: 1000 rows
/// are 7 of them (1,008 computed) against 11 of 96 (1,056), about 5% faster at 1000³.
/// 256-column blocks copy `a` half as often per flop; the CPU keeps `b`'s packed tiles
/// for all the programs of a column (codegen `panel_cache`), so their bigger `b` costs
/// little: 453 → 481 GFLOP/s at 4096³ against 96 × 128 (`bench_table matmul-blocks`).
#[kernel]
#[autotune(
    configs = [
        config(BM = 96, BN = 64, BK = 64),
        config(BM = 96, BN = 128, BK = 64),
        config(BM = 96, BN = 128, BK = 128),
        config(BM = 144, BN = 128, BK = 64),
        config(BM = 96, BN = 256, BK = 64),
        config(BM = 64, BN = 64, BK = 32),
        config(BM = 32, BN = 32, BK = 32),
    ],
    key = [m, n, k],
)]
pub fn matmul<T: Float, O: Float>(
    c: Ptr<O>,
    a: Ptr<T>,
    b: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
    stride_am: i32,
    stride_ak: i32,
    stride_bk: i32,
    stride_bn: i32,
    stride_cm: i32,
    stride_cn: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let sizes = (m, n, k);
    let strides = (
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    );
    let at = (program_id(0), program_id(1));
    matmul_block((c, a, b), sizes, strides, at, BM, BN, BK);
}

/// Block `(pid_m, pid_n)` of `c = a @ b` (`BM × BN`): tutorial 03's K loop over `BK`-wide
/// slices of `k`, accumulated in f32, and its masked store; [`matmul`] and
/// [`matmul_grouped`] differ only in which block a program takes.
#[device]
#[allow(clippy::type_complexity)]
pub(crate) fn matmul_block(
    (c, a, b): (Tile, Tile, Tile),
    (m, n, k): (Tile, Tile, Tile),
    (stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn): (
        Tile,
        Tile,
        Tile,
        Tile,
        Tile,
        Tile,
    ),
    (pid_m, pid_n): (Tile, Tile),
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let offs_m = pid_m * BM as i32 + arange(0, BM);
    let offs_n = pid_n * BN as i32 + arange(0, BN);
    let offs_k = arange(0, BK);
    let a_ptrs = a + offs_m[(.., None)] * stride_am + offs_k[(None, ..)] * stride_ak;
    let b_ptrs = b + offs_k[(.., None)] * stride_bk + offs_n[(None, ..)] * stride_bn;
    let mut acc = zeros([BM, BN], DType::F32);
    for kb in range(0, cdiv(k, BK as i32)) {
        let k0 = kb * BK as i32;
        let ta = load(
            a_ptrs + k0 * stride_ak,
            mask = (offs_m[(.., None)] < m) & (offs_k[(None, ..)] < k - k0),
            other = 0.0,
        );
        let tb = load(
            b_ptrs + k0 * stride_bk,
            mask = (offs_k[(.., None)] < k - k0) & (offs_n[(None, ..)] < n),
            other = 0.0,
        );
        acc = dot(ta, tb, acc);
    }
    let c_ptrs = c + offs_m[(.., None)] * stride_cm + offs_n[(None, ..)] * stride_cn;
    let c_mask = (offs_m[(.., None)] < m) & (offs_n[(None, ..)] < n);
    store(c_ptrs, acc, mask = c_mask);
}

/// Tutorial 03 as Triton writes it: [`matmul`] over a one-axis grid of
/// `cdiv(m, BM) · cdiv(n, BN)` programs that visit the output tiles in groups of `GROUP_M`
/// block rows (`GROUP_SIZE_M`), so that on a GPU the programs running at once share `a`
/// rows and `b` columns in L2. (The CPU prefers [`matmul`]'s two-axis grid: its workers
/// take whole lines of one `b` column, whose packed panels they keep.)
#[kernel]
pub fn matmul_grouped<T: Float, O: Float>(
    c: Ptr<O>,
    a: Ptr<T>,
    b: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
    stride_am: i32,
    stride_ak: i32,
    stride_bk: i32,
    stride_bn: i32,
    stride_cm: i32,
    stride_cn: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
    #[constexpr] GROUP_M: usize,
) {
    let blocks = (cdiv(m, BM as i32), cdiv(n, BN as i32));
    let (pid_m, pid_n) = grouped_block(program_id(0), blocks, GROUP_M);
    let sizes = (m, n, k);
    let strides = (
        stride_am, stride_ak, stride_bk, stride_bn, stride_cm, stride_cn,
    );
    matmul_block((c, a, b), sizes, strides, (pid_m, pid_n), BM, BN, BK);
}

/// The block row and column of output tile `tile` in tutorial 03's grouped order: tiles
/// run down `GROUP_M` block rows (fewer in the last group) of one block column, then the
/// next column, over a `num_pid_m × num_pid_n` grid of blocks.
#[device]
fn grouped_block(
    tile: Tile,
    (num_pid_m, num_pid_n): (Tile, Tile),
    #[constexpr] GROUP_M: usize,
) -> (Tile, Tile) {
    let num_pid_in_group = GROUP_M as i32 * num_pid_n;
    let first_pid_m = tile / num_pid_in_group * GROUP_M as i32;
    let group_size_m = minimum(num_pid_m - first_pid_m, GROUP_M as i32);
    let pid_m = first_pid_m + (tile % num_pid_in_group) % group_size_m;
    let pid_n = (tile % num_pid_in_group) / group_size_m;
    (pid_m, pid_n)
}

/// `a @ b` through [`matmul_grouped`] with the given blocks and `group_m` block rows per
/// group (tutorial 03 uses 8), output dtype `O`.
pub fn matmul_grouped_2d<T: Float, O: Float + Default>(
    device: &Device,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    blocks: MatmulBlocks,
    group_m: usize,
) -> tritium::Result<Array2<O>> {
    product(
        "matmul_grouped",
        a,
        b,
        |c, [m, n, k, sam, sak, sbk, sbn, scm, scn]| {
            let [tiles_m, tiles_n] = blocks.grid(m, n);
            matmul_grouped::launch_with(
                device,
                tiles_m * tiles_n,
                &LaunchOptions::default(),
                c,
                a,
                b,
                m,
                n,
                k,
                sam,
                sak,
                sbk,
                sbn,
                scm,
                scn,
                blocks.m,
                blocks.n,
                blocks.k,
                group_m.max(1),
            )
        },
    )
}

/// Block sizes of [`matmul_2d`].
#[derive(Debug, Clone, Copy)]
pub struct MatmulBlocks {
    /// Rows of `c` per program.
    pub m: usize,
    /// Columns of `c` per program.
    pub n: usize,
    /// Depth of one `dot`.
    pub k: usize,
}

impl MatmulBlocks {
    /// Blocks along `c`'s rows and columns for an `m × n` product (at least one each).
    fn grid(&self, m: i32, n: i32) -> [usize; 2] {
        [
            cdiv(m.max(1) as usize, self.m),
            cdiv(n.max(1) as usize, self.n),
        ]
    }
}

/// 96 × 128 blocks of `c` are 16 × 8 register blocks of the CPU `dot` (6 rows × 16 f32
/// columns with AVX2), with `b` packed in 16-column panels (24 KiB of `a`, 32 KiB of `b`
/// in L1/L2); a depth of 64 halves the accumulator loads and stores of a depth of 32.
/// Against 96 × 64 (the default before `b` was packed in panels) each program copies
/// `a`'s rows for twice the flops: 0.80–0.96 of OpenBLAS at 1024³ where 96 × 64 ran at
/// 0.76–0.84 (`bench_table -- matmul-blocks`, alternated).
impl Default for MatmulBlocks {
    fn default() -> Self {
        MatmulBlocks {
            m: 96,
            n: 128,
            k: 64,
        }
    }
}

/// Checks that `a @ b` is defined and runs `launch` with a new output and what the matmul
/// kernels take after it: `[m, n, k, a's strides, b's strides, c's strides]`.
fn product<T: Float, O: Float + Default>(
    kernel: &str,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    launch: impl FnOnce(ArrayViewMut2<O>, [i32; 9]) -> tritium::Result<()>,
) -> tritium::Result<Array2<O>> {
    let mut c = output(&a, &b);
    product_into(kernel, a, b, c.view_mut(), launch)?;
    Ok(c)
}

/// A new output for `a @ b` (`a`'s rows, `b`'s columns).
fn output<T, O: Float + Default>(a: &ArrayView2<T>, b: &ArrayView2<T>) -> Array2<O> {
    Array2::from_elem((a.nrows(), b.ncols()), O::default())
}

/// [`product`] into `c`, which must be `m × n` (any strides).
fn product_into<T: Float, O: Float>(
    kernel: &str,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    c: ArrayViewMut2<O>,
    launch: impl FnOnce(ArrayViewMut2<O>, [i32; 9]) -> tritium::Result<()>,
) -> tritium::Result<()> {
    let ((m, k), (k2, n)) = (a.dim(), b.dim());
    let error = |message: String| tritium::Error::Launch {
        kernel: kernel.into(),
        message,
    };
    if k != k2 {
        return Err(error(format!(
            "inner dimensions differ: a is {m}×{k}, b is {k2}×{n}"
        )));
    }
    if c.dim() != (m, n) {
        let (cm, cn) = c.dim();
        return Err(error(format!(
            "the output is {cm}×{cn}, a @ b is {m}×{n} (a is {m}×{k}, b is {k}×{n})"
        )));
    }
    let (sa, sb, sc) = (a.strides(), b.strides(), c.strides());
    let sizes = [m, n, k].map(|d| d as i32);
    let strides = [sa[0], sa[1], sb[0], sb[1], sc[0], sc[1]].map(|s| s as i32);
    let mut all = [0i32; 9];
    all[..3].copy_from_slice(&sizes);
    all[3..].copy_from_slice(&strides);
    launch(c, all)
}

/// `a @ b` through the [`matmul`] kernel, output dtype `O`.
pub fn matmul_2d<T: Float, O: Float + Default>(
    device: &Device,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    blocks: MatmulBlocks,
) -> tritium::Result<Array2<O>> {
    let mut c = output(&a, &b);
    matmul_2d_into(device, a, b, c.view_mut(), blocks)?;
    Ok(c)
}

/// [`matmul_2d`] into `c`, which must be `m × n` (any strides): the given blocks, no tuning.
pub fn matmul_2d_into<T: Float, O: Float>(
    device: &Device,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    c: ArrayViewMut2<O>,
    blocks: MatmulBlocks,
) -> tritium::Result<()> {
    product_into(
        "matmul",
        a,
        b,
        c,
        |c, [m, n, k, sam, sak, sbk, sbn, scm, scn]| {
            let grid = blocks.grid(m, n);
            let options = LaunchOptions::default();
            matmul::launch_explicit(
                device, grid, &options, c, a, b, m, n, k, sam, sak, sbk, sbn, scm, scn, blocks.m,
                blocks.n, blocks.k,
            )
        },
    )
}

/// Tutorial 03's K loop written as Triton writes it: the operand pointers carried through
/// the loop and advanced by `BK` columns of `a` and rows of `b` at every iteration
/// (`a_ptrs += BLOCK_SIZE_K * stride_ak`), which the code generators carry as one offset
/// (`dsl::ir::carry_pointer_offsets`); [`matmul`] computes them from the counter instead.
#[kernel]
pub fn matmul_carried<T: Float, O: Float>(
    c: Ptr<O>,
    a: Ptr<T>,
    b: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
    stride_am: i32,
    stride_ak: i32,
    stride_bk: i32,
    stride_bn: i32,
    stride_cm: i32,
    stride_cn: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let offs_m = program_id(0) * BM as i32 + arange(0, BM);
    let offs_n = program_id(1) * BN as i32 + arange(0, BN);
    let offs_k = arange(0, BK);
    let mut a_ptrs = a + offs_m[(.., None)] * stride_am + offs_k[(None, ..)] * stride_ak;
    let mut b_ptrs = b + offs_k[(.., None)] * stride_bk + offs_n[(None, ..)] * stride_bn;
    let mut acc = zeros([BM, BN], DType::F32);
    for kb in range(0, cdiv(k, BK as i32)) {
        let left = k - kb * BK as i32;
        let ta = load(
            a_ptrs,
            mask = (offs_m[(.., None)] < m) & (offs_k[(None, ..)] < left),
            other = 0.0,
        );
        let tb = load(
            b_ptrs,
            mask = (offs_k[(.., None)] < left) & (offs_n[(None, ..)] < n),
            other = 0.0,
        );
        acc = dot(ta, tb, acc);
        a_ptrs += BK as i32 * stride_ak;
        b_ptrs += BK as i32 * stride_bk;
    }
    let c_ptrs = c + offs_m[(.., None)] * stride_cm + offs_n[(None, ..)] * stride_cn;
    let c_mask = (offs_m[(.., None)] < m) & (offs_n[(None, ..)] < n);
    store(c_ptrs, acc, mask = c_mask);
}

/// [`matmul_2d_into`] through [`matmul_carried`].
pub fn matmul_carried_2d_into<T: Float, O: Float>(
    device: &Device,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    c: ArrayViewMut2<O>,
    blocks: MatmulBlocks,
) -> tritium::Result<()> {
    product_into(
        "matmul_carried",
        a,
        b,
        c,
        |c, [m, n, k, sam, sak, sbk, sbn, scm, scn]| {
            let grid = blocks.grid(m, n);
            matmul_carried::launch(
                device, grid, c, a, b, m, n, k, sam, sak, sbk, sbn, scm, scn, blocks.m, blocks.n,
                blocks.k,
            )
        },
    )
}

/// Triton tutorial 09: the persistent matmul. `NUM_PROGRAMS` programs (one per core or
/// SM) each loop over output tiles `pid, pid + NUM_PROGRAMS, …`, visiting them in groups
/// of `GROUP_M` block rows so that neighbouring tiles share `b` columns in cache.
#[kernel]
pub fn matmul_persistent<T: Float, O: Float>(
    c: Ptr<O>,
    a: Ptr<T>,
    b: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
    stride_am: i32,
    stride_ak: i32,
    stride_bk: i32,
    stride_bn: i32,
    stride_cm: i32,
    stride_cn: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
    #[constexpr] GROUP_M: usize,
    #[constexpr] NUM_PROGRAMS: usize,
) {
    let num_pid_m = cdiv(m, BM as i32);
    let num_pid_n = cdiv(n, BN as i32);
    let k_tiles = cdiv(k, BK as i32);
    let num_tiles = num_pid_m * num_pid_n;
    for tile_id in range(program_id(0), num_tiles, NUM_PROGRAMS as i32) {
        let (pid_m, pid_n) = grouped_block(tile_id, (num_pid_m, num_pid_n), GROUP_M);
        let offs_m = pid_m * BM as i32 + arange(0, BM);
        let offs_n = pid_n * BN as i32 + arange(0, BN);
        // Rows and columns past the end read row or column 0 (never stored).
        let am = max_contiguous(multiple_of(where_(offs_m < m, offs_m, 0), BM), BM);
        let bn = max_contiguous(multiple_of(where_(offs_n < n, offs_n, 0), BN), BN);
        let mut acc = zeros([BM, BN], DType::F32);
        for ki in range(0, k_tiles) {
            let offs_k = ki * BK as i32 + arange(0, BK);
            let a_ptrs = a + am[(.., None)] * stride_am + offs_k[(None, ..)] * stride_ak;
            let b_ptrs = b + offs_k[(.., None)] * stride_bk + bn[(None, ..)] * stride_bn;
            let ta = load(a_ptrs, mask = offs_k[(None, ..)] < k, other = 0.0);
            let tb = load(b_ptrs, mask = offs_k[(.., None)] < k, other = 0.0);
            acc = dot(ta, tb, acc);
        }
        let c_ptrs = c + offs_m[(.., None)] * stride_cm + offs_n[(None, ..)] * stride_cn;
        let c_mask = (offs_m[(.., None)] < m) & (offs_n[(None, ..)] < n);
        store(c_ptrs, acc, mask = c_mask);
    }
}

/// Tutorial 03's matmul through tensor descriptors (Triton's `make_tensor_descriptor`, as
/// tutorial 09's descriptor kernels move their operands): row-major `a` (`m × k`), `b`
/// (`k × n`) and `c`, blocks clipped to the matrices. On Hopper the operand blocks are
/// copied by TMA (`cp.async.bulk.tensor`, waited on through an `mbarrier`).
#[kernel]
pub fn matmul_descriptor<T: Float, O: Float>(
    c: Ptr<O>,
    a: Ptr<T>,
    b: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
    #[constexpr] GROUP_M: usize,
) {
    let a_desc = make_tensor_descriptor(a, (m, k), (k, 1), (BM, BK));
    let b_desc = make_tensor_descriptor(b, (k, n), (n, 1), (BK, BN));
    let c_desc = make_tensor_descriptor(c, (m, n), (n, 1), (BM, BN));
    let grid = (cdiv(m, BM as i32), cdiv(n, BN as i32));
    let (pid_m, pid_n) = grouped_block(program_id(0), grid, GROUP_M);
    let (om, on) = (pid_m * BM as i32, pid_n * BN as i32);
    let acc = descriptor_tile((a_desc, b_desc), (om, on), cdiv(k, BK as i32), BM, BN, BK);
    c_desc.store((om, on), acc);
}

/// The output tile at rows `om`, columns `on` of `a @ b` through descriptors of `a` and
/// `b`: `k_tiles` steps of `BK`.
#[device]
fn descriptor_tile(
    (a_desc, b_desc): (TensorDescriptor, TensorDescriptor),
    (om, on): (Tile, Tile),
    k_tiles: Tile,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) -> Tile {
    let mut acc = zeros([BM, BN], DType::F32);
    for ki in range(0, k_tiles) {
        let ok = ki * BK as i32;
        acc = dot(a_desc.load((om, ok)), b_desc.load((ok, on)), acc);
    }
    acc
}

/// Tutorial 09's persistent matmul through tensor descriptors (its
/// `matmul_kernel_descriptor_persistent`): `NUM_PROGRAMS` programs loop over the output
/// tiles as [`matmul_persistent`]'s, each tile's K loop through row-major descriptors of
/// `a` (`m × k`), `b` (`k × n`) and `c`, blocks clipped to the matrices. On Hopper every
/// tile's blocks are copied by TMA.
#[kernel]
pub fn matmul_descriptor_persistent<T: Float, O: Float>(
    c: Ptr<O>,
    a: Ptr<T>,
    b: Ptr<T>,
    m: i32,
    n: i32,
    k: i32,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
    #[constexpr] GROUP_M: usize,
    #[constexpr] NUM_PROGRAMS: usize,
) {
    let a_desc = make_tensor_descriptor(a, (m, k), (k, 1), (BM, BK));
    let b_desc = make_tensor_descriptor(b, (k, n), (n, 1), (BK, BN));
    let c_desc = make_tensor_descriptor(c, (m, n), (n, 1), (BM, BN));
    let grid = (cdiv(m, BM as i32), cdiv(n, BN as i32));
    let k_tiles = cdiv(k, BK as i32);
    // Triton's tutorial fuses the two loops (`flatten`, accepted here as a no-op).
    let tiles = grid.0 * grid.1;
    for tile_id in range(program_id(0), tiles, NUM_PROGRAMS as i32, flatten = true) {
        let (pid_m, pid_n) = grouped_block(tile_id, grid, GROUP_M);
        let (om, on) = (pid_m * BM as i32, pid_n * BN as i32);
        let acc = descriptor_tile((a_desc, b_desc), (om, on), k_tiles, BM, BN, BK);
        c_desc.store((om, on), acc);
    }
}

/// `a @ b` through [`matmul_persistent`] with `programs` programs (CPU worker threads or
/// GPU SMs; at most one per output tile are launched) and groups of 8 block rows.
pub fn matmul_persistent_2d<T: Float, O: Float + Default>(
    device: &Device,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    blocks: MatmulBlocks,
    programs: usize,
) -> tritium::Result<Array2<O>> {
    product(
        "matmul_persistent",
        a,
        b,
        |c, [m, n, k, sam, sak, sbk, sbn, scm, scn]| {
            let tiles = blocks.grid(m, n).iter().product();
            let programs = programs.clamp(1, tiles);
            matmul_persistent::launch(
                device, programs, c, a, b, m, n, k, sam, sak, sbk, sbn, scm, scn, blocks.m,
                blocks.n, blocks.k, 8, programs,
            )
        },
    )
}

/// `a @ b` through [`matmul`] with the blocks autotuned per shape and dtype (the kernel's
/// `#[autotune]`, keyed by `m`, `n` and `k` as in Triton's tutorial 03): the first product
/// of a new shape times each config, later ones use the fastest.
pub fn matmul_autotuned<T: Float, O: Float + Default>(
    device: &Device,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
) -> tritium::Result<Array2<O>> {
    let mut c = output(&a, &b);
    matmul_into(device, a, b, c.view_mut())?;
    Ok(c)
}

/// [`matmul_autotuned`] into an existing `m × n` output `c` (any strides; it may not
/// overlap `a` or `b`), as a Triton user passes a preallocated `c`: no allocation per
/// product. An output of another shape is an error naming both.
pub fn matmul_into<T: Float, O: Float>(
    device: &Device,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    c: ArrayViewMut2<O>,
) -> tritium::Result<()> {
    product_into(
        "matmul",
        a,
        b,
        c,
        |c, [m, n, k, sam, sak, sbk, sbn, scm, scn]| {
            let grid = |meta: &matmul::Meta| {
                [
                    cdiv(m.max(1) as usize, meta.BM),
                    cdiv(n.max(1) as usize, meta.BN),
                ]
            };
            matmul::launch(device, grid, c, a, b, m, n, k, sam, sak, sbk, sbn, scm, scn)
        },
    )
}
