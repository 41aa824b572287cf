//! The elements of a strided view: an access inside a view's span must also land on one of
//! its elements (a stride-2 view's odd elements, the gaps between a column block's rows,
//! belong to someone else). Checked code tests it per access, a launch's bounds proof
//! ([`super::ViewElements`]) for every lane at once; both read this one description.
//!
//! A view is described from its lowest element: element `(i0, i1, …)` sits at `Σ i_k · S_k`
//! bytes from it with every `S_k > 0` (a reversed axis counts from its far end), axes sorted
//! by decreasing `S_k`, broadcast axes (stride 0) and axes of one element dropped. When each
//! `S_k` exceeds the reach of the axes after it, an offset has at most one decomposition and
//! the greedy one finds it: that is what [`ViewLayout::contains`], the generated code
//! (`llvm::Emit::in_view`) and the proof (`bounds/eval.rs::on_elements`) compute.

/// The most axes a view's layout keeps (views with more are checked by span only).
pub const MAX_VIEW_AXES: usize = 8;

/// A non-dense, decodable view's axes (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ViewLayout {
    rank: usize,
    /// Elements per axis.
    dims: [u64; MAX_VIEW_AXES],
    /// Bytes per step along each axis, decreasing.
    steps: [u64; MAX_VIEW_AXES],
}

impl ViewLayout {
    /// The layout of a view of `shape` and `strides` (in elements) with `size`-byte
    /// elements, or `None` when every byte of its span is an element (a dense view, where the
    /// span check says it all) or when its axes overlap (checked by span only).
    pub fn of(shape: &[usize], strides: &[isize], size: usize) -> Option<ViewLayout> {
        if shape.contains(&0) {
            return None;
        }
        let mut axes: Vec<(u64, u64)> = (shape.iter().zip(strides))
            .filter(|(&d, &s)| d > 1 && s != 0)
            .map(|(&d, &s)| (d as u64, s.unsigned_abs() as u64 * size as u64))
            .collect();
        if axes.len() > MAX_VIEW_AXES {
            return None;
        }
        axes.sort_by_key(|a| std::cmp::Reverse(a.1));
        // Dense: the innermost step is one element and each outer step spans the inner axes.
        let mut reach = size as u64;
        let dense = axes.iter().rev().all(|&(d, step)| {
            let ok = step == reach;
            reach = reach.saturating_mul(d);
            ok
        });
        if dense {
            return None;
        }
        // Decodable: each step exceeds the farthest offset the inner axes reach.
        let mut inner = 0u64;
        for &(d, step) in axes.iter().rev() {
            if step <= inner {
                return None;
            }
            inner = inner.saturating_add((d - 1).saturating_mul(step));
        }
        let mut layout = ViewLayout {
            rank: axes.len(),
            dims: [0; MAX_VIEW_AXES],
            steps: [0; MAX_VIEW_AXES],
        };
        for (k, (d, step)) in axes.into_iter().enumerate() {
            layout.dims[k] = d;
            layout.steps[k] = step;
        }
        Some(layout)
    }

    /// The axes, outermost first: `(elements, bytes per step)`.
    pub fn axes(&self) -> impl ExactSizeIterator<Item = (u64, u64)> + Clone + '_ {
        (0..self.rank).map(|k| (self.dims[k], self.steps[k]))
    }

    /// True when byte `addr` is the start of an element of the view whose lowest element is
    /// at `lo`.
    pub fn contains(&self, lo: usize, addr: usize) -> bool {
        let Some(mut off) = (addr as u64).checked_sub(lo as u64) else {
            return false;
        };
        for (dim, step) in self.axes() {
            let q = off / step;
            if q >= dim {
                return false;
            }
            off -= q * step;
        }
        off == 0
    }

    /// Every element's byte offset from the lowest element (used to save, zero and restore a
    /// view's elements without touching the bytes between them).
    pub fn element_offsets(&self) -> impl Iterator<Item = u64> + '_ {
        let count: u64 = self.dims[..self.rank].iter().product();
        (0..count).map(move |mut i| {
            let mut offset = 0;
            for k in (0..self.rank).rev() {
                offset += (i % self.dims[k]) * self.steps[k];
                i /= self.dims[k];
            }
            offset
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every element of a view is in it and nothing else of its span is; `element_offsets`
    /// lists exactly its elements.
    #[test]
    fn elements_and_only_elements() {
        let cases: [(&[usize], &[isize]); 5] = [
            (&[5], &[2]),       // every other element
            (&[3, 2], &[4, 1]), // a column block of a 3×4 matrix
            (&[3, 2], &[1, 4]), // a transposed block of a wider matrix
            (&[4], &[-3]),      // reversed, strided
            (&[2, 3], &[0, 2]), // broadcast rows of a strided row
        ];
        for (shape, strides) in cases {
            let size = 4usize;
            let layout = ViewLayout::of(shape, strides, size).expect("not dense");
            let offsets: Vec<isize> = (0..shape.iter().product::<usize>())
                .map(|mut i| {
                    let mut off = 0;
                    for (&d, &s) in shape.iter().zip(strides).rev() {
                        off += (i % d) as isize * s;
                        i /= d;
                    }
                    off
                })
                .collect();
            let min = *offsets.iter().min().unwrap();
            let max = *offsets.iter().max().unwrap();
            let lo = 4096usize;
            let mut listed: Vec<u64> = layout.element_offsets().collect();
            listed.sort_unstable();
            let mut want: Vec<u64> = offsets
                .iter()
                .map(|&e| ((e - min) as usize * size) as u64)
                .collect();
            want.sort_unstable();
            want.dedup();
            assert_eq!(listed, want, "{shape:?} {strides:?}");
            for e in min..=max {
                let addr = lo + ((e - min) as usize) * size;
                let want = offsets.contains(&e);
                assert_eq!(
                    layout.contains(lo, addr),
                    want,
                    "{shape:?} {strides:?} element {e}"
                );
                assert!(
                    !layout.contains(lo, addr + 1),
                    "{shape:?} {strides:?}: misaligned"
                );
            }
        }
    }

    #[test]
    fn dense_and_overlapping_views_have_no_layout() {
        assert_eq!(ViewLayout::of(&[3, 4], &[4, 1], 4), None);
        assert_eq!(ViewLayout::of(&[3, 4], &[1, 3], 4), None);
        assert_eq!(ViewLayout::of(&[4], &[-1], 4), None);
        assert_eq!(ViewLayout::of(&[1, 7], &[100, 1], 4), None);
        // Sliding windows: rows of 3 starting one element apart.
        assert_eq!(ViewLayout::of(&[4, 3], &[1, 1], 4), None);
    }
}
