use tritium::prelude::*;

#[kernel]
#[autotune(configs = [config(BLOCK = 64)], key = [n], warmup = 5)]
fn unknown_argument(x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {}

#[kernel]
#[autotune(configs = [config(n = 64)], key = [])]
fn tunes_a_runtime_scalar(x: Ptr<f32>, n: i32) {}

#[kernel]
#[autotune(configs = [config(A = 1, B = 2), config(A = 2)], key = [])]
fn configs_disagree(x: Ptr<f32>, #[constexpr] A: usize, #[constexpr] B: usize) {}

#[kernel]
#[autotune(configs = [config(BLOCK = 64)], key = [x])]
fn key_is_a_pointer(x: Ptr<f32>, #[constexpr] BLOCK: usize) {}

#[kernel]
#[autotune(configs = [config(BLOCK = 64)], key = [BLOCK])]
fn key_is_tuned(x: Ptr<f32>, #[constexpr] BLOCK: usize) {}

#[kernel]
#[autotune(configs = [config(BLOCK = 64)], key = [], reset_to_zero = [n])]
fn resets_a_scalar(x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {}

#[kernel]
#[heuristics(EVEN = x > 0)]
fn heuristic_reads_a_pointer(x: Ptr<f32>, #[constexpr] EVEN: bool) {}

#[kernel]
#[autotune(configs = [config(BLOCK = 64)])]
fn no_key(x: Ptr<f32>, #[constexpr] BLOCK: usize) {}

#[kernel]
#[autotune(configs = [config(BLOCK = b) for b in [64, 128] while b < 100], key = [])]
fn comprehension_with_while(x: Ptr<f32>, #[constexpr] BLOCK: usize) {}

#[kernel]
#[autotune(configs = [config(BLOCK = 64)], configs = [config(BLOCK = 32)], key = [])]
fn configs_twice(x: Ptr<f32>, #[constexpr] BLOCK: usize) {}

#[autotune(configs = [config(BLOCK = 64)], key = [])]
fn not_a_kernel() {}

fn main() {}
