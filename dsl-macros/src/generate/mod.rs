//! Code generation: the kernel module (`trace`, `launch`, `launch_with`), device
//! functions, and the body rewriting both share.

pub mod body;
pub mod custom_op;
pub mod device;
mod early_return;
pub mod kernel;
mod promote;
mod tuned;
