use tritium::prelude::*;

#[kernel]
fn plain_on_one_path(out: Ptr<i32>, #[constexpr] WIDE: bool) {
    let block;
    if WIDE {
        block = 128;
    }
    store(out, block);
}

fn main() {}
