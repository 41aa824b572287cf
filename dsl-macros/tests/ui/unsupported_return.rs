use tritium::kernel;

#[kernel]
fn in_a_loop(out: Ptr<i32>, n: i32) {
    for i in range(0, n) {
        if i > 2 {
            return;
        }
        store(out + i, i);
    }
}

#[kernel]
fn in_an_expression(out: Ptr<i32>, n: i32) {
    let v = if n < 0 { return; } else { n };
    store(out, v);
}

#[kernel]
fn shadowing(out: Ptr<i32>, n: i32) {
    let v = n;
    if n > 4 {
        let v = n * 2;
        if n > 8 {
            return;
        }
        store(out + 1, v);
    }
    store(out, v);
}

fn main() {}
