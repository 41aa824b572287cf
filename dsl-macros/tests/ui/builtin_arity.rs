use tritium::kernel;

#[kernel]
fn too_many(out: Ptr<f32>, x: Ptr<f32>, #[constexpr] BLOCK: usize) {
    let offs = arange(0, BLOCK);
    let v = maximum(load(x + offs, offs < 4, 0.0), 1.0, true, 2.0);
    store(out + offs, exp(v, v));
}

fn main() {}
