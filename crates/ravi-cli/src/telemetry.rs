//! Logs and traces of the `ravi` process.
//!
//! Logs go to stderr through `tracing-subscriber`, filtered by `RUST_LOG` (default: warnings
//! of Ravi's own crates), with every secret value resolved from a `${secret:NAME}` reference
//! replaced by its name before a line is written.
//!
//! Traces (the `otel` feature) go to an OpenTelemetry collector over OTLP/HTTP when
//! `--otlp-endpoint` (on `ravi serve`) or the standard `OTEL_EXPORTER_OTLP_ENDPOINT` /
//! `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` variables name one; `OTEL_EXPORTER_OTLP_PROTOCOL`
//! chooses `http/protobuf` (the default) or `http/json`, and the SDK's own variables
//! (`OTEL_BSP_*`, `OTEL_EXPORTER_OTLP_HEADERS`, `OTEL_SERVICE_NAME`, …) apply. Exported are
//! Ravi's spans only (`tools/call`, `execute_tool`, approvals, guardrails, offloads).

use tracing_subscriber::layer::SubscriberExt as _;
use tracing_subscriber::util::SubscriberInitExt as _;
use tracing_subscriber::{EnvFilter, Layer as _};

/// What `RUST_LOG` defaults to: warnings from Ravi's crates, nothing from dependencies.
const DEFAULT_LOG: &str = "off,ravi=warn,ravi_kernel=warn,ravi_agents=warn,\
    ravi_capabilities=warn,ravi_integrations=warn,ravi_gateway=warn,ravi_console=warn,ravi_providers=warn,ravi_store_sql=warn,ravi_blobs_s3=warn";

/// Where traces go, once set up; [`Telemetry::shutdown`] flushes them.
pub struct Telemetry {
    #[cfg(feature = "otel")]
    provider: Option<opentelemetry_sdk::trace::SdkTracerProvider>,
}

/// stderr, with known secret values redacted from every line.
struct RedactingStderr;

impl std::io::Write for RedactingStderr {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let text = String::from_utf8_lossy(buf);
        let clean = ravi_agents::secrets::redact_known(&text);
        std::io::stderr().write_all(clean.as_bytes())?;
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        std::io::stderr().flush()
    }
}

/// Sets up logging, and tracing when an OTLP endpoint is configured (`endpoint` from the
/// command line wins over the environment). `capture_content` records tool arguments and
/// results on spans.
pub fn init(endpoint: Option<&str>, capture_content: bool) -> anyhow::Result<Telemetry> {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(DEFAULT_LOG));
    let logs = tracing_subscriber::fmt::layer()
        .with_writer(|| RedactingStderr)
        .with_ansi(false)
        .with_filter(filter);
    ravi_agents::telemetry::set_capture_content(capture_content);
    #[cfg(feature = "otel")]
    {
        let (provider, traces) = match otel::provider(endpoint)? {
            Some(provider) => {
                use opentelemetry::trace::TracerProvider as _;
                let tracer = provider.tracer("ravi");
                let only_ravi = tracing_subscriber::filter::Targets::new()
                    .with_target("ravi::tool", tracing::Level::INFO)
                    .with_target("ravi::mcp", tracing::Level::INFO);
                // No thread names, busy/idle times, source locations or targets on spans:
                // none is in the semantic conventions, and every span paid for them (a
                // thread-name copy, a clock read on every poll of an instrumented future,
                // four more attributes to encode). No OpenTelemetry context attached on
                // every poll either: Ravi propagates trace context from the tracing span
                // itself (`mcp::trace`), and a span entered on each poll of a future paid
                // for starting its OpenTelemetry span and pushing a context guard.
                let layer = tracing_opentelemetry::layer()
                    .with_tracer(tracer)
                    .with_threads(false)
                    .with_tracked_inactivity(false)
                    .with_location(false)
                    .with_target(false)
                    .with_context_activation(false)
                    .with_filter(only_ravi);
                (Some(provider), Some(layer))
            }
            None => (None, None),
        };
        tracing_subscriber::registry()
            .with(logs)
            .with(traces)
            .try_init()
            .ok();
        Ok(Telemetry { provider })
    }
    #[cfg(not(feature = "otel"))]
    {
        if endpoint.is_some() {
            anyhow::bail!("--otlp-endpoint: this ravi was built without the `otel` feature");
        }
        tracing_subscriber::registry().with(logs).try_init().ok();
        Ok(Telemetry {})
    }
}

impl Telemetry {
    /// Flushes the spans not exported yet (blocking; call outside async code).
    pub fn shutdown(self) {
        #[cfg(feature = "otel")]
        if let Some(provider) = self.provider
            && let Err(e) = provider.shutdown()
        {
            eprintln!("ravi: warning: could not flush the last traces: {e}");
        }
    }
}

#[cfg(feature = "otel")]
mod otel {
    use opentelemetry_otlp::{Protocol, WithExportConfig as _};
    use opentelemetry_sdk::trace::SdkTracerProvider;

    fn env(name: &str) -> Option<String> {
        std::env::var(name).ok().filter(|v| !v.trim().is_empty())
    }

    /// The tracer provider exporting to `endpoint` (or the environment's), if any.
    pub(super) fn provider(endpoint: Option<&str>) -> anyhow::Result<Option<SdkTracerProvider>> {
        let from_env = env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
            .or_else(|| env("OTEL_EXPORTER_OTLP_ENDPOINT"))
            .is_some();
        if endpoint.is_none() && !from_env {
            return Ok(None);
        }
        let protocol = match env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
            .or_else(|| env("OTEL_EXPORTER_OTLP_PROTOCOL"))
            .as_deref()
        {
            None | Some("http/protobuf") => Protocol::HttpBinary,
            Some("http/json") => Protocol::HttpJson,
            Some(other) => anyhow::bail!(
                "OTEL_EXPORTER_OTLP_PROTOCOL={other}: ravi exports over OTLP/HTTP; use \
                 http/protobuf (the default) or http/json"
            ),
        };
        let mut builder = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(protocol);
        if let Some(url) = endpoint {
            builder = builder.with_endpoint(traces_url(url)?);
        }
        let exporter = builder
            .build()
            .map_err(|e| anyhow::anyhow!("the OTLP exporter could not be set up: {e}"))?;
        let service = env("OTEL_SERVICE_NAME").unwrap_or_else(|| "ravi".into());
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(
                opentelemetry_sdk::Resource::builder()
                    .with_service_name(service)
                    .build(),
            )
            .build();
        opentelemetry::global::set_text_map_propagator(
            opentelemetry_sdk::propagation::TraceContextPropagator::new(),
        );
        Ok(Some(provider))
    }

    /// `--otlp-endpoint`: a collector's base URL gets the traces path (`/v1/traces`), a URL
    /// with a path is used as given.
    pub(super) fn traces_url(url: &str) -> anyhow::Result<String> {
        let (scheme, rest) = url.split_once("://").ok_or_else(|| {
            anyhow::anyhow!(
                "--otlp-endpoint `{url}`: expected an http(s) URL such as http://127.0.0.1:4318"
            )
        })?;
        if scheme != "http" && scheme != "https" {
            anyhow::bail!("--otlp-endpoint `{url}`: expected an http or https URL");
        }
        Ok(match rest.find('/') {
            Some(i) if !rest[i..].trim_end_matches('/').is_empty() => url.to_owned(),
            _ => format!("{}/v1/traces", url.trim_end_matches('/')),
        })
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn endpoints_get_the_traces_path() {
            assert_eq!(
                super::traces_url("http://c:4318").unwrap(),
                "http://c:4318/v1/traces"
            );
            assert_eq!(
                super::traces_url("http://c:4318/").unwrap(),
                "http://c:4318/v1/traces"
            );
            assert_eq!(
                super::traces_url("https://c/otlp/v1/traces").unwrap(),
                "https://c/otlp/v1/traces"
            );
            assert!(super::traces_url("c:4318").is_err());
        }
    }
}
