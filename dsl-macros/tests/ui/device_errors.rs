use tritium::device;

#[device]
fn helper(x: i32) -> i32 {
    let y = x?;
    return y;
}

#[device]
fn rand(seed: i32, offset: i32) -> i32 {
    seed + offset
}

fn main() {}
