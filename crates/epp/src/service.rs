//! [`EndpointPicker`]: the Endpoint Picker Protocol as a tonic `ext_proc` service.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use futures_util::{Stream, StreamExt, future, stream};
use prost_types::value::Kind;
use prost_types::{Struct, Value};
use tonic::{Request, Response, Status, Streaming};

use crate::generated::envoy::config::core::v3::header_value_option::HeaderAppendAction;
use crate::generated::envoy::config::core::v3::{
    HeaderMap, HeaderValue, HeaderValueOption, Metadata,
};
use crate::generated::envoy::service::ext_proc::v3::external_processor_server::{
    ExternalProcessor, ExternalProcessorServer,
};
use crate::generated::envoy::service::ext_proc::v3::{
    BodyResponse, CommonResponse, GrpcStatus, HeaderMutation, HeadersResponse, HttpHeaders,
    ImmediateResponse, ProcessingRequest, ProcessingResponse, TrailersResponse, processing_request,
    processing_response,
};
use crate::generated::envoy::r#type::v3::{HttpStatus, StatusCode};
use crate::picker::Picker;

/// The header (and the metadata key) naming the chosen endpoints, `ip:port[,ip:port…]`.
pub const DESTINATION: &str = "x-gateway-destination-endpoint";
/// The dynamic-metadata namespace the answer's endpoints go in.
pub const METADATA_NAMESPACE: &str = "envoy.lb";
/// The namespace of the gateway's subset hint (the endpoints it allows for this request).
pub const SUBSET_NAMESPACE: &str = "envoy.lb.subset_hint";
/// The subset hint's key: a list of `ip:port` (or one comma-separated string).
pub const SUBSET_KEY: &str = "x-gateway-destination-endpoint-subset";
/// The reason a refusal gives, in Envoy's access log (`%RESPONSE_CODE_DETAILS%`).
pub const NO_ROOM_DETAILS: &str = "livecount_epp_no_room";

/// gRPC's `UNAVAILABLE`: what a gRPC client sees of a refusal (it may retry).
const GRPC_UNAVAILABLE: u32 = 14;

/// The default wait for a stream's first message.
pub const DEFAULT_FIRST_MESSAGE_TIMEOUT: Duration = Duration::from_secs(10);
/// The default `Retry-After` of a refusal.
pub const DEFAULT_RETRY_AFTER: Duration = Duration::from_secs(1);

/// The responses of one `Process` stream.
pub type Responses = Pin<Box<dyn Stream<Item = Result<ProcessingResponse, Status>> + Send>>;

/// An Envoy external processor that places each new request (a session: a gRPC stream, a
/// WebSocket upgrade) with a [`Picker`], as the Gateway API Inference Extension's Endpoint
/// Picker Protocol has it:
///
/// * **On the request headers** it answers with the chosen endpoint and its fallbacks,
///   `ip:port[,ip:port…]`, both in the header [`DESTINATION`] (set, replacing any the client
///   sent) and in dynamic metadata under [`METADATA_NAMESPACE`] (`envoy.lb`), key
///   [`DESTINATION`]: Envoy's `override_host` load-balancing policy reads the metadata,
///   an `ORIGINAL_DST` cluster the header. The two never differ.
/// * **When no backend can take it** (each is at its hard limit, draining or unknown) it
///   answers with a local reply: 503 with `Retry-After` (whole seconds), and for a gRPC
///   request (`content-type: application/grpc…`) the gRPC status `UNAVAILABLE`.
/// * **The subset hint**: a request whose metadata carries [`SUBSET_NAMESPACE`] /
///   [`SUBSET_KEY`] is placed only on those endpoints, or refused when none is eligible.
/// * **Headers only.** It needs nothing past the request headers, so Envoy is configured
///   to send only them (`request_header_mode: SEND`, everything else skipped, no body
///   buffering): gRPC streams and WebSocket upgrades pass through untouched. Any other
///   phase Envoy sends is answered with an empty answer of its kind. After its answer the
///   picker ends the stream with status OK, which lets the request go on without it, so no
///   session holds a picker stream; a stream whose first message does not come within
///   the [first-message timeout](EndpointPicker::first_message_timeout) ends with
///   `DEADLINE_EXCEEDED`.
#[derive(Debug, Clone)]
pub struct EndpointPicker {
    picker: Arc<Picker>,
    first_message_timeout: Duration,
    retry_after: Duration,
}

impl EndpointPicker {
    /// The service over `picker`: first-message timeout
    /// [`DEFAULT_FIRST_MESSAGE_TIMEOUT`], `Retry-After` [`DEFAULT_RETRY_AFTER`].
    pub fn new(picker: Arc<Picker>) -> Self {
        EndpointPicker {
            picker,
            first_message_timeout: DEFAULT_FIRST_MESSAGE_TIMEOUT,
            retry_after: DEFAULT_RETRY_AFTER,
        }
    }

    /// How long a stream may wait for its first message (at least 1 ms).
    pub fn first_message_timeout(mut self, timeout: Duration) -> Self {
        self.first_message_timeout = timeout.max(Duration::from_millis(1));
        self
    }

    /// The `Retry-After` of a refusal, rounded up to whole seconds (at least 1).
    pub fn retry_after(mut self, after: Duration) -> Self {
        self.retry_after = after;
        self
    }

    /// The picker it asks.
    pub fn picker(&self) -> &Arc<Picker> {
        &self.picker
    }

    /// The service wrapped for a tonic server.
    pub fn server(self) -> ExternalProcessorServer<Self> {
        ExternalProcessorServer::new(self)
    }

    /// The answer to one message of a stream.
    ///
    /// # Errors
    ///
    /// `INVALID_ARGUMENT` for a message that names no phase.
    pub fn answer(&self, message: &ProcessingRequest) -> Result<ProcessingResponse, Status> {
        use processing_request::Request as In;
        use processing_response::Response as Out;
        let out = match &message.request {
            Some(In::RequestHeaders(headers)) => {
                return Ok(self.route(headers, message.metadata_context.as_ref()));
            }
            Some(In::ResponseHeaders(_)) => Out::ResponseHeaders(HeadersResponse::default()),
            Some(In::RequestBody(_)) => Out::RequestBody(BodyResponse::default()),
            Some(In::ResponseBody(_)) => Out::ResponseBody(BodyResponse::default()),
            Some(In::RequestTrailers(_)) => Out::RequestTrailers(TrailersResponse::default()),
            Some(In::ResponseTrailers(_)) => Out::ResponseTrailers(TrailersResponse::default()),
            None => {
                return Err(Status::invalid_argument(
                    "a ProcessingRequest without a phase",
                ));
            }
        };
        Ok(ProcessingResponse {
            response: Some(out),
            dynamic_metadata: None,
        })
    }

    /// The answer to a request's headers: where it goes, or a refusal.
    fn route(&self, headers: &HttpHeaders, metadata: Option<&Metadata>) -> ProcessingResponse {
        let subset = subset_hint(metadata);
        let pick = self.picker.pick(subset.as_deref());
        match pick.endpoints() {
            Some(list) => routed(&list),
            None => self.refusal(is_grpc(headers.headers.as_ref())),
        }
    }

    /// 503 with `Retry-After`; `UNAVAILABLE` for a gRPC request.
    fn refusal(&self, grpc: bool) -> ProcessingResponse {
        let seconds = self.retry_after.as_secs_f64().ceil().max(1.0) as u64;
        let reply = ImmediateResponse {
            status: Some(HttpStatus {
                code: StatusCode::ServiceUnavailable as i32,
            }),
            headers: Some(HeaderMutation {
                set_headers: vec![set_header("retry-after", &seconds.to_string())],
                remove_headers: Vec::new(),
            }),
            body: b"no backend has room for a new session".to_vec(),
            grpc_status: grpc.then_some(GrpcStatus {
                status: GRPC_UNAVAILABLE,
            }),
            details: NO_ROOM_DETAILS.to_owned(),
        };
        ProcessingResponse {
            response: Some(processing_response::Response::ImmediateResponse(reply)),
            dynamic_metadata: None,
        }
    }
}

/// The request goes on, to `endpoints`: the header set and the metadata written.
fn routed(endpoints: &str) -> ProcessingResponse {
    let common = CommonResponse {
        header_mutation: Some(HeaderMutation {
            set_headers: vec![set_header(DESTINATION, endpoints)],
            remove_headers: Vec::new(),
        }),
        ..CommonResponse::default()
    };
    let inner = Struct {
        fields: BTreeMap::from([(DESTINATION.to_owned(), string(endpoints))]),
    };
    let metadata = Struct {
        fields: BTreeMap::from([(
            METADATA_NAMESPACE.to_owned(),
            Value {
                kind: Some(Kind::StructValue(inner)),
            },
        )]),
    };
    ProcessingResponse {
        response: Some(processing_response::Response::RequestHeaders(
            HeadersResponse {
                response: Some(common),
            },
        )),
        dynamic_metadata: Some(metadata),
    }
}

fn string(s: &str) -> Value {
    Value {
        kind: Some(Kind::StringValue(s.to_owned())),
    }
}

/// A header set to `value`, replacing any of that name (Envoy takes `raw_value`).
fn set_header(key: &str, value: &str) -> HeaderValueOption {
    HeaderValueOption {
        header: Some(HeaderValue {
            key: key.to_owned(),
            value: String::new(),
            raw_value: value.as_bytes().to_vec(),
        }),
        append_action: HeaderAppendAction::OverwriteIfExistsOrAdd as i32,
        // `append` (deprecated upstream) stays unset: `append_action` says it.
        ..HeaderValueOption::default()
    }
}

/// The value of header `name` (Envoy sends it in `raw_value`; `value` is read too).
fn header<'a>(headers: Option<&'a HeaderMap>, name: &str) -> Option<&'a [u8]> {
    let h = headers?.headers.iter().find(|h| h.key == name)?;
    Some(if h.raw_value.is_empty() {
        h.value.as_bytes()
    } else {
        h.raw_value.as_slice()
    })
}

/// A gRPC request: `content-type: application/grpc`, `+proto` and the like.
fn is_grpc(headers: Option<&HeaderMap>) -> bool {
    header(headers, "content-type").is_some_and(|v| v.starts_with(b"application/grpc"))
}

/// The endpoints the gateway allows, if it says: a list of strings, or one comma-joined
/// string; an entry that is not an `ip:port` allows nothing.
fn subset_hint(metadata: Option<&Metadata>) -> Option<Vec<SocketAddr>> {
    let value = metadata?
        .filter_metadata
        .get(SUBSET_NAMESPACE)?
        .fields
        .get(SUBSET_KEY)?;
    let parse = |s: &str| {
        s.split(',')
            .filter_map(|a| a.trim().parse().ok())
            .collect::<Vec<SocketAddr>>()
    };
    Some(match &value.kind {
        Some(Kind::StringValue(s)) => parse(s),
        Some(Kind::ListValue(list)) => list
            .values
            .iter()
            .filter_map(|v| match &v.kind {
                Some(Kind::StringValue(s)) => Some(parse(s)),
                _ => None,
            })
            .flatten()
            .collect(),
        // A hint of another shape allows nothing: refuse rather than ignore it.
        _ => Vec::new(),
    })
}

#[tonic::async_trait]
impl ExternalProcessor for EndpointPicker {
    type ProcessStream = Responses;

    async fn process(
        &self,
        request: Request<Streaming<ProcessingRequest>>,
    ) -> Result<Response<Responses>, Status> {
        let mut messages = request.into_inner();
        let this = self.clone();
        let answer = async move {
            match tokio::time::timeout(this.first_message_timeout, messages.message()).await {
                Ok(Ok(Some(message))) => Some(this.answer(&message)),
                // Envoy ended the stream (or it broke) before asking: nothing to answer.
                Ok(Ok(None) | Err(_)) => None,
                Err(_) => Some(Err(Status::deadline_exceeded(format!(
                    "no message within {:?}",
                    this.first_message_timeout
                )))),
            }
        };
        // One answer, then the stream ends OK: the request goes on without the picker.
        let responses = stream::once(answer).filter_map(future::ready);
        Ok(Response::new(Box::pin(responses)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_types::ListValue;

    fn metadata(value: Kind) -> Metadata {
        let hint = Struct {
            fields: BTreeMap::from([(SUBSET_KEY.to_owned(), Value { kind: Some(value) })]),
        };
        Metadata {
            filter_metadata: [(SUBSET_NAMESPACE.to_owned(), hint)].into_iter().collect(),
        }
    }

    #[test]
    fn the_subset_hint_is_a_list_or_a_joined_string() {
        let (a, b): (SocketAddr, SocketAddr) =
            ("10.0.0.1:1".parse().unwrap(), "10.0.0.2:2".parse().unwrap());
        let joined = metadata(Kind::StringValue("10.0.0.1:1, 10.0.0.2:2".into()));
        assert_eq!(subset_hint(Some(&joined)), Some(vec![a, b]));
        let list = metadata(Kind::ListValue(ListValue {
            values: vec![string("10.0.0.2:2"), string("not an address")],
        }));
        assert_eq!(subset_hint(Some(&list)), Some(vec![b]));
        assert_eq!(
            subset_hint(Some(&metadata(Kind::BoolValue(true)))),
            Some(vec![])
        );
        assert_eq!(subset_hint(Some(&Metadata::default())), None);
        assert_eq!(subset_hint(None), None);
    }

    #[test]
    fn grpc_is_read_from_the_content_type_in_either_field() {
        let map = |key: &str, value: &str, raw: bool| HeaderMap {
            headers: vec![HeaderValue {
                key: key.into(),
                value: if raw { String::new() } else { value.into() },
                raw_value: if raw {
                    value.as_bytes().to_vec()
                } else {
                    Vec::new()
                },
            }],
        };
        assert!(is_grpc(Some(&map(
            "content-type",
            "application/grpc",
            true
        ))));
        assert!(is_grpc(Some(&map(
            "content-type",
            "application/grpc+proto",
            false
        ))));
        assert!(!is_grpc(Some(&map("content-type", "text/html", true))));
        assert!(!is_grpc(Some(&map(
            "x-content-type",
            "application/grpc",
            true
        ))));
        assert!(!is_grpc(None));
    }
}
