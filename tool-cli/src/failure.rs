//! A command's failure: its message and exit code.

/// A failure of a command: its message and exit code.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) message: String,
}

pub(crate) fn fail(code: u8, message: impl Into<String>) -> Failure {
    Failure { code, message: message.into() }
}

pub(crate) type Outcome = Result<u8, Failure>;

pub(crate) fn io(e: std::io::Error) -> Failure {
    fail(1, format!("cannot write the output: {e}"))
}
