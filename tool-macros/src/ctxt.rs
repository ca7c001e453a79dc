//! A serde_derive-style error collector: every problem of one `#[tool]` is reported in one build.

use std::cell::RefCell;
use std::fmt::Display;

use proc_macro2::TokenStream;
use quote::ToTokens;

/// Collects errors; must be consumed with [`Ctxt::check`].
pub struct Ctxt {
    errors: RefCell<Option<Vec<syn::Error>>>,
}

impl Ctxt {
    pub fn new() -> Ctxt {
        Ctxt { errors: RefCell::new(Some(Vec::new())) }
    }

    /// Records an error spanned at `tokens`.
    pub fn error_spanned_by<T: ToTokens, M: Display>(&self, tokens: T, msg: M) {
        self.syn_error(syn::Error::new_spanned(tokens.into_token_stream(), msg));
    }

    /// Records an error at a span.
    pub fn error_at<M: Display>(&self, span: proc_macro2::Span, msg: M) {
        self.syn_error(syn::Error::new(span, msg));
    }

    /// Records a parse error.
    pub fn syn_error(&self, err: syn::Error) {
        self.errors.borrow_mut().as_mut().expect("Ctxt used after check").push(err);
    }

    /// Consumes the collector: all recorded errors combined, or `Ok`.
    pub fn check(self) -> Result<(), syn::Error> {
        let mut errors = self.errors.borrow_mut().take().expect("Ctxt checked twice").into_iter();
        let Some(mut combined) = errors.next() else { return Ok(()) };
        for rest in errors {
            combined.combine(rest);
        }
        Err(combined)
    }
}

impl Drop for Ctxt {
    fn drop(&mut self) {
        if !std::thread::panicking() && self.errors.borrow().is_some() {
            panic!("Ctxt dropped without check()");
        }
    }
}

/// Turns collected errors into `compile_error!` invocations.
pub fn to_compile_errors(err: syn::Error) -> TokenStream {
    err.to_compile_error()
}
