//! Standard output for commands: a reader that stops reading (`dgw token
//! inspect … | head`) ends the output quietly, never with a panic. The
//! command still runs to its end and exits with its own code.

use std::fmt;
use std::io::{ErrorKind, Write};
use std::sync::atomic::{AtomicBool, Ordering};

/// Set once standard output could not be written: later output is dropped.
static CLOSED: AtomicBool = AtomicBool::new(false);

/// Writes one line to standard output (see [`say!`](crate::say)).
pub fn line(args: fmt::Arguments<'_>) {
    if CLOSED.load(Ordering::Relaxed) {
        return;
    }
    let mut out = std::io::stdout().lock();
    if let Err(e) = out
        .write_fmt(args)
        .and_then(|()| out.write_all(b"\n"))
        .and_then(|()| out.flush())
    {
        CLOSED.store(true, Ordering::Relaxed);
        if e.kind() != ErrorKind::BrokenPipe {
            eprintln!("dgw: cannot write to standard output: {e}");
        }
    }
}

/// `println!` for command output: quiet on a closed pipe.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {
        $crate::command::output::line(format_args!($($arg)*))
    };
}

/// Prints a value as pretty JSON on stdout.
pub fn print_json(value: &impl serde::Serialize) {
    crate::say!(
        "{}",
        serde_json::to_string_pretty(value).expect("CLI output always serializes")
    );
}
