use tritium::kernel;

#[kernel]
fn opt(out: Ptr<i32>, #[constexpr] V: Option<i32>) {
    if let Some(v) = V {
        store(out, v);
    }
}

fn main() {}
