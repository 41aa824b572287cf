use tritium::kernel;

#[kernel]
fn breaks(out: Ptr<i32>, n: i32) {
    let mut acc = 0;
    for i in 0..n {
        if i > 3 {
            break;
        }
        acc = acc + i;
    }
    while acc > 0 {
        continue;
    }
    store(out, acc);
}

fn main() {}
