//! The emulator's `wgmma` (see `codegen/wgmma.rs`): one thread's asynchronous
//! warpgroup products, as the hardware runs them.
//!
//! At issue a `wgmma.mma_async` is recorded (with its `a` registers, which the warp's
//! lanes exchange then) and the thread's accumulator registers are poisoned; a later
//! `wgmma` on the same accumulators (before any wait) chains onto the recorded value, as
//! the hardware's in-flight accumulators do. `wait_group n` completes every group but
//! the newest `n`: each product is computed then, reading shared memory as it is at the
//! wait (so a tile overwritten before the wait gives what the GPU may give), through the
//! descriptors decoded as the hardware decodes them (`codegen::descriptor_element`).
//! Registers handed to a `wgmma` whose accumulators are in flight must still be the
//! poison: anything else means the generated code touched them before the wait (the
//! accumulators' values would be lost on the GPU), which the emulator reports.

use super::codegen::descriptor_element;
use std::collections::HashMap;

/// The bits the emulator writes into accumulator registers in flight: a NaN.
pub(crate) const POISON: u32 = 0x7fc0_dead;

/// One recorded `wgmma.mma_async`.
struct Op {
    /// The commit group it belongs to.
    group: u64,
    /// The accumulator registers' number (`codegen::wgmma`).
    id: u32,
    /// Bit 0 bf16, bit 1 `b` MN-major, bit 2 `a` in registers, bit 3 scale-d 0 (the
    /// registers ignored), bits 4–5 and 6–7 `a`'s and `b`'s fp8 format (1 E4M3, 2 E5M2;
    /// 0: 16-bit), bits 8.. `n / 8`.
    code: u32,
    /// The CTA's shared memory.
    shared: usize,
    desc_a: u64,
    desc_b: u64,
    /// With `a` in registers: this thread's two rows of `a` (16 values each, 32 of fp8).
    a_rows: [[f32; 32]; 2],
}

/// One emulated thread's `wgmma`s in flight.
#[derive(Default)]
pub(crate) struct WgmmaQueue {
    committed: u64,
    pending: Vec<Op>,
    /// Each accumulator's value after its completed `wgmma`s.
    current: HashMap<u32, Vec<f32>>,
    /// Registers of an accumulator in flight that the code changed (a code generator bug).
    pub misused: bool,
}

/// What a thread gives a `wgmma`: see [`Op`].
pub(crate) struct Issue<'a> {
    pub id: u32,
    pub code: u32,
    pub shared: usize,
    pub desc_a: u64,
    pub desc_b: u64,
    /// `a` in registers: the 4 words of each lane of this thread's quad-row group (the
    /// lanes holding its rows), by lane in the group.
    pub a_words: [[u32; 4]; 4],
    pub acc: &'a mut [f32],
}

impl WgmmaQueue {
    /// `wgmma.mma_async`: records it and poisons the registers.
    pub(crate) fn issue(&mut self, x: Issue<'_>) {
        if x.code & 8 != 0 {
            // Scale-d 0: `D = A · B`, the registers' values ignored.
            self.misused |= self.pending.iter().any(|o| o.id == x.id);
            self.current.insert(x.id, vec![0.0; x.acc.len()]);
        } else if self.pending.iter().any(|o| o.id == x.id) {
            self.misused |= x.acc.iter().any(|v| v.to_bits() != POISON);
        } else {
            self.current.insert(x.id, x.acc.to_vec());
        }
        // Lane 4g + q holds of rows g and g + 8: words 0 / 1 k = 2q.., words 2 / 3 k =
        // 2q + 8.. (the `m16n8k16` A fragment); of fp8, 4 bytes each: k = 4q.. and 4q + 16..
        let format = Format::of(x.code & 1 != 0, (x.code >> 4) & 3);
        let (per_word, bits) = match format {
            Format::Fp8(_) => (4, 8),
            _ => (2, 16),
        };
        let value = |word: u32| match format {
            Format::BF16 => half::bf16::from_bits(word as u16).to_f32(),
            Format::F16 => half::f16::from_bits(word as u16).to_f32(),
            Format::Fp8(f) => f.decode(word as u8) as f32,
        };
        let mut a_rows = [[0f32; 32]; 2];
        for (q, words) in x.a_words.iter().enumerate() {
            for (w, word) in words.iter().enumerate() {
                for h in 0..per_word {
                    let k = per_word * q + h + 4 * per_word * (w / 2);
                    a_rows[w % 2][k] = value(word >> (bits * h));
                }
            }
        }
        self.pending.push(Op {
            group: self.committed,
            id: x.id,
            code: x.code,
            shared: x.shared,
            desc_a: x.desc_a,
            desc_b: x.desc_b,
            a_rows,
        });
        x.acc.fill(f32::from_bits(POISON));
    }

    /// `wgmma.commit_group`.
    pub(crate) fn commit(&mut self) {
        self.committed += 1;
    }

    /// `wgmma.wait_group pending` for thread `tid`, then accumulator `id`'s registers:
    /// its value, or the poison while a `wgmma` on it is still in flight. False where a
    /// descriptor has no swizzle mode (a code generator bug).
    pub(crate) fn wait(&mut self, tid: usize, pending: u32, id: u32, acc: &mut [f32]) -> bool {
        let done_below = self.committed.saturating_sub(u64::from(pending));
        let (done, left): (Vec<Op>, Vec<Op>) = std::mem::take(&mut self.pending)
            .into_iter()
            .partition(|o| o.group < done_below);
        self.pending = left;
        let mut ok = true;
        for op in done {
            let c = self.current.entry(op.id).or_default();
            ok &= complete(&op, tid, c);
        }
        match self.pending.iter().any(|o| o.id == id) {
            true => acc.fill(f32::from_bits(POISON)),
            // The registers hold the value now (the next `wgmma` starts from them): a
            // later wait with nothing in flight (a loop that ran no iteration) leaves them.
            false => {
                if let Some(c) = self.current.remove(&id) {
                    acc.copy_from_slice(&c[..acc.len()]);
                }
            }
        }
        ok
    }
}

/// An operand's element format in an [`Op`]'s code (`fp8`: its 2-bit field).
#[derive(Clone, Copy)]
enum Format {
    F16,
    BF16,
    Fp8(tritium_dsl::ir::fp8::Fp8Format),
}

impl Format {
    fn of(bf16: bool, fp8: u32) -> Format {
        match (fp8, bf16) {
            (1, _) => Format::Fp8(tritium_dsl::ir::fp8::E4M3),
            (2, _) => Format::Fp8(tritium_dsl::ir::fp8::E5M2),
            (_, true) => Format::BF16,
            (_, false) => Format::F16,
        }
    }

    fn bytes(self) -> usize {
        match self {
            Format::Fp8(_) => 1,
            _ => 2,
        }
    }

    /// The element at byte `addr` of memory.
    ///
    /// SAFETY: `addr` is readable for [`Self::bytes`] bytes, 2-byte aligned for 16 bits.
    unsafe fn read(self, addr: usize) -> f32 {
        match self {
            Format::F16 => half::f16::from_bits((addr as *const u16).read()).to_f32(),
            Format::BF16 => half::bf16::from_bits((addr as *const u16).read()).to_f32(),
            Format::Fp8(f) => f.decode((addr as *const u8).read()) as f32,
        }
    }
}

/// Adds `op`'s product to this thread's accumulator registers `c`: register `4j + e` is
/// row `16 q + lane / 4 + 8 (e / 2)`, column `8 j + 2 (lane % 4) + e % 2` of the `64 × n`
/// result (`q` the warp in its warpgroup), with f32 products summed in k order (16 k, or
/// 32 for fp8).
fn complete(op: &Op, tid: usize, c: &mut [f32]) -> bool {
    let n = (op.code >> 8) as usize * 8;
    let (bf16, mn_major_b, a_regs) = (op.code & 1 != 0, op.code & 2 != 0, op.code & 4 != 0);
    let (fa, fb) = (
        Format::of(bf16, (op.code >> 4) & 3),
        Format::of(bf16, (op.code >> 6) & 3),
    );
    let ks = 32 / fa.bytes();
    // SAFETY: the descriptors address this CTA's reserved shared memory (generated code),
    // at elements of the operand's format.
    let value = |f: Format, addr: usize| unsafe { f.read(op.shared + addr) };
    let (q, lane) = ((tid / 32) % 4, tid % 32);
    let mut ok = true;
    for (r, acc) in c.iter_mut().enumerate().take(n / 2) {
        let (j, e) = (r / 4, r % 4);
        let row = 16 * q + lane / 4 + 8 * (e / 2);
        let col = 8 * j + 2 * (lane % 4) + e % 2;
        // From -0, the sum's identity: a sum of -0 products stays -0, as the interpreter's
        // accumulator plus each product in turn gives (and `mma.sync`'s `Sum`).
        let mut sum = -0f32;
        for k in 0..ks {
            let a = match a_regs {
                true => op.a_rows[e / 2][k],
                false => match descriptor_element(op.desc_a, row, k, true, fa.bytes()) {
                    Some(at) => value(fa, at),
                    None => {
                        ok = false;
                        0.0
                    }
                },
            };
            let b = match descriptor_element(op.desc_b, col, k, !mn_major_b, fb.bytes()) {
                Some(at) => value(fb, at),
                None => {
                    ok = false;
                    0.0
                }
            };
            sum += a * b;
        }
        *acc += sum;
    }
    ok
}
