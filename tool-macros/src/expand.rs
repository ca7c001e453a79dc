//! Code generation from a validated [`Tool`]. Generated code reaches the runtime only through
//! `<root>::__private`, names prelude items by absolute path, and hides its items in `const _: () = { .. };`.

use proc_macro2::TokenStream;
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;

use crate::attr::Effect;
use crate::model::{Args, Output, Param, Tool};

pub fn expand(tool: &Tool, func: &syn::ItemFn, root: &syn::Path) -> TokenStream {
    let private = quote!(#root::__private);
    let fn_ident = &func.sig.ident;
    let name = &tool.name;
    let description = &tool.description;
    let version = &tool.version;
    let idempotent = tool.idempotent;
    let tags = &tool.tags;
    let effect = match tool.effect {
        Effect::Read => quote!(#private::Effect::Read),
        Effect::Write => quote!(#private::Effect::Write),
        Effect::Destructive => quote!(#private::Effect::Destructive),
    };
    let timeout = match tool.timeout_ms {
        Some(ms) => quote!(#private::core::option::Option::Some(#ms)),
        None => quote!(#private::core::option::Option::None),
    };
    let root_str = quote!(#root).to_string().replace(' ', "");
    let serde_crate = format!("{root_str}::__private::serde");
    let schemars_crate = format!("{root_str}::__private::schemars");

    // Arguments: the type to deserialize and how each parameter is produced.
    let args_struct_ident = format_ident!("__KeelArgs");
    let (args_def, args_ty) = match &tool.args {
        Args::None => (quote!(), None),
        Args::Struct { ty } => (quote!(), Some(quote!(#ty))),
        Args::Gathered(fields) => {
            let defs = fields.iter().map(|f| {
                let ident = &f.ident;
                let ty = &f.ty;
                let doc = f.description.as_ref().map(|d| quote!(#[doc = #d]));
                quote!(#doc #ident: #ty)
            });
            let def = quote! {
                #[derive(#private::serde::Deserialize, #private::schemars::JsonSchema)]
                #[serde(crate = #serde_crate, deny_unknown_fields)]
                #[schemars(crate = #schemars_crate)]
                #[allow(non_camel_case_types, non_snake_case, dead_code)]
                struct #args_struct_ident { #(#defs,)* }
            };
            (def, Some(quote!(#args_struct_ident)))
        }
    };
    let input_schema = match (&tool.args, &args_ty) {
        (Args::Struct { ty }, _) => quote_spanned!(ty.span()=> #private::args_schema_for::<#ty>()),
        (_, Some(ty)) => quote!(#private::schema_for::<#ty>()),
        (_, None) => quote!(#private::empty_object_schema()),
    };
    let parse_args = match (&tool.args, &args_ty) {
        (Args::Struct { ty }, _) => {
            quote_spanned!(ty.span()=> let __keel_args: #ty = #private::parse_args::<#ty>(__keel_value)?;)
        }
        (_, Some(ty)) => quote!(let __keel_args: #ty = #private::parse_args::<#ty>(__keel_value)?;),
        (_, None) => quote!(let _ = __keel_value;),
    };
    let call_args = tool.params.iter().map(|p| match p {
        Param::ArgsStruct => quote!(__keel_args),
        Param::Field(ident) => quote!(__keel_args.#ident),
        Param::Injected(ty) => {
            quote_spanned!(ty.span()=> #private::inject::<#ty>(&__keel_ctx)?)
        }
    });
    let call =
        if tool.is_async { quote!(#fn_ident(#(#call_args),*).await) } else { quote!(#fn_ident(#(#call_args),*)) };

    let (output_schema, convert) = match &tool.output {
        Output::Result { ok, err } => {
            let err = match err {
                Some(e) => quote_spanned!(e.span()=> #e),
                None => quote!(_),
            };
            let convert_fn = quote_spanned!(ok.span()=> #private::output_result::<#ok, #err>);
            (quote_spanned!(ok.span()=> #private::output_schema_for::<#ok>()), quote!(#convert_fn(#call)))
        }
        Output::Plain { ty } => {
            let convert_fn = quote_spanned!(ty.span()=> #private::output::<#ty>);
            (quote_spanned!(ty.span()=> #private::output_schema_for::<#ty>()), quote!(#convert_fn(#call)))
        }
        Output::Unit => (quote!(#private::output_schema_for::<()>()), quote!(#private::output(#call))),
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
        let variant = if tool.blocking { quote!(Blocking) } else { quote!(Inline) };
        (
            quote! {
                fn __keel_call(__keel_value: #value_ty, __keel_ctx: #private::CallContext) -> #result_ty {
                    #parse_args
                    #convert
                }
            },
            quote!(#private::Handler::#variant(__keel_call)),
        )
    };

    // Spanned at the name so that E0428 for a duplicate points at both names, not at the attributes.
    let guard = format_ident!("__keel_tool_name_{}", tool_names::guard_suffix(name), span = tool.name_span);
    let guard_def = quote_spanned! {tool.name_span=>
        #[doc(hidden)]
        #[macro_export]
        macro_rules! #guard { () => {}; }
    };
    // A thunk that injects nothing never reads its `CallContext`: the executor can hand it a shared one.
    let reads_context = tool.params.iter().any(|p| matches!(p, Param::Injected(_)));
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
            #args_def

            fn __keel_input_schema() -> #value_ty { #input_schema }
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
                    timeout_ms: #timeout,
                    tags: &[#(#tags),*],
                    location: #private::SourceLocation { file: #file, line: #line, module_path: #module_path },
                    input_schema: __keel_input_schema,
                    output_schema: __keel_output_schema,
                    handler: #handler,
                    reads_context: #reads_context,
                }
            }
        };
    }
}
