use tritium::prelude::*;

#[kernel]
fn python_max(out: Ptr<f32>, x: Ptr<f32>, y: Ptr<f32>) {
    let offs = arange(0, 16);
    let m = max(load(x + offs), load(y + offs));
    store(out + offs, m);
}

fn main() {}
