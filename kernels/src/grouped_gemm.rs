//! Triton tutorial 08: grouped GEMM. One launch computes `c[g] = a[g] @ b[g]` for a group
//! of independent problems of different shapes: the kernel reads each problem's matrices
//! from tables of pointers (`PtrTable`, Triton's `torch.tensor([a.data_ptr(), …])`) and
//! its sizes and leading dimensions from arrays, and a fixed number of programs walks the
//! output tiles of every problem in turn.

use crate::matmul::MatmulBlocks;
use ndarray::{Array2, ArrayView2, CowArray, Ix2};
use tritium::prelude::*;

/// Tutorial 08's kernel. Problem `g` multiplies the `m × k` matrix at `group_a_ptrs[g]` by
/// the `k × n` matrix at `group_b_ptrs[g]` into the `m × n` matrix at `group_c_ptrs[g]`
/// (`[m, n, k]` at `group_gemm_sizes[3g..]`, row strides `[lda, ldb, ldc]` at
/// `g_lds[3g..]`, unit column strides). Program `p` takes tiles `p, p + NUM_PROGRAMS, …`
/// of the problems' tiles numbered one problem after another. Unlike the tutorial, ragged
/// edges are masked: sizes need not be multiples of the blocks.
#[kernel]
pub fn grouped_matmul<T: Float>(
    group_a_ptrs: Ptr<i64>,
    group_b_ptrs: Ptr<i64>,
    group_c_ptrs: Ptr<i64>,
    group_gemm_sizes: Ptr<i32>,
    g_lds: Ptr<i32>,
    group_size: i32,
    #[constexpr] NUM_PROGRAMS: usize,
    #[constexpr] BM: usize,
    #[constexpr] BN: usize,
    #[constexpr] BK: usize,
) {
    let mut tile_idx = program_id(0);
    let mut last_problem_end = 0;
    for g in range(0, group_size) {
        let gm = load(group_gemm_sizes + g * 3);
        let gn = load(group_gemm_sizes + g * 3 + 1);
        let gk = load(group_gemm_sizes + g * 3 + 2);
        let num_n_tiles = cdiv(gn, BN as i32);
        let num_tiles = cdiv(gm, BM as i32) * num_n_tiles;
        while tile_idx >= last_problem_end && tile_idx < last_problem_end + num_tiles {
            let lda = load(g_lds + g * 3);
            let ldb = load(g_lds + g * 3 + 1);
            let ldc = load(g_lds + g * 3 + 2);
            let a_ptr = load(group_a_ptrs + g).to(pointer_type(T::DTYPE));
            let b_ptr = load(group_b_ptrs + g).to(pointer_type(T::DTYPE));
            let c_ptr = load(group_c_ptrs + g).to(pointer_type(T::DTYPE));
            let tile_in_gemm = tile_idx - last_problem_end;
            let offs_m = (tile_in_gemm / num_n_tiles) * BM as i32 + arange(0, BM);
            let offs_n = (tile_in_gemm % num_n_tiles) * BN as i32 + arange(0, BN);
            let offs_k = arange(0, BK);
            let mut acc = zeros([BM, BN], DType::F32);
            for kb in range(0, cdiv(gk, BK as i32)) {
                let k0 = kb * BK as i32;
                let a_ptrs = a_ptr + offs_m[(.., None)] * lda + (k0 + offs_k)[(None, ..)];
                let b_ptrs = b_ptr + (k0 + offs_k)[(.., None)] * ldb + offs_n[(None, ..)];
                let ta = load(
                    a_ptrs,
                    mask = (offs_m[(.., None)] < gm) & (offs_k[(None, ..)] < gk - k0),
                    other = 0.0,
                );
                let tb = load(
                    b_ptrs,
                    mask = (offs_k[(.., None)] < gk - k0) & (offs_n[(None, ..)] < gn),
                    other = 0.0,
                );
                acc = dot(ta, tb, acc);
            }
            let c_ptrs = c_ptr + offs_m[(.., None)] * ldc + offs_n[(None, ..)];
            let c_mask = (offs_m[(.., None)] < gm) & (offs_n[(None, ..)] < gn);
            store(c_ptrs, acc, mask = c_mask);
            tile_idx = tile_idx + NUM_PROGRAMS as i32;
        }
        last_problem_end = last_problem_end + num_tiles;
    }
}

/// `x` itself when the kernel can address element (i, j) as `row_stride * i + j`, else a
/// row-major copy.
fn row_major<'v, T: Float>(x: &ArrayView2<'v, T>) -> CowArray<'v, T, Ix2> {
    let ((rows, cols), s) = (x.dim(), x.strides());
    let unit_columns = cols <= 1 || s[1] == 1;
    let separate_rows = rows <= 1 || s[0] >= cols as isize;
    if unit_columns && separate_rows {
        CowArray::from(*x)
    } else {
        CowArray::from(x.as_standard_layout().into_owned())
    }
}

/// `[a[g] @ b[g] for g]` through [`grouped_matmul`] in one launch of `programs` programs
/// (CPU worker threads or GPU SMs; at most one per output tile). Inputs that are not
/// row-major with unit column strides are copied to that layout first.
pub fn grouped_matmul_2d<T: Float + Default>(
    device: &Device,
    problems: &[(ArrayView2<'_, T>, ArrayView2<'_, T>)],
    blocks: MatmulBlocks,
    programs: usize,
) -> tritium::Result<Vec<Array2<T>>> {
    let options = LaunchOptions::default();
    grouped_matmul_2d_with(device, &options, problems, blocks, programs)
}

/// [`grouped_matmul_2d`] with launch options (checked mode, the interpreter…).
pub fn grouped_matmul_2d_with<T: Float + Default>(
    device: &Device,
    options: &LaunchOptions,
    problems: &[(ArrayView2<'_, T>, ArrayView2<'_, T>)],
    blocks: MatmulBlocks,
    programs: usize,
) -> tritium::Result<Vec<Array2<T>>> {
    let err = |message: String| tritium::Error::Launch {
        kernel: "grouped_matmul".into(),
        message,
    };
    let row_stride = |x: &CowArray<'_, T, Ix2>| match x.nrows() {
        0 | 1 => i32::try_from(x.ncols().max(1)).ok(),
        _ => i32::try_from(x.strides()[0]).ok(),
    };
    let mut sizes = Vec::with_capacity(3 * problems.len());
    let mut lds = Vec::with_capacity(3 * problems.len());
    let (mut a_rows, mut b_rows) = (Vec::new(), Vec::new());
    let mut cs = Vec::with_capacity(problems.len());
    let mut tiles = 0;
    for (g, (a, b)) in problems.iter().enumerate() {
        let ((m, k), (k2, n)) = (a.dim(), b.dim());
        if k != k2 {
            return Err(err(format!(
                "problem {g}: inner dimensions differ: a is {m}×{k}, b is {k2}×{n}"
            )));
        }
        let (a, b) = (row_major(a), row_major(b));
        let c = Array2::from_elem((m, n), T::default());
        let c = CowArray::from(c);
        let (Some(lda), Some(ldb), Some(ldc)) = (row_stride(&a), row_stride(&b), row_stride(&c))
        else {
            return Err(err(format!("problem {g}: a row stride exceeds i32")));
        };
        for d in [m, n, k] {
            sizes.push(i32::try_from(d).map_err(|_| err(format!("problem {g}: {d} exceeds i32")))?);
        }
        lds.extend([lda, ldb, ldc]);
        tiles += m.div_ceil(blocks.m) * n.div_ceil(blocks.n);
        a_rows.push(a);
        b_rows.push(b);
        cs.push(c.into_owned());
    }
    if tiles == 0 {
        return Ok(cs);
    }
    let programs = programs.clamp(1, tiles);
    let a_table = PtrTable::of(a_rows.iter().map(|a| a.view()));
    let b_table = PtrTable::of(b_rows.iter().map(|b| b.view()));
    let c_table = PtrTable::of(cs.iter_mut());
    grouped_matmul::launch_with::<T>(
        device,
        programs,
        options,
        &a_table,
        &b_table,
        &c_table,
        &sizes[..],
        &lds[..],
        problems.len() as i32,
        programs,
        blocks.m,
        blocks.n,
        blocks.k,
    )?;
    drop(c_table);
    Ok(cs)
}
