//! Third-party decoders (parquet's page readers, Burn's record decoder) panic on some damaged
//! input. SignFlow calls them inside [`guarded`], which turns the panic into an error message, and
//! the binaries' panic hooks ask [`decoding`] so that such a panic prints nothing (the error that
//! follows names the file).

use std::any::Any;
use std::cell::Cell;

thread_local! {
    static DECODING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread is inside [`guarded`]: a panic hook stays quiet then.
pub fn decoding() -> bool {
    DECODING.try_with(Cell::get).unwrap_or(false)
}

/// Run `f`; a panic inside it is returned as its message.
pub fn guarded<T>(f: impl FnOnce() -> T) -> std::result::Result<T, String> {
    let outer = DECODING.with(|d| d.replace(true));
    let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(f));
    DECODING.with(|d| d.set(outer));
    out.map_err(|payload| panic_message(&*payload))
}

/// The text of a panic's payload.
pub fn panic_message(payload: &(dyn Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "panic with a non-text payload".to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_its_message_and_the_flag_is_restored() {
        assert!(!decoding());
        assert_eq!(guarded(decoding), Ok(true));
        let nested = guarded(|| {
            let inner: Result<(), String> = guarded(|| panic!("bad page {}", 3));
            (inner, decoding())
        });
        assert_eq!(nested, Ok((Err("bad page 3".to_string()), true)));
        assert_eq!(guarded(|| std::panic::panic_any(7u8)), Err::<(), _>("panic with a non-text payload".into()));
        assert!(!decoding());
    }
}
