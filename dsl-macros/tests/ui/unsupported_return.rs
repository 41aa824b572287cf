use tritium::kernel;

#[kernel]
fn early(out: Ptr<i32>, n: i32) {
    if n < 0 {
        return;
    }
    store(out, n);
}

fn main() {}
