//! Tracing: kernel code runs once per specialization and records IR.

mod block_ptr;
pub(crate) mod builder;
mod combine;
mod element;
mod erf;
pub mod flow;
mod hints;
pub mod lang;
mod libm;
mod libm_f32;
mod math;
mod panic;
mod params;
mod random;
mod scaled;
mod shape;
mod sort;
mod tile;
pub mod weak;

pub use builder::Tracer;
pub use element::{Element, Float, Int, Ptr, F8E4B15, F8E4M3, F8E5M2};
pub use panic::catch_panic;
pub use params::{ptr_param, ptr_param_at, scalar_param, Specialization};
pub use tile::{IntoOperand, Operand, Tile};
