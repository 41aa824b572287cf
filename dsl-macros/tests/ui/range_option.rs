use tritium::kernel;

#[kernel]
fn typo(out: Ptr<f32>, n: i32) {
    let mut acc = zeros([4], DType::F32);
    for i in range(0, n, 1, num_stagez = 3) {
        acc = acc + i;
    }
    store(out + arange(0, 4), acc);
}

fn main() {}
