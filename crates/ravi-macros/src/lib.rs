//! # ravi-macros — the `#[tool]` attribute (layer L0)
//!
//! Procedural macros that generate `ravi_kernel::Tool` implementations. Used through
//! `ravi-agents`, which re-exports them next to the runtime they target (`ravi_agents::tool`);
//! the expansion refers to `::ravi_agents`, so depend on that crate. (The example below runs
//! as a doctest of `ravi-agents`, `ravi_agents::tool`: this L0 crate may not depend on L1.)
//!
//! ```ignore
//! use ravi_agents::kernel::{Tool, ToolContext, ToolRisk};
//!
//! /// Add two integers and return the sum.
//! #[ravi_agents::tool(category = "data", tags = ["math"])]
//! async fn add(a: i64, b: i64) -> i64 {
//!     a + b
//! }
//!
//! let out = futures::executor::block_on(
//!     AddTool.execute(&ToolContext::default(), serde_json::json!({"a": 2, "b": 3})),
//! ).unwrap();
//! assert_eq!(out.structured_content, Some(serde_json::json!(5)));
//! assert_eq!(AddTool.description(), "Add two integers and return the sum.");
//! assert_eq!(AddTool.risk(), ToolRisk::Safe);
//! ```
//!
//! # What the attribute accepts
//!
//! On an `async fn` with no generics and no `self`:
//!
//! - parameters: either plain named parameters (each becomes a property of the arguments
//!   object; `Option<T>` ones are optional), or a single parameter named `args` whose type
//!   derives `Deserialize` and `JsonSchema` (its schema is the tool's schema). A parameter of
//!   type `&ToolContext` may appear anywhere and receives the call context.
//! - return: anything `ravi_agents::IntoToolOutput` accepts, any `Serialize` value
//!   (structured content plus its JSON text), or a `Result` of those whose error converts into
//!   `ToolError` or implements `Display`.
//! - options: `name = "…"` (default: the function name), `description = "…"` (default: the doc
//!   comment), `risk = safe | sensitive | high | critical`, `hitl = blocking |
//!   continue_on_timeout | fire_and_continue`, `hitl_timeout_secs = 10` (how long an approval
//!   is waited for; default: the policy's `approval_timeout`), `defer_loading = true`,
//!   `idempotent = true` (running it twice has the effect of running it once: a call a crash
//!   interrupted is run again on resume, not reported in doubt), `examples = ["{..}", ..]`
//!   (example argument objects as JSON strings, checked at compile time, sent to providers that
//!   accept `input_examples`), and for discovery `category = "…"`, `tags = [..]`,
//!   `aliases = [..]`, `discover = false`.
//! - output schema: when the function returns (or returns `Ok` of) a type that derives
//!   `JsonSchema` and is not one of the self-converting outputs (`String`,
//!   `ToolExecutionResult`, `Json<T>`, …), the tool declares that type's schema as its
//!   `output_schema`, so MCP clients receive an `outputSchema` for it.
//!
//! The function stays callable as written; the tool is a unit struct named after it in
//! PascalCase with a `Tool` suffix (`read_file` → `ReadFileTool`).

use proc_macro::TokenStream;
use proc_macro2::{Span, TokenStream as TokenStream2};
use quote::{format_ident, quote, quote_spanned};
use syn::spanned::Spanned;
use syn::{Expr, ExprArray, FnArg, ItemFn, Lit, LitBool, LitStr, Pat, ReturnType, Type};

/// Turns an async function into a Ravi tool. See the crate documentation.
#[proc_macro_attribute]
pub fn tool(attr: TokenStream, item: TokenStream) -> TokenStream {
    let func = match syn::parse::<ItemFn>(item) {
        Ok(f) => f,
        Err(e) => return e.to_compile_error().into(),
    };
    let mut opts = Options::default();
    let parser = syn::meta::parser(|meta| opts.parse(meta));
    if let Err(e) = syn::parse::Parser::parse(parser, attr) {
        return e.to_compile_error().into();
    }
    match expand(opts, func) {
        Ok(ts) => ts.into(),
        Err(e) => e.to_compile_error().into(),
    }
}

const RISKS: [(&str, &str); 4] = [
    ("safe", "Safe"),
    ("sensitive", "Sensitive"),
    ("high", "High"),
    ("critical", "Critical"),
];
const HITL: [(&str, &str); 3] = [
    ("blocking", "Blocking"),
    ("continue_on_timeout", "ContinueOnTimeout"),
    ("fire_and_continue", "FireAndContinue"),
];

#[derive(Default)]
struct Options {
    name: Option<LitStr>,
    description: Option<LitStr>,
    risk: Option<(String, Span)>,
    hitl: Option<(String, Span)>,
    /// The approval wait in seconds (`hitl_timeout_secs = 10`), already checked positive.
    hitl_timeout_secs: Option<f64>,
    category: Option<LitStr>,
    tags: Vec<LitStr>,
    aliases: Vec<LitStr>,
    discover: Option<bool>,
    defer_loading: Option<bool>,
    idempotent: Option<bool>,
    examples: Vec<LitStr>,
}

/// A word given either bare (`risk = high`) or quoted (`risk = "high"`).
fn word(expr: &Expr) -> syn::Result<(String, Span)> {
    match expr {
        Expr::Lit(l) => match &l.lit {
            Lit::Str(s) => Ok((s.value(), s.span())),
            other => Err(syn::Error::new(other.span(), "expected a name")),
        },
        Expr::Path(p) => p
            .path
            .get_ident()
            .map(|i| (i.to_string(), i.span()))
            .ok_or_else(|| syn::Error::new(p.span(), "expected a single name")),
        other => Err(syn::Error::new(other.span(), "expected a name")),
    }
}

fn strings(expr: &ExprArray) -> syn::Result<Vec<LitStr>> {
    expr.elems
        .iter()
        .map(|e| match e {
            Expr::Lit(l) => match &l.lit {
                Lit::Str(s) => Ok(s.clone()),
                other => Err(syn::Error::new(other.span(), "expected a string literal")),
            },
            other => Err(syn::Error::new(other.span(), "expected a string literal")),
        })
        .collect()
}

impl Options {
    fn parse(&mut self, meta: syn::meta::ParseNestedMeta<'_>) -> syn::Result<()> {
        let key = meta
            .path
            .get_ident()
            .map(ToString::to_string)
            .unwrap_or_default();
        match key.as_str() {
            "name" => self.name = Some(meta.value()?.parse()?),
            "description" => self.description = Some(meta.value()?.parse()?),
            "category" => self.category = Some(meta.value()?.parse()?),
            "risk" => {
                let (w, span) = word(&meta.value()?.parse()?)?;
                if !RISKS.iter().any(|(k, _)| *k == w) {
                    return Err(syn::Error::new(
                        span,
                        format!(
                            "unknown risk `{w}`: expected one of safe, sensitive, high, critical"
                        ),
                    ));
                }
                self.risk = Some((w, span));
            }
            "hitl" => {
                let (w, span) = word(&meta.value()?.parse()?)?;
                if !HITL.iter().any(|(k, _)| *k == w) {
                    return Err(syn::Error::new(
                        span,
                        format!(
                            "unknown hitl mode `{w}`: expected one of blocking, continue_on_timeout, fire_and_continue"
                        ),
                    ));
                }
                self.hitl = Some((w, span));
            }
            "hitl_timeout_secs" => {
                let lit: Lit = meta.value()?.parse()?;
                let secs = match &lit {
                    Lit::Int(i) => i.base10_parse::<f64>()?,
                    Lit::Float(f) => f.base10_parse::<f64>()?,
                    _ => {
                        return Err(syn::Error::new(
                            lit.span(),
                            "hitl_timeout_secs expects a number of seconds, e.g. 10 or 2.5",
                        ));
                    }
                };
                if !(secs.is_finite() && secs > 0.0) {
                    return Err(syn::Error::new(
                        lit.span(),
                        "hitl_timeout_secs must be a positive number of seconds",
                    ));
                }
                self.hitl_timeout_secs = Some(secs);
            }
            "tags" => self.tags = strings(&meta.value()?.parse()?)?,
            "aliases" => self.aliases = strings(&meta.value()?.parse()?)?,
            "discover" => self.discover = Some(meta.value()?.parse::<LitBool>()?.value),
            "defer_loading" => self.defer_loading = Some(meta.value()?.parse::<LitBool>()?.value),
            "idempotent" => self.idempotent = Some(meta.value()?.parse::<LitBool>()?.value),
            "examples" => {
                let examples = strings(&meta.value()?.parse()?)?;
                for example in &examples {
                    check_example(example)?;
                }
                self.examples = examples;
            }
            _ => {
                return Err(meta.error(
                    "unknown `#[tool]` option; expected one of name, description, risk, hitl, \
                     hitl_timeout_secs, category, tags, aliases, discover, defer_loading, \
                     idempotent, examples",
                ));
            }
        }
        Ok(())
    }
}

/// An example must be a JSON object (an arguments object), caught here rather than at run time.
fn check_example(example: &LitStr) -> syn::Result<()> {
    match serde_json::from_str::<serde_json::Value>(&example.value()) {
        Ok(serde_json::Value::Object(_)) => Ok(()),
        Ok(_) => Err(syn::Error::new(
            example.span(),
            "an example must be a JSON object of arguments, like the ones a model would send",
        )),
        Err(e) => Err(syn::Error::new(
            example.span(),
            format!("invalid JSON in example: {e}"),
        )),
    }
}

/// The type a function's output converts from: `T` of `-> T` or of `-> Result<T, E>`; `()`
/// when nothing is returned; `None` for types we cannot name (`impl Trait`).
fn output_type(ret: &ReturnType) -> Option<TokenStream2> {
    let ty = match ret {
        ReturnType::Default => return Some(quote!(())),
        ReturnType::Type(_, ty) => &**ty,
    };
    match ty {
        Type::ImplTrait(_) | Type::Infer(_) | Type::Never(_) => None,
        Type::Path(p) if returns_result(ret) => {
            let last = p.path.segments.last()?;
            match &last.arguments {
                syn::PathArguments::AngleBracketed(a) => a.args.iter().find_map(|arg| match arg {
                    syn::GenericArgument::Type(t) => Some(quote!(#t)),
                    _ => None,
                }),
                _ => None,
            }
        }
        other => Some(quote!(#other)),
    }
}

fn valid_name(name: &str) -> bool {
    (1..=64).contains(&name.chars().count())
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn pascal(name: &str) -> String {
    name.split(['_', '-'])
        .filter(|p| !p.is_empty())
        .map(|p| {
            let mut cs = p.chars();
            cs.next()
                .map(|c| c.to_ascii_uppercase().to_string() + cs.as_str())
                .unwrap_or_default()
        })
        .collect()
}

fn doc_text(func: &ItemFn) -> String {
    let mut lines = Vec::new();
    for attr in &func.attrs {
        if !attr.path().is_ident("doc") {
            continue;
        }
        if let syn::Meta::NameValue(nv) = &attr.meta
            && let Expr::Lit(l) = &nv.value
            && let Lit::Str(s) = &l.lit
        {
            let v = s.value();
            lines.push(v.strip_prefix(' ').unwrap_or(&v).trim_end().to_owned());
        }
    }
    lines.join("\n").trim().to_owned()
}

fn is_context(ty: &Type) -> bool {
    if let Type::Reference(r) = ty
        && let Type::Path(p) = &*r.elem
    {
        return p
            .path
            .segments
            .last()
            .is_some_and(|s| s.ident == "ToolContext");
    }
    false
}

fn returns_result(ret: &ReturnType) -> bool {
    match ret {
        ReturnType::Type(_, ty) => match &**ty {
            Type::Path(p) => p.path.segments.last().is_some_and(|s| s.ident == "Result"),
            _ => false,
        },
        ReturnType::Default => false,
    }
}

enum Param {
    Context,
    Field(syn::Ident, Box<Type>),
}

fn expand(opts: Options, func: ItemFn) -> syn::Result<TokenStream2> {
    let sig = &func.sig;
    if sig.asyncness.is_none() {
        return Err(syn::Error::new(
            sig.fn_token.span(),
            "`#[tool]` requires an `async fn`",
        ));
    }
    if !sig.generics.params.is_empty() || sig.generics.where_clause.is_some() {
        return Err(syn::Error::new(
            sig.generics.span(),
            "`#[tool]` functions cannot be generic: the arguments schema must be one concrete type",
        ));
    }
    if let Some(v) = &sig.variadic {
        return Err(syn::Error::new(
            v.span(),
            "`#[tool]` functions cannot be variadic",
        ));
    }

    let fn_ident = &sig.ident;
    let fn_name = fn_ident.to_string();
    let fn_name = fn_name.strip_prefix("r#").unwrap_or(&fn_name).to_owned();
    let (name, name_span) = match &opts.name {
        Some(n) => (n.value(), n.span()),
        None => (fn_name.clone(), fn_ident.span()),
    };
    if !valid_name(&name) {
        return Err(syn::Error::new(
            name_span,
            format!(
                "invalid tool name `{name}`: expected 1-64 characters of [A-Za-z0-9_-] (what every provider accepts)"
            ),
        ));
    }
    let description = match &opts.description {
        Some(d) => d.value(),
        None => doc_text(&func),
    };
    if description.trim().is_empty() {
        return Err(syn::Error::new(
            fn_ident.span(),
            "`#[tool]` needs a description for the model: add a doc comment or `description = \"...\"`",
        ));
    }

    let mut params = Vec::new();
    for input in &sig.inputs {
        match input {
            FnArg::Receiver(r) => {
                return Err(syn::Error::new(
                    r.span(),
                    "`#[tool]` goes on a free function, not a method; implement `TypedTool` for a type with state",
                ));
            }
            FnArg::Typed(pt) => {
                if is_context(&pt.ty) {
                    params.push(Param::Context);
                    continue;
                }
                let Pat::Ident(pi) = &*pt.pat else {
                    return Err(syn::Error::new(
                        pt.pat.span(),
                        "`#[tool]` parameters must be plain names (they become argument properties)",
                    ));
                };
                params.push(Param::Field(pi.ident.clone(), pt.ty.clone()));
            }
        }
    }
    let fields: Vec<(&syn::Ident, &Type)> = params
        .iter()
        .filter_map(|p| match p {
            Param::Field(i, t) => Some((i, &**t)),
            Param::Context => None,
        })
        .collect();
    let whole_args = matches!(fields.as_slice(), [(i, _)] if *i == "args");

    let krate = quote!(::ravi_agents);
    let k = quote!(#krate::kernel);
    let p = quote!(#krate::__private);

    let args_def = if whole_args {
        let ty = fields.first().map(|(_, t)| *t);
        quote!(type __RaviArgs = #ty;)
    } else {
        let names = fields.iter().map(|(i, _)| *i);
        let tys = fields.iter().map(|(_, t)| *t);
        let serde_crate = format!("{p}::serde").replace(' ', "");
        let schemars_crate = format!("{p}::schemars").replace(' ', "");
        quote! {
            #[derive(#p::serde::Deserialize, #p::schemars::JsonSchema)]
            #[serde(crate = #serde_crate)]
            #[schemars(crate = #schemars_crate)]
            #[allow(non_camel_case_types, dead_code, reason = "a generated arguments struct, read only through serde")]
            struct __RaviArgs { #(#names: #tys,)* }
        }
    };

    let call_args = params.iter().map(|param| match param {
        Param::Context => quote!(__ctx),
        Param::Field(i, _) if whole_args => {
            let _ = i;
            quote!(__args)
        }
        Param::Field(i, _) => quote!(__args.#i),
    });

    let convert = if returns_result(&sig.output) {
        quote! {
            match __out {
                ::core::result::Result::Ok(__v) => {
                    use #p::{ViaIntoOutput as _, ViaSerialize as _};
                    (&&#p::Wrap::new(__v)).ravi_into_output()
                }
                ::core::result::Result::Err(__e) => {
                    use #p::{ViaIntoToolError as _, ViaDisplay as _};
                    ::core::result::Result::Err((&&#p::Wrap::new(__e)).ravi_into_error())
                }
            }
        }
    } else {
        quote! {
            use #p::{ViaIntoOutput as _, ViaSerialize as _};
            (&&#p::Wrap::new(__out)).ravi_into_output()
        }
    };

    let risk_ident = opts
        .risk
        .as_ref()
        .and_then(|(w, span)| {
            RISKS
                .iter()
                .find(|(k, _)| k == w)
                .map(|(_, v)| syn::Ident::new(v, *span))
        })
        .unwrap_or_else(|| format_ident!("Safe"));
    let hitl = match opts.hitl.as_ref().and_then(|(w, span)| {
        HITL.iter()
            .find(|(k, _)| k == w)
            .map(|(_, v)| syn::Ident::new(v, *span))
    }) {
        Some(mode) => quote!(#k::HitlMode::#mode),
        None => quote!(#k::HitlMode::default_for(#k::Tool::risk(self))),
    };
    let hitl_timeout = match opts.hitl_timeout_secs {
        Some(secs) => quote!(::core::option::Option::Some(
            ::std::time::Duration::from_secs_f64(#secs)
        )),
        None => quote!(::core::option::Option::None),
    };
    let defer = opts.defer_loading.unwrap_or(false);
    let idempotent = opts.idempotent.unwrap_or(false);
    let examples = &opts.examples;
    let output_schema = match output_type(&sig.output) {
        Some(ty) => quote! {
            static SCHEMA: ::std::sync::OnceLock<::core::option::Option<#p::serde_json::Value>> =
                ::std::sync::OnceLock::new();
            SCHEMA
                .get_or_init(|| {
                    use #p::{ViaJsonSchema as _, ViaNoSchema as _, ViaOutputSelf as _};
                    (&&&#p::Schema::<#ty>::new()).ravi_output_schema()
                })
                .clone()
        },
        None => quote!(::core::option::Option::None),
    };

    let struct_ident = syn::Ident::new(&format!("{}Tool", pascal(&fn_name)), fn_ident.span());
    let vis = &func.vis;
    let struct_doc = format!("The `{name}` tool, generated by `#[tool]` from [`{fn_name}`].");

    let register = if opts.discover.unwrap_or(true) {
        let category = opts
            .category
            .as_ref()
            .map_or_else(|| "general".to_owned(), LitStr::value);
        let tags = &opts.tags;
        let aliases = &opts.aliases;
        quote! {
            #p::inventory::submit! {
                #krate::discovery::ToolRegistration {
                    name: #name,
                    category: #category,
                    tags: &[#(#tags),*],
                    aliases: &[#(#aliases),*],
                    build: || #k::AnyTool::Function(::std::sync::Arc::new(#struct_ident)),
                }
            }
        }
    } else {
        quote!()
    };

    let await_span = sig.output.span();
    let call = quote_spanned!(await_span=> #fn_ident(#(#call_args),*).await);

    Ok(quote! {
        #func

        #[doc = #struct_doc]
        #[derive(Debug, Clone, Copy, Default)]
        #vis struct #struct_ident;

        const _: () = {
            #args_def

            #[#p::async_trait]
            impl #k::Tool for #struct_ident {
                fn name(&self) -> &str {
                    #name
                }
                fn description(&self) -> &str {
                    #description
                }
                fn input_schema(&self) -> #p::serde_json::Value {
                    static SCHEMA: ::std::sync::OnceLock<#p::serde_json::Value> =
                        ::std::sync::OnceLock::new();
                    SCHEMA
                        .get_or_init(#p::input_schema_for::<__RaviArgs>)
                        .clone()
                }
                fn risk(&self) -> #k::ToolRisk {
                    #k::ToolRisk::#risk_ident
                }
                fn hitl_mode(&self) -> #k::HitlMode {
                    #hitl
                }
                fn hitl_timeout(&self) -> ::core::option::Option<::std::time::Duration> {
                    #hitl_timeout
                }
                fn lazy_schema(&self) -> bool {
                    #defer
                }
                fn idempotent(&self) -> bool {
                    #idempotent
                }
                fn output_schema(&self) -> ::core::option::Option<#p::serde_json::Value> {
                    #output_schema
                }
                fn input_examples(&self) -> ::std::vec::Vec<#p::serde_json::Value> {
                    const EXAMPLES: &[&str] = &[#(#examples),*];
                    EXAMPLES
                        .iter()
                        .filter_map(|e| #p::serde_json::from_str(e).ok())
                        .collect()
                }
                async fn execute(
                    &self,
                    __ctx: &#k::ToolContext,
                    __raw: #p::serde_json::Value,
                ) -> ::core::result::Result<#k::ToolExecutionResult, #k::ToolError> {
                    let _ = __ctx;
                    let __args: __RaviArgs = #p::parse_args(#name, __raw)?;
                    let __out = #call;
                    #convert
                }
            }

            #register
        };
    })
}
