use tritium::kernel;

#[kernel]
fn dynamic(out: Ptr<f32>, n: i32) {
    let offs = arange(0, n);
    store(out + offs, 1.0);
}

fn main() {}
