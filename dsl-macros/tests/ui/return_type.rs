use tritium::kernel;

#[kernel]
fn returns(out: Ptr<f32>) -> f32 {
    store(out, 1.0);
    1.0
}

fn main() {}
