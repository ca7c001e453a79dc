//! The trybuild suite of `#[tool]`: `fail/` holds one mistake per file with its reviewed `.stderr`, `pass/` every accepted form.
