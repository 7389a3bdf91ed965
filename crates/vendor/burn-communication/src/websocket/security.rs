//! SignFlow patch: who may talk to this process's websocket servers, and what it says to others.
//!
//! Upstream listens on every interface and accepts any peer. Here a process first calls
//! [`configure`]: servers bind to [`Security::bind`], messages are bounded by
//! [`Security::max_message_bytes`], and with a [`Security::secret`] every connection starts with
//! a mutual challenge-response in which both sides prove they hold the secret without sending it:
//!
//! 1. server -> client: a random 32-byte nonce `s`;
//! 2. client -> server: its own nonce `c` and `HMAC-SHA256(secret, "client" | s | c)`;
//! 3. server -> client: `HMAC-SHA256(secret, "server" | s | c)`.
//!
//! A peer that fails (or says nothing for 10 s) is disconnected before a single message of the
//! protocol is read, and the server writes a line naming its address to stderr. The handshake
//! authenticates the peer; it does not encrypt or sign the traffic that follows.

use std::net::{IpAddr, Ipv4Addr};
use std::sync::RwLock;
use std::time::Duration;

use hmac::{Hmac, Mac};
use sha2::Sha256;

/// Bytes of each side's nonce.
pub const NONCE_BYTES: usize = 32;
/// Bytes of an HMAC-SHA256 tag.
pub const TAG_BYTES: usize = 32;
/// How long a handshake step may take.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The settings of this process's websocket servers and clients.
#[derive(Clone)]
pub struct Security {
    /// The address servers listen on.
    pub bind: IpAddr,
    /// The group's shared secret; `None` accepts any peer.
    pub secret: Option<Vec<u8>>,
    /// The largest message (and frame) read from a peer.
    pub max_message_bytes: usize,
}

impl std::fmt::Debug for Security {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Security")
            .field("bind", &self.bind)
            .field("secret", &self.secret.as_ref().map(|_| "<set>"))
            .field("max_message_bytes", &self.max_message_bytes)
            .finish()
    }
}

impl Default for Security {
    /// Loopback only, no secret, messages up to 1 GiB.
    fn default() -> Self {
        Self { bind: IpAddr::V4(Ipv4Addr::LOCALHOST), secret: None, max_message_bytes: 1 << 30 }
    }
}

static SECURITY: RwLock<Option<Security>> = RwLock::new(None);

/// Set this process's [`Security`] (before starting servers or connecting).
pub fn configure(security: Security) {
    *SECURITY.write().unwrap_or_else(|p| p.into_inner()) = Some(security);
}

/// The current settings ([`Security::default`] until [`configure`] is called).
pub fn current() -> Security {
    SECURITY.read().unwrap_or_else(|p| p.into_inner()).clone().unwrap_or_default()
}

/// A fresh random nonce.
pub(crate) fn nonce() -> [u8; NONCE_BYTES] {
    let mut n = [0u8; NONCE_BYTES];
    getrandom::fill(&mut n).expect("the OS random source is available");
    n
}

fn mac(secret: &[u8], role: &[u8], server: &[u8], client: &[u8]) -> Hmac<Sha256> {
    let mut m = Hmac::<Sha256>::new_from_slice(secret).expect("HMAC takes keys of any length");
    m.update(b"signflow-group-v1 ");
    m.update(role);
    m.update(server);
    m.update(client);
    m
}

/// The tag `role` ("client" or "server") sends for the two nonces.
pub(crate) fn tag(secret: &[u8], role: &[u8], server: &[u8], client: &[u8]) -> Vec<u8> {
    mac(secret, role, server, client).finalize().into_bytes().to_vec()
}

/// Whether `got` is the tag of `role` for the two nonces (compared in constant time).
pub(crate) fn check(secret: &[u8], role: &[u8], server: &[u8], client: &[u8], got: &[u8]) -> bool {
    mac(secret, role, server, client).verify_slice(got).is_ok()
}
