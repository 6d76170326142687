//! A local OTLP trace receiver that decodes what it gets: OTLP/HTTP with protobuf
//! bodies at `/v1/traces`, and OTLP/gRPC (HTTP/2 cleartext, the `TraceService/Export`
//! method, length-prefixed messages, `grpc-status` in the trailers), as a collector
//! speaks them.

use bytes::{Buf, Bytes};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper::{Request, Response};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use prost::Message;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

/// One span as received.
#[derive(Debug, Clone, PartialEq)]
pub struct ReceivedSpan {
    pub name: String,
    /// Hex, as W3C `traceparent` writes them.
    pub trace_id: String,
    pub span_id: String,
    /// Empty for a root span.
    pub parent_span_id: String,
    /// String forms of the attributes.
    pub attributes: HashMap<String, String>,
    /// The resource's `service.name`.
    pub service: String,
    /// How it came: `http` or `grpc`.
    pub via: &'static str,
}

/// The receiver, serving from a thread of its own.
pub struct OtlpReceiver {
    /// `http://127.0.0.1:PORT`: the base URL for either protocol.
    pub url: String,
    spans: Arc<Mutex<Vec<ReceivedSpan>>>,
    _thread: std::thread::JoinHandle<()>,
}

const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";

impl OtlpReceiver {
    pub fn start() -> OtlpReceiver {
        let spans: Arc<Mutex<Vec<ReceivedSpan>>> = Arc::default();
        let kept = spans.clone();
        let (addr, thread) = crate::listen_in_thread(move |listener| async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let kept = kept.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        let kept = kept.clone();
                        async move { Ok::<_, std::convert::Infallible>(answer(req, &kept).await) }
                    });
                    let io = hyper_util::rt::TokioIo::new(stream);
                    let builder = hyper_util::server::conn::auto::Builder::new(
                        hyper_util::rt::TokioExecutor::new(),
                    );
                    let _ = builder.serve_connection(io, service).await;
                });
            }
        });
        OtlpReceiver {
            url: format!("http://{addr}"),
            spans,
            _thread: thread,
        }
    }

    /// Every span received so far.
    pub fn spans(&self) -> Vec<ReceivedSpan> {
        self.spans.lock().map(|s| s.clone()).unwrap_or_default()
    }
}

type Answer = Response<http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>>;

async fn answer(req: Request<Incoming>, kept: &Mutex<Vec<ReceivedSpan>>) -> Answer {
    let path = req.uri().path().to_owned();
    let Ok(body) = req.into_body().collect().await.map(|b| b.to_bytes()) else {
        return status(400);
    };
    match path.as_str() {
        "/v1/traces" => match ExportTraceServiceRequest::decode(body) {
            Ok(export) => {
                keep(kept, export, "http");
                let mut r = Response::new(Full::new(Bytes::new()).boxed());
                r.headers_mut().insert(
                    "content-type",
                    hyper::header::HeaderValue::from_static("application/x-protobuf"),
                );
                r
            }
            Err(_) => status(400),
        },
        GRPC_PATH => {
            match grpc_message(body).and_then(|m| ExportTraceServiceRequest::decode(m).ok()) {
                Some(export) => {
                    keep(kept, export, "grpc");
                    grpc_ok()
                }
                None => status(400),
            }
        }
        _ => status(404),
    }
}

fn status(code: u16) -> Answer {
    let mut r = Response::new(Full::new(Bytes::new()).boxed());
    *r.status_mut() = hyper::StatusCode::from_u16(code).unwrap_or(hyper::StatusCode::BAD_REQUEST);
    r
}

/// The one message of a gRPC request body (uncompressed, length-prefixed).
fn grpc_message(mut body: Bytes) -> Option<Bytes> {
    if body.len() < 5 || body[0] != 0 {
        return None;
    }
    body.advance(1);
    let len = body.get_u32() as usize;
    (body.len() == len).then_some(body)
}

/// An empty `ExportTraceServiceResponse`, then `grpc-status: 0` in the trailers.
fn grpc_ok() -> Answer {
    let mut trailers = hyper::HeaderMap::new();
    trailers.insert("grpc-status", hyper::header::HeaderValue::from_static("0"));
    let frames = vec![
        Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from_static(&[0, 0, 0, 0, 0]))),
        Ok(Frame::trailers(trailers)),
    ];
    let body = StreamBody::new(futures_util::stream::iter(frames)).boxed();
    let mut r = Response::new(body);
    r.headers_mut().insert(
        "content-type",
        hyper::header::HeaderValue::from_static("application/grpc"),
    );
    r
}

fn keep(kept: &Mutex<Vec<ReceivedSpan>>, export: ExportTraceServiceRequest, via: &'static str) {
    use opentelemetry_proto::tonic::common::v1::any_value::Value as V;
    let text = |v: &Option<opentelemetry_proto::tonic::common::v1::AnyValue>| match v
        .as_ref()
        .and_then(|a| a.value.clone())
    {
        Some(V::StringValue(s)) => s,
        Some(V::IntValue(i)) => i.to_string(),
        Some(V::BoolValue(b)) => b.to_string(),
        Some(V::DoubleValue(d)) => d.to_string(),
        other => format!("{other:?}"),
    };
    let hex = |b: &[u8]| b.iter().map(|x| format!("{x:02x}")).collect::<String>();
    let Ok(mut all) = kept.lock() else {
        return;
    };
    for resource_spans in export.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|r| r.attributes.iter())
            .find(|a| a.key == "service.name")
            .map(|a| text(&a.value))
            .unwrap_or_default();
        for scope in resource_spans.scope_spans {
            for span in scope.spans {
                all.push(ReceivedSpan {
                    name: span.name,
                    trace_id: hex(&span.trace_id),
                    span_id: hex(&span.span_id),
                    parent_span_id: hex(&span.parent_span_id),
                    attributes: span
                        .attributes
                        .iter()
                        .map(|a| (a.key.clone(), text(&a.value)))
                        .collect(),
                    service: service.clone(),
                    via,
                });
            }
        }
    }
}
