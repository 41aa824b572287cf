use tritium::kernel;

#[kernel]
fn with_closure(out: Ptr<f32>, #[constexpr] BLOCK: usize) {
    let twice = |x| x * 2.0;
    store(out + arange(0, BLOCK), twice(1.0));
}

fn main() {}
