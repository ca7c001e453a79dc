//! Where a `#[tool]` fn sits. An attribute macro sees only its item, not the block around it; an associated fn
//! (inside an `impl` or a `trait`) looks exactly like a free fn. To give that mistake one clear error instead of
//! the several that its expansion would cause, the fn's own source file is read (once per file and compilation)
//! and searched for a `#[tool]` fn of that name inside an `impl` or `trait`. When the file cannot be read or
//! parsed (a generated file, an IDE's expansion), nothing is reported here and the fn is treated as free.

use std::cell::RefCell;
use std::collections::HashMap;
use std::path::PathBuf;
use std::time::SystemTime;

/// The signatures (as token text) of the `#[tool]` fns that sit inside an `impl` or `trait`, per file.
type Cache = HashMap<PathBuf, (Option<SystemTime>, u64, Vec<String>)>;

thread_local! {
    static CACHE: RefCell<Cache> = RefCell::new(HashMap::new());
}

/// Whether the fn with this signature is an associated fn: its file holds a `#[tool]` fn with the same signature
/// inside an `impl` or `trait`.
pub fn is_associated(sig: &syn::Signature) -> bool {
    let ident = &sig.ident;
    let Some(path) = local_file(ident) else { return false };
    let Ok(meta) = std::fs::metadata(&path) else { return false };
    let stamp = (meta.modified().ok(), meta.len());
    let name = signature_text(sig);
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        let entry = cache.get(&path).filter(|(m, l, _)| (*m, *l) == stamp);
        let names = match entry {
            Some((_, _, names)) => names.clone(),
            None => {
                let names = associated_tools(&path);
                cache.insert(path, (stamp.0, stamp.1, names.clone()));
                names
            }
        };
        names.contains(&name)
    })
}

fn local_file(ident: &syn::Ident) -> Option<PathBuf> {
    // Only inside a real macro expansion; unit tests of this crate have no compiler to ask.
    if !proc_macro::is_available() {
        return None;
    }
    ident.span().unwrap().local_file()
}

fn associated_tools(path: &PathBuf) -> Vec<String> {
    let Ok(text) = std::fs::read_to_string(path) else { return Vec::new() };
    let Ok(file) = syn::parse_file(&text) else { return Vec::new() };
    let mut out = Vec::new();
    walk(&file.items, &mut out);
    out
}

fn signature_text(sig: &syn::Signature) -> String {
    quote::quote!(#sig).to_string()
}

fn is_tool(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| a.path().segments.last().is_some_and(|s| s.ident == "tool"))
}

fn walk(items: &[syn::Item], out: &mut Vec<String>) {
    for item in items {
        match item {
            syn::Item::Impl(i) => {
                for it in &i.items {
                    if let syn::ImplItem::Fn(f) = it
                        && is_tool(&f.attrs)
                    {
                        out.push(signature_text(&f.sig));
                    }
                }
            }
            syn::Item::Trait(t) => {
                for it in &t.items {
                    if let syn::TraitItem::Fn(f) = it
                        && is_tool(&f.attrs)
                    {
                        out.push(signature_text(&f.sig));
                    }
                }
            }
            syn::Item::Mod(m) => {
                if let Some((_, items)) = &m.content {
                    walk(items, out);
                }
            }
            _ => {}
        }
    }
}
