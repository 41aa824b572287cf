use tritium::kernel;

#[kernel]
fn prints(x: Ptr<f32>) {
    let v = load(x + arange(0, 4));
    device_print("v", v, hexa = true);
    device_print("v", hex = true, v);
    device_print();
}

fn main() {}
