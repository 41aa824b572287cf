//! A panic while tracing (an `assert!` on a constexpr, an index out of range in the kernel
//! body's Rust code) becomes a trace error naming where it happened, not a panic out of
//! `launch`. The panic hook is chained once per process: while a trace runs on a thread it
//! records the panic's location and message for that thread instead of printing them;
//! otherwise it calls the hook that was installed before.

use crate::{Error, Result};
use std::cell::{Cell, RefCell};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::Once;

thread_local! {
    /// True while [`catch_panic`] runs a trace on this thread.
    static CATCHING: Cell<bool> = const { Cell::new(false) };
    /// The location and message of the panic caught on this thread.
    static CAUGHT: RefCell<Option<(String, String)>> = const { RefCell::new(None) };
}

static HOOK: Once = Once::new();

/// Runs `trace` (the tracing of kernel `kernel`), turning a panic into [`Error::Trace`] at
/// the panic's `file:line:col`.
pub fn catch_panic<T>(kernel: &str, trace: impl FnOnce() -> Result<T>) -> Result<T> {
    install_hook();
    let outer = CATCHING.with(|c| c.replace(true));
    let result = catch_unwind(AssertUnwindSafe(trace));
    CATCHING.with(|c| c.set(outer));
    result.unwrap_or_else(|payload| {
        let (location, message) = CAUGHT
            .with(|c| c.borrow_mut().take())
            .unwrap_or_else(|| (kernel.to_string(), payload_message(payload.as_ref())));
        Err(Error::Trace {
            location,
            message: format!("panicked while tracing kernel `{kernel}`: {message}"),
        })
    })
}

fn install_hook() {
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if CATCHING.with(Cell::get) {
                let location = info.location().map_or_else(String::new, |l| {
                    format!("{}:{}:{}", l.file(), l.line(), l.column())
                });
                let message = payload_message(info.payload());
                CAUGHT.with(|c| *c.borrow_mut() = Some((location, message)));
            } else {
                previous(info);
            }
        }));
    });
}

fn payload_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic with a non-string payload".into())
}
