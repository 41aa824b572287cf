//! Analysis of the user's code: signatures, the builtin table, loop ranges and
//! assigned variables. Nothing here emits code.

pub mod assigned;
pub mod builtins;
pub mod custom_op;
pub mod range;
pub mod signature;
pub mod tuning;
