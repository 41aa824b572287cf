use tritium::device;

#[device]
fn helper(x: i32) -> i32 {
    let y = x?;
    return y;
}

fn main() {}
