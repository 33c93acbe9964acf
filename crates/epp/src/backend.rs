//! [`BackendSpec`]: one backend the picker places sessions on, and where its load reports
//! come from.

use std::fmt;
use std::net::SocketAddr;
use std::str::FromStr;

/// Where a backend's load reports come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Reports {
    /// Its ORCA out-of-band stream (`xds.service.orca.v3.OpenRcaService`) at this address.
    Orca(SocketAddr),
    /// Its `/load` JSON, polled over HTTP/1.1 at this address.
    Load(SocketAddr),
}

/// One backend: the address Envoy connects to for a session (the endpoint the picker names
/// in `x-gateway-destination-endpoint`), and where its reports come from.
///
/// Written `ENDPOINT[,orca=ADDR|,load=ADDR]`; without a source, the reports are the ORCA
/// stream on the endpoint itself (a gRPC backend serves both on one port):
///
/// ```
/// use livecount_epp::{BackendSpec, Reports};
///
/// let grpc: BackendSpec = "10.0.0.1:50051".parse()?;
/// assert_eq!(grpc.reports, Reports::Orca("10.0.0.1:50051".parse()?));
/// let ws: BackendSpec = "10.0.0.1:8080,load=10.0.0.1:8080".parse()?;
/// assert_eq!(ws.reports, Reports::Load("10.0.0.1:8080".parse()?));
/// assert_eq!(ws.to_string(), "10.0.0.1:8080,load=10.0.0.1:8080");
/// assert!("10.0.0.1:8080,smoke=1.2.3.4:5".parse::<BackendSpec>().is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct BackendSpec {
    /// Where Envoy sends the sessions placed here: an `ip:port` in its cluster.
    pub endpoint: SocketAddr,
    /// Where the picker reads the backend's load.
    pub reports: Reports,
}

impl BackendSpec {
    /// A backend at `endpoint` reporting over ORCA on the same address.
    pub fn orca(endpoint: SocketAddr) -> Self {
        BackendSpec {
            endpoint,
            reports: Reports::Orca(endpoint),
        }
    }
}

/// Why a backend could not be read from its text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BackendSpecError(String);

impl fmt::Display for BackendSpecError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for BackendSpecError {}

fn address(text: &str, what: &str) -> Result<SocketAddr, BackendSpecError> {
    text.trim().parse().map_err(|_| {
        BackendSpecError(format!(
            "{what} `{text}` is not an ip:port (e.g. 10.0.0.1:50051; names are not resolved)"
        ))
    })
}

impl FromStr for BackendSpec {
    type Err = BackendSpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let mut parts = text.split(',');
        let endpoint = address(parts.next().unwrap_or_default(), "the endpoint")?;
        let reports = match parts.next() {
            None => Reports::Orca(endpoint),
            Some(source) => match source.trim().split_once('=') {
                Some(("orca", addr)) => Reports::Orca(address(addr, "the ORCA address")?),
                Some(("load", addr)) => Reports::Load(address(addr, "the /load address")?),
                _ => {
                    return Err(BackendSpecError(format!(
                        "`{source}`: a backend's reports are `orca=ip:port` or `load=ip:port`"
                    )));
                }
            },
        };
        if let Some(extra) = parts.next() {
            return Err(BackendSpecError(format!(
                "`{extra}`: a backend is ENDPOINT[,orca=ADDR|,load=ADDR], one source"
            )));
        }
        Ok(BackendSpec { endpoint, reports })
    }
}

impl fmt::Display for BackendSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.reports {
            Reports::Orca(addr) if addr == self.endpoint => write!(f, "{}", self.endpoint),
            Reports::Orca(addr) => write!(f, "{},orca={addr}", self.endpoint),
            Reports::Load(addr) => write!(f, "{},load={addr}", self.endpoint),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_form_round_trips_and_bad_ones_say_why() {
        for text in [
            "127.0.0.1:1",
            "127.0.0.1:1,orca=127.0.0.1:2",
            "127.0.0.1:1,load=127.0.0.1:3",
            "[::1]:4,load=[::1]:5",
        ] {
            let spec: BackendSpec = text.parse().unwrap();
            assert_eq!(spec.to_string(), text);
        }
        let orca_here: BackendSpec = "127.0.0.1:1,orca=127.0.0.1:1".parse().unwrap();
        assert_eq!(orca_here, BackendSpec::orca("127.0.0.1:1".parse().unwrap()));
        for (bad, says) in [
            ("", "the endpoint"),
            ("localhost:80", "names are not resolved"),
            ("127.0.0.1:1,orca=x", "the ORCA address"),
            ("127.0.0.1:1,load=", "the /load address"),
            ("127.0.0.1:1,prometheus=127.0.0.1:2", "orca=ip:port"),
            (
                "127.0.0.1:1,load=127.0.0.1:2,orca=127.0.0.1:3",
                "one source",
            ),
        ] {
            let err = bad.parse::<BackendSpec>().unwrap_err().to_string();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
