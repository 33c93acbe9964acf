//! Loopback ports for the processes a test or a testbed starts (agents, balancers, an
//! agent restarted on its old port): one definition for the end-to-end tests and
//! `lbtestbed`.

use std::collections::HashSet;
use std::sync::Mutex;

/// A free loopback port for a process to bind a moment later.
///
/// Chosen below the kernel's ephemeral range (`ip_local_port_range`), so no outgoing
/// connection on the machine (a driver's own, a balancer's upstream ones, `/load` polls)
/// can be given it as its local port in the meantime, as one from `bind(":0")` could: a
/// run failed so, Envoy's listener "cannot bind: Address already in use". A port is
/// handed out once per process, and only if it binds now.
///
/// ```
/// let (a, b) = (livecount_server::ports::free_port(), livecount_server::ports::free_port());
/// assert_ne!(a, b);
/// std::net::TcpListener::bind(("127.0.0.1", a)).unwrap();
/// ```
///
/// # Panics
///
/// If no port binds after 10 000 tries.
pub fn free_port() -> u16 {
    static GIVEN: Mutex<Option<HashSet<u16>>> = Mutex::new(None);
    let ephemeral = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range")
        .ok()
        .and_then(|r| r.split_whitespace().next()?.parse::<u16>().ok())
        .unwrap_or(32_768);
    let (low, high) = (10_000u16, ephemeral.max(12_000));
    let mut given = GIVEN.lock().unwrap_or_else(|e| e.into_inner());
    let given = given.get_or_insert_with(HashSet::new);
    for _ in 0..10_000 {
        let port = fastrand::u16(low..high);
        if !given.contains(&port) && std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            given.insert(port);
            return port;
        }
    }
    panic!("no free loopback port in {low}..{high} after 10 000 tries");
}
