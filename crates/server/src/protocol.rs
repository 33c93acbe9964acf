//! The session protocol, the same over WebSocket (JSON text frames) and gRPC (protobuf).
//!
//! Client → server:
//!
//! * `{"type":"speak","chunks":N}`: the user spoke; the agent streams N response chunks
//!   (each burning the configured CPU) and then `done`. A `speak` while a response is
//!   streaming replaces it.
//! * `{"type":"interrupt"}`: barge-in: stop the current response, keep the session.
//! * `{"type":"idle"}`: a heartbeat; nothing to do but note the activity.
//! * `{"type":"bye"}`: end the session cleanly (`Completed`), as a close frame does.
//!
//! Unknown fields are ignored (newer clients may send more); unknown types are errors.
//!
//! Server → client: `{"type":"chunk","seq":i}`, `{"type":"done","chunks":N}`,
//! `{"type":"interrupted","sent":i}`, `{"type":"error","message":"…"}`.

use serde::{Deserialize, Serialize};

/// Largest `chunks` a `speak` may ask for.
pub const MAX_CHUNKS: u32 = 10_000;

/// A frame from the client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ClientFrame {
    /// Start a response of `chunks` chunks.
    Speak {
        /// Chunks to stream, 1 ..= [`MAX_CHUNKS`].
        chunks: u32,
    },
    /// Stop the current response.
    Interrupt,
    /// Heartbeat.
    Idle,
    /// End the session.
    Bye,
}

/// A frame to the client.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ServerFrame {
    /// One response chunk.
    Chunk {
        /// 0-based position in the response.
        seq: u32,
    },
    /// The response is complete.
    Done {
        /// Chunks sent.
        chunks: u32,
    },
    /// The response was interrupted after `sent` chunks.
    Interrupted {
        /// Chunks sent before the interrupt.
        sent: u32,
    },
    /// The last frame was rejected; the message says why.
    Error {
        /// What was wrong.
        message: String,
    },
}

impl ClientFrame {
    /// Parses a JSON text frame, with an error a client developer can act on.
    ///
    /// ```
    /// use livecount_server::protocol::ClientFrame;
    ///
    /// assert_eq!(ClientFrame::parse(r#"{"type":"speak","chunks":3}"#), Ok(ClientFrame::Speak { chunks: 3 }));
    /// assert!(ClientFrame::parse("hello").unwrap_err().contains("not a frame"));
    /// assert!(ClientFrame::parse(r#"{"type":"speak","chunks":0}"#).unwrap_err().contains("chunks"));
    /// ```
    pub fn parse(text: &str) -> Result<Self, String> {
        let frame: ClientFrame = serde_json::from_str(text).map_err(|e| {
            format!("not a frame ({e}); expected {{\"type\":\"speak\",\"chunks\":N}}, interrupt, idle or bye")
        })?;
        frame.validate()?;
        Ok(frame)
    }

    /// Range checks shared by both transports.
    pub fn validate(self) -> Result<Self, String> {
        match self {
            ClientFrame::Speak { chunks } if chunks == 0 || chunks > MAX_CHUNKS => Err(format!(
                "speak.chunks = {chunks} is out of range (allowed 1..={MAX_CHUNKS})"
            )),
            frame => Ok(frame),
        }
    }
}

impl ServerFrame {
    /// The JSON text of this frame.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("server frames always serialise")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_round_trip_and_reject_garbage() {
        for f in [
            ClientFrame::Speak { chunks: 2 },
            ClientFrame::Interrupt,
            ClientFrame::Idle,
            ClientFrame::Bye,
        ] {
            let text = serde_json::to_string(&f).unwrap();
            assert_eq!(ClientFrame::parse(&text), Ok(f));
        }
        for bad in ["", "{}", r#"{"type":"dance"}"#, r#"{"type":"speak"}"#] {
            assert!(ClientFrame::parse(bad).is_err(), "{bad:?} accepted");
        }
        assert_eq!(
            ServerFrame::Done { chunks: 2 }.to_json(),
            r#"{"type":"done","chunks":2}"#
        );
    }
}
