//! Who may join a multi-node group: the address its servers listen on and the shared secret
//! every connection proves (the handshake is in the vendored burn-communication,
//! `src/websocket/security.rs`). docs/SECURITY.md has the trust model.

use std::io::Read;
use std::net::{IpAddr, ToSocketAddrs};
use std::path::Path;

use burn_communication::websocket::security::{configure, Security};

use crate::{Result, TrainError};

/// The environment variable holding the group's secret when no `secret_file` is given.
pub const SECRET_ENV: &str = "SIGNFLOW_GROUP_SECRET";

/// The shortest secret accepted.
pub const MIN_SECRET_BYTES: usize = 16;

/// The group's secret: from `secret_file` (when set) or [`SECRET_ENV`]. Without either, an error
/// unless `insecure`, which warns and returns `None`.
pub fn group_secret(secret_file: &str, insecure: bool) -> Result<Option<Vec<u8>>> {
    let (from, secret) = if !secret_file.trim().is_empty() {
        let path = Path::new(secret_file.trim());
        let mut bytes = Vec::new();
        std::fs::File::open(path)
            .and_then(|f| f.take(4096).read_to_end(&mut bytes))
            .map_err(|e| TrainError::io(path, e))?;
        (path.display().to_string(), Some(bytes))
    } else {
        (format!("${SECRET_ENV}"), std::env::var_os(SECRET_ENV).map(|v| v.into_encoded_bytes()))
    };
    match secret.map(|s| s.trim_ascii().to_vec()) {
        Some(s) if s.len() >= MIN_SECRET_BYTES => Ok(Some(s)),
        Some(s) => Err(TrainError::Invalid(format!(
            "the group secret in {from} has {} bytes; use at least {MIN_SECRET_BYTES} (e.g. the output of `openssl rand -hex 32`)",
            s.len()
        ))),
        None if insecure => {
            eprintln!(
                "warning: distributed.insecure = true: the group runs without a secret, so any machine that reaches its ports can join it, read the weights and add to the gradients"
            );
            Ok(None)
        }
        None => Err(TrainError::Invalid(format!(
            "a multi-node group needs a shared secret: set distributed.secret_file (a file only you can read) or {SECRET_ENV}, the same on every machine and for `trainer orchestrator`; distributed.insecure = true runs without one on a network where every machine is trusted"
        ))),
    }
}

/// The address `host` (an IP address or a name) resolves to, for listening on.
pub fn bind_address(host: &str, key: &str) -> Result<IpAddr> {
    let host = host.trim();
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Ok(ip);
    }
    (host, 0).to_socket_addrs().ok().and_then(|mut a| a.next()).map(|a| a.ip()).ok_or_else(|| {
        TrainError::Invalid(format!("{key} = {host:?}: not an IP address or a name this machine resolves"))
    })
}

/// Set this process's servers and clients up for a group: listen on `bind` only, and prove
/// `secret` on every connection.
pub fn secure(bind: IpAddr, secret: Option<Vec<u8>>) {
    configure(Security { bind, secret, ..Security::default() });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_group_needs_a_long_enough_secret_or_an_explicit_insecure() {
        let tmp = tempfile::tempdir().unwrap();
        let file = tmp.path().join("secret");
        std::fs::write(&file, "  0123456789abcdef0123\n").unwrap();
        let f = file.display().to_string();
        assert_eq!(group_secret(&f, false).unwrap().unwrap(), b"0123456789abcdef0123");
        std::fs::write(&file, "short\n").unwrap();
        let e = group_secret(&f, false).unwrap_err().to_string();
        assert!(e.contains("has 5 bytes; use at least 16") && e.contains("secret"), "{e}");
        let e = group_secret(&tmp.path().join("none").display().to_string(), true).unwrap_err().to_string();
        assert!(e.contains("none"), "{e}");
        assert_eq!(bind_address(" 127.0.0.1 ", "k").unwrap().to_string(), "127.0.0.1");
        assert!(bind_address("localhost", "k").unwrap().is_loopback());
        assert!(bind_address("no such host.invalid", "distributed.node_address")
            .unwrap_err()
            .to_string()
            .contains("node_address"));
    }
}
