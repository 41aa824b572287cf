use tritium::prelude::*;

#[register_custom_op(core = Vectr, pipe = PipeV, mode = Simd)]
struct BadCore;

#[register_custom_op(core = Vector, mode = Simd)]
struct NoPipe;

#[register_custom_op(core = Vector, pipe = PipeV, name = "__builtin_mine")]
struct Reserved;

#[register_custom_op(core = Vector, pipe = PipeV)]
struct WrongInit;
impl WrongInit {
    fn init(_x: i32) -> Result<CustomImpl, String> {
        Err("no".into())
    }
}

fn main() {}
