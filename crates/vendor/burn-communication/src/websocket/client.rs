use crate::{
    base::{Address, CommunicationChannel, CommunicationError, Message, ProtocolClient},
    websocket::base::parse_ws_address,
    websocket::security::{self, HANDSHAKE_TIMEOUT, NONCE_BYTES, TAG_BYTES},
};
use burn_std::future::DynFut;
use futures::{SinkExt, StreamExt};
use tokio::net::TcpStream;
use tokio_tungstenite::{
    MaybeTlsStream, WebSocketStream, connect_async_with_config,
    tungstenite::{self, protocol::WebSocketConfig},
};

#[derive(Clone)]
pub struct WsClient;

impl ProtocolClient for WsClient {
    type Channel = WsClientChannel;
    type Error = WsClientError;

    fn connect(address: Address, route: &str) -> DynFut<Option<WsClientChannel>> {
        Box::pin(connect_ws(address, route.to_owned()))
    }
}

/// Open a new WebSocket connection to the address
///
/// SignFlow patch: retried for up to 10 s. Another node learns this node's address from the
/// orchestrator and may connect before this node's server (spawned on registration) listens;
/// upstream tried once and the caller panicked with "Failed to connect".
async fn connect_ws(address: Address, route: String) -> Option<WsClientChannel> {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    loop {
        match connect_ws_once(address.clone(), route.clone()).await {
            Ok(c) => return Some(c),
            // SignFlow patch: a refused handshake is final (and said once), not retried.
            Err(Failure::Refused(why)) => {
                eprintln!("error: {}/{route}: {why}", address.inner);
                return None;
            }
            Err(Failure::Unreachable) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(50)).await
            }
            Err(Failure::Unreachable) => return None,
        }
    }
}

enum Failure {
    /// Nothing listens yet (or the connection failed): worth another try.
    Unreachable,
    /// The peer answered but the group's handshake failed.
    Refused(String),
}

async fn connect_ws_once(address: Address, route: String) -> Result<WsClientChannel, Failure> {
    let address = parse_ws_address(address).map_err(|_| Failure::Unreachable)?;
    let address = format!("{address}/{route}");
    // SignFlow patch: messages bounded by the configured size (upstream: unbounded).
    let sec = security::current();
    let (mut stream, _) = connect_async_with_config(
        address.clone(),
        Some(
            WebSocketConfig::default()
                .write_buffer_size(0)
                .max_message_size(Some(sec.max_message_bytes))
                .max_frame_size(Some(sec.max_message_bytes))
                .accept_unmasked_frames(true)
                .read_buffer_size(64 * 1024), // 64 KiB (previous default)
        ),
        true,
    )
    .await
    .map_err(|_| Failure::Unreachable)?;
    if let Some(secret) = &sec.secret {
        client_handshake(&mut stream, secret).await.map_err(Failure::Refused)?;
    }
    Ok(WsClientChannel { inner: stream })
}

/// The next message of the handshake.
async fn handshake_message(stream: &mut WebSocketStream<MaybeTlsStream<TcpStream>>) -> Result<Vec<u8>, String> {
    match tokio::time::timeout(HANDSHAKE_TIMEOUT, stream.next()).await {
        Err(_) => Err(format!(
            "the server sent no challenge within {} s (it runs without the group's secret, or is not a SignFlow node)",
            HANDSHAKE_TIMEOUT.as_secs()
        )),
        Ok(Some(Ok(tungstenite::Message::Binary(d)))) => Ok(d.to_vec()),
        Ok(Some(Ok(tungstenite::Message::Close(_)))) | Ok(None) => {
            Err("the server closed the connection: it does not accept this group's secret".into())
        }
        Ok(Some(Ok(_))) => Err("the server answered with a non-binary message".into()),
        Ok(Some(Err(e))) => Err(format!("the connection failed during the handshake: {e}")),
    }
}

/// The client's side of the handshake of websocket/security.rs.
async fn client_handshake(
    stream: &mut WebSocketStream<MaybeTlsStream<TcpStream>>,
    secret: &[u8],
) -> Result<(), String> {
    let s = handshake_message(stream).await?;
    if s.len() != NONCE_BYTES {
        return Err(format!("the server's challenge has {} bytes, not {NONCE_BYTES}", s.len()));
    }
    let c = security::nonce();
    let answer = [&c[..], &security::tag(secret, b"client", &s, &c)].concat();
    let sent = stream.send(tungstenite::Message::Binary(answer.into())).await;
    sent.map_err(|e| format!("cannot answer the challenge: {e}"))?;
    let t = handshake_message(stream).await?;
    if t.len() != TAG_BYTES || !security::check(secret, b"server", &s, &c, &t) {
        return Err("the server does not hold the group's secret".into());
    }
    Ok(())
}

pub struct WsClientChannel {
    inner: WebSocketStream<MaybeTlsStream<TcpStream>>,
}

impl CommunicationChannel for WsClientChannel {
    type Error = WsClientError;

    async fn send(&mut self, msg: Message) -> Result<(), WsClientError> {
        self.inner
            .send(tungstenite::Message::Binary(msg.data))
            .await?;

        Ok(())
    }

    async fn recv(&mut self) -> Result<Option<Message>, WsClientError> {
        match self.inner.next().await {
            Some(next) => match next {
                Ok(tungstenite::Message::Binary(data)) => Ok(Some(Message { data })),
                Ok(tungstenite::Message::Close(_close_frame)) => Ok(None),
                Err(err) => Err(WsClientError::Tungstenite(err)),
                msg => Err(WsClientError::UnknownMessage(format!("{msg:?}"))),
            },
            None => todo!(),
        }
    }

    async fn close(&mut self) -> Result<(), WsClientError> {
        let reason = "Peer is closing".to_string();

        self.inner
            .send(tungstenite::Message::Close(Some(
                tungstenite::protocol::CloseFrame {
                    code: tungstenite::protocol::frame::coding::CloseCode::Normal,
                    reason: reason.clone().into(),
                },
            )))
            .await?;

        Ok(())
    }
}

#[derive(Debug)]
pub enum WsClientError {
    Io(std::io::Error),
    Tungstenite(tungstenite::Error),
    UnknownMessage(String),
    Other(String),
}
impl CommunicationError for WsClientError {}

impl From<std::io::Error> for WsClientError {
    fn from(err: std::io::Error) -> Self {
        Self::Io(err)
    }
}

impl From<tungstenite::Error> for WsClientError {
    fn from(err: tungstenite::Error) -> Self {
        Self::Tungstenite(err)
    }
}
