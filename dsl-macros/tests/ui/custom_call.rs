use tritium::prelude::*;

#[kernel]
fn no_out(o: Ptr<f32>) {
    let x = zeros([4], DType::F32);
    let r = custom("add", x, x);
    store(o + arange(0, 4), r);
}

#[kernel]
fn bad_keyword(o: Ptr<f32>) {
    let x = zeros([4], DType::F32);
    let r = custom("add", x, x, out = x, outs = x);
    store(o + arange(0, 4), r);
}

fn main() {}
