//! Triton tutorial 03: blocked matrix multiplication with f32 accumulation.

use ndarray::{Array2, ArrayView2};
use tritium::prelude::*;

/// `c = a @ b` for row-major strided matrices; one `BM × BN` block of `c` per program,
/// accumulated in f32 over `BK`-wide slices of `k` (f16 inputs too).
#[kernel]
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
    let offs_m = program_id(0) * BM as i32 + arange(0, BM);
    let offs_n = program_id(1) * BN as i32 + arange(0, BN);
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

/// 96 × 64 blocks of `c` are 16 × 4 register blocks of the CPU `dot` (6 rows × 16 f32
/// columns with AVX2); a depth of 64 keeps the packed `a` and `b` tiles (40 KiB) in L1/L2
/// while halving the accumulator loads and stores of a depth of 32.
impl Default for MatmulBlocks {
    fn default() -> Self {
        MatmulBlocks {
            m: 96,
            n: 64,
            k: 64,
        }
    }
}

/// `a @ b` through the [`matmul`] kernel, output dtype `O`.
pub fn matmul_2d<T: Float, O: Float + Default>(
    device: &Device,
    a: ArrayView2<T>,
    b: ArrayView2<T>,
    blocks: MatmulBlocks,
) -> tritium::Result<Array2<O>> {
    let ((m, k), (k2, n)) = (a.dim(), b.dim());
    if k != k2 {
        return Err(tritium::Error::Launch {
            kernel: "matmul".into(),
            message: format!("inner dimensions differ: a is {m}×{k}, b is {k2}×{n}"),
        });
    }
    let mut c = Array2::from_elem((m, n), O::default());
    let (sa, sb) = (a.strides().to_vec(), b.strides().to_vec());
    let sc = c.strides().to_vec();
    let grid = [cdiv(m.max(1), blocks.m), cdiv(n.max(1), blocks.n)];
    matmul::launch(
        device,
        grid,
        &mut c,
        a,
        b,
        m as i32,
        n as i32,
        k as i32,
        sa[0] as i32,
        sa[1] as i32,
        sb[0] as i32,
        sb[1] as i32,
        sc[0] as i32,
        sc[1] as i32,
        blocks.m,
        blocks.n,
        blocks.k,
    )?;
    Ok(c)
}
