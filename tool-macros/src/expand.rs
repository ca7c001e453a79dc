//! Code generation from a validated [`Tool`]. Generated code reaches the runtime only through
//! `<root>::__private`, names prelude items by absolute path, and hides its items in `const _: () = { .. };`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::attr::Effect;
use crate::model::{Output, Tool};

fn unraw(ident: &syn::Ident) -> String {
    let s = ident.to_string();
    s.strip_prefix("r#").map(str::to_owned).unwrap_or(s)
}

pub fn expand(tool: &Tool, func: &syn::ItemFn, root: &syn::Path) -> TokenStream {
    let private = quote!(#root::__private);
    let fn_ident = &func.sig.ident;
    let name = &tool.name;
    let description = &tool.description;
    let version = &tool.version;
    let idempotent = tool.idempotent;
    let task = match tool.task {
        None => quote!(#private::TaskSupport::Never),
        Some(crate::attr::Task::Optional) => quote!(#private::TaskSupport::Optional),
        Some(crate::attr::Task::Required) => quote!(#private::TaskSupport::Required),
    };
    let task_start = if tool.task_start_handler {
        quote!(#private::TaskStart::Handler)
    } else {
        quote!(#private::TaskStart::Admission)
    };
    let tags = &tool.tags;
    let examples = &tool.examples;
    let deferred = tool.deferred;
    let scopes = &tool.scopes;
    let effect = match tool.effect {
        Effect::Read => quote!(#private::Effect::Read),
        Effect::Write => quote!(#private::Effect::Write),
        Effect::Destructive => quote!(#private::Effect::Destructive),
    };
    let timeout = match tool.timeout_ms {
        Some(ms) => quote!(#private::core::option::Option::Some(#ms)),
        None => quote!(#private::core::option::Option::None),
    };

    // Parameters: each one's role is resolved from its type's traits by the generated code.
    let roles: Vec<TokenStream> = tool
        .params
        .iter()
        .map(|p| {
            let ty = &p.ty;
            quote_spanned!(ty.span()=> (&&&#private::Slot::<#ty>::NEW).role())
        })
        .collect();
    let names: Vec<String> = tool.params.iter().map(|p| p.ident.as_ref().map(unraw).unwrap_or_default()).collect();
    let infos = tool.params.iter().zip(&roles).zip(&names).map(|((p, role), name)| {
        let description = match &p.description {
            Some(d) => quote!(#private::core::option::Option::Some(#d)),
            None => quote!(#private::core::option::Option::None),
        };
        let header = match &p.header {
            Some(h) => quote!(#private::core::option::Option::Some(#h)),
            None => quote!(#private::core::option::Option::None),
        };
        let explicit = p.explicit;
        let attr = quote!(#private::ParamAttr { name: #name, description: #description, header: #header, explicit: #explicit });
        quote_spanned!(p.ty.span()=> #role.info(#attr))
    });
    let bindings: Vec<_> = (0..tool.params.len()).map(|i| format_ident!("__keel_p{}", i)).collect();
    let extracts = tool.params.iter().zip(&roles).zip(&names).zip(&bindings).map(|(((p, role), name), binding)| {
        quote_spanned!(p.ty.span()=> let #binding = #role.extract(&mut __keel_input, #name, &__keel_ctx)?;)
    });
    // Checks that only type-check (never run): a pattern or a `_name` cannot be a named argument.
    let checks = tool.params.iter().zip(&roles).flat_map(|(p, role)| {
        let span = p.span;
        let name = match &p.ident {
            None => Some(quote_spanned!(span=> #private::pattern_parameter(#role);)),
            Some(i) if unraw(i).starts_with('_') => Some(quote_spanned!(span=> #private::underscore_parameter(#role);)),
            Some(_) => None,
        };
        let ty = &p.ty;
        let arg = p.explicit.then(|| quote_spanned!(ty.span()=> #private::arg_attribute(#role);));
        name.into_iter().chain(arg)
    });
    let call = if tool.is_async { quote!(#fn_ident(#(#bindings),*).await) } else { quote!(#fn_ident(#(#bindings),*)) };

    let (output_schema, convert) = match &tool.output {
        Output::Result { ok, err } => {
            let err_ty = match err {
                Some(e) => quote_spanned!(e.span()=> #e),
                None => quote!(_),
            };
            let err_span = err.as_ref().map_or_else(|| ok.span(), |e| e.span());
            let convert_err = quote_spanned!(err_span=>
                #private::error_of((&&&#private::ErrorSlot::<#err_ty>::new(__keel_err)).take_tool_error())
            );
            let output_fn = quote_spanned!(ok.span()=> #private::output::<#ok>);
            (
                quote_spanned!(ok.span()=> #private::output_schema_for::<#ok>()),
                quote! {
                    match #call {
                        #private::core::result::Result::Ok(__keel_ok) => #output_fn(__keel_ok, __keel_output_limits),
                        #private::core::result::Result::Err(__keel_err) => #private::core::result::Result::Err(#convert_err),
                    }
                },
            )
        }
        Output::Plain { ty } => {
            let convert_fn = quote_spanned!(ty.span()=> #private::output::<#ty>);
            (
                quote_spanned!(ty.span()=> #private::output_schema_for::<#ty>()),
                quote!(#convert_fn(#call, __keel_output_limits)),
            )
        }
        Output::Unit => {
            (quote!(#private::output_schema_for::<()>()), quote!(#private::output(#call, __keel_output_limits)))
        }
    };
    let parse_args = quote! {
        // Read before the arguments. `&__keel_ctx` reads as a `&CallContext` (by deref coercion when the thunk
        // borrows its context).
        let __keel_output_limits = #private::output_limits(&__keel_ctx);
        let mut __keel_input = #private::Input::new(__keel_value, __keel_plan())?;
        #(#extracts)*
        __keel_input.finish()?;
    };

    let value_ty = quote!(#private::serde_json::Value);
    let result_ty = quote!(#private::core::result::Result<#value_ty, #private::ToolError>);
    let (thunk, handler) = if tool.is_async {
        (
            quote! {
                fn __keel_call(__keel_value: #value_ty, __keel_ctx: #private::CallContext) -> #private::BoxFuture<#result_ty> {
                    #private::Box::pin(async move {
                        #parse_args
                        #convert
                    })
                }
            },
            quote!(#private::Handler::Async(__keel_call)),
        )
    } else {
        // A blocking handler owns its context (it runs on another thread); an inline one borrows it.
        let (variant, ctx_ty) = if tool.blocking {
            (quote!(Blocking), quote!(#private::CallContext))
        } else {
            (quote!(Inline), quote!(&#private::CallContext))
        };
        (
            quote! {
                fn __keel_call(__keel_value: #value_ty, __keel_ctx: #ctx_ty) -> #result_ty {
                    #parse_args
                    #convert
                }
            },
            quote!(#private::Handler::#variant(__keel_call)),
        )
    };

    // Spanned at the name so that E0428 for a duplicate points at both names, not at the attributes; the guard's
    // name reads as the error: "the name `duplicate_tool_name_search` is defined multiple times".
    let guard = format_ident!("duplicate_tool_name_{}", keel_tools_names::guard_suffix(name), span = tool.name_span);
    // `#[macro_export]` puts the guard at the crate's root wherever the tool is declared; in a fn body that is what
    // the `non_local_definitions` lint warns of, and here it is the point, so the lint is allowed on the guard.
    let guard_def = quote_spanned! {tool.name_span=>
        #[doc(hidden)]
        #[macro_export]
        #[allow(non_local_definitions)]
        macro_rules! #guard { () => {}; }
    };
    let fn_name_str = fn_ident.to_string();
    let fn_name_str = fn_name_str.strip_prefix("r#").unwrap_or(&fn_name_str);
    let loc_span = fn_ident.span();
    let file = quote_spanned!(loc_span=> #private::core::file!());
    let line = quote_spanned!(loc_span=> #private::core::line!());
    let module_path = quote_spanned!(loc_span=> #private::core::module_path!());

    quote! {
        #func

        // One guard per tool name: a second tool with the same name in this crate is E0428 at both names.
        #guard_def

        #[allow(non_snake_case, clippy::needless_question_mark, clippy::unit_arg)]
        const _: () = {
            #[allow(unused_imports)]
            use #private::{ViaBoxedError as _, ViaExtractor as _, ViaNamed as _, ViaToolError as _, ViaUnsupported as _, ViaWholeArgs as _};

            /// The arguments object of the named arguments (its schema only; values are read per parameter).
            struct __KeelArgs;
            impl #private::schemars::JsonSchema for __KeelArgs {
                fn schema_name() -> #private::Cow<'static, str> {
                    #private::Cow::Borrowed("__KeelArgs")
                }
                fn json_schema(generator: &mut #private::schemars::SchemaGenerator) -> #private::schemars::Schema {
                    #private::gathered_schema(generator, &__keel_params())
                }
            }

            fn __keel_params() -> #private::Vec<#private::ParamInfo> {
                #private::Vec::from([#(#infos),*])
            }
            fn __keel_plan() -> &'static #private::Plan {
                static PLAN: #private::OnceLock<#private::Plan> = #private::OnceLock::new();
                PLAN.get_or_init(|| #private::Plan::new(&__keel_params()))
            }
            #[allow(dead_code, unreachable_code)]
            fn __keel_checks() {
                #(#checks)*
            }

            fn __keel_input_schema() -> #value_ty { #private::input_schema::<__KeelArgs>(&__keel_params(), __keel_plan()) }
            fn __keel_output_schema() -> #value_ty { #output_schema }
            #[allow(unused_variables)]
            #thunk

            #private::inventory::submit! {
                #private::StaticTool {
                    name: #name,
                    fn_name: #fn_name_str,
                    description: #description,
                    version: #version,
                    effect: #effect,
                    idempotent: #idempotent,
                    task: #task,
                    task_start: #task_start,
                    timeout_ms: #timeout,
                    tags: &[#(#tags),*],
                    scopes: &[#(#scopes),*],
                    examples: &[#(#examples),*],
                    deferred: #deferred,
                    location: #private::SourceLocation { file: #file, line: #line, module_path: #module_path },
                    input_schema: __keel_input_schema,
                    output_schema: __keel_output_schema,
                    handler: #handler,
                    params: __keel_params,
                    plan: __keel_plan,
                }
            }
        };
    }
}
