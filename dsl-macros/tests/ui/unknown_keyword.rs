use tritium::kernel;

#[kernel]
fn typo(out: Ptr<f32>, x: Ptr<f32>, n: i32, #[constexpr] BLOCK: usize) {
    let offs = arange(0, BLOCK);
    let v = load(x + offs, maks = offs < n, other = 0.0);
    store(out + offs, v, mask = offs < n);
}

fn main() {}
