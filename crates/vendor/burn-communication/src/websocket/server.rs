use std::net::SocketAddr;

use crate::{
    base::{CommunicationChannel, CommunicationError, Message, ProtocolServer},
    util::init_logging,
    websocket::security::{self, HANDSHAKE_TIMEOUT, NONCE_BYTES, TAG_BYTES},
};
use axum::{
    Router,
    extract::{
        ConnectInfo, State, WebSocketUpgrade,
        ws::{self, WebSocket},
    },
    routing::get,
};
use futures::StreamExt;

#[derive(Clone, Debug)]
pub struct WsServer {
    port: u16,
    router: Router<()>,
}

pub struct WsServerChannel {
    inner: WebSocket,
}

impl WsServer {
    pub fn new(port: u16) -> Self {
        Self {
            port,
            router: Router::new(),
        }
    }
}

impl ProtocolServer for WsServer {
    type Channel = WsServerChannel;
    type Error = WsServerError;

    async fn serve<F>(self, shutdown: F) -> Result<(), Self::Error>
    where
        F: Future<Output = ()> + Send + 'static,
    {
        init_logging();

        // SignFlow patch: the configured address (loopback unless configured), not every interface.
        let address = SocketAddr::new(security::current().bind, self.port);
        log::info!("Starting server {address}");

        let listener = tokio::net::TcpListener::bind(address).await?;

        axum::serve(
            listener,
            self.router
                .into_make_service_with_connect_info::<SocketAddr>(),
        )
        .with_graceful_shutdown(shutdown)
        .await?;

        Ok(())
    }

    fn route<C, Fut>(mut self, path: &str, callback: C) -> Self
    where
        C: FnOnce(WsServerChannel) -> Fut + Clone + Send + Sync + 'static,
        Fut: Future<Output = ()> + Send + 'static,
    {
        // Format path: should start with a /
        let path = if path.starts_with("/") {
            path.to_owned()
        } else {
            format!("/{path}")
        };

        // SignFlow patch: bounded messages, and with a group secret a peer proves it holds it
        // before the route sees a single message (websocket/security.rs).
        let route = path.clone();
        let method = get(
            move |ws: WebSocketUpgrade, ConnectInfo(peer): ConnectInfo<SocketAddr>, _: State<()>| async move {
                let sec = security::current();
                ws.max_message_size(sec.max_message_bytes)
                    .max_frame_size(sec.max_message_bytes)
                    .on_upgrade(async move |mut socket| {
                        if let Some(secret) = &sec.secret {
                            if let Err(why) = server_handshake(&mut socket, secret).await {
                                eprintln!("warning: refused a connection from {peer} to {route}: {why}");
                                let _ = socket.send(ws::Message::Close(None)).await;
                                return;
                            }
                        }
                        callback(WsServerChannel { inner: socket }).await;
                    })
            },
        );

        self.router = self.router.route(&path, method);

        self
    }
}

/// The server's side of the handshake of websocket/security.rs.
async fn server_handshake(socket: &mut WebSocket, secret: &[u8]) -> Result<(), String> {
    let s = security::nonce();
    socket
        .send(ws::Message::Binary(s.to_vec().into()))
        .await
        .map_err(|e| format!("cannot send the challenge: {e}"))?;
    let reply = tokio::time::timeout(HANDSHAKE_TIMEOUT, socket.next())
        .await
        .map_err(|_| format!("no answer to the challenge within {} s", HANDSHAKE_TIMEOUT.as_secs()))?;
    let data = match reply {
        Some(Ok(ws::Message::Binary(d))) => d,
        Some(Ok(_)) => return Err("answered the challenge with a non-binary message".into()),
        Some(Err(e)) => return Err(format!("connection failed during the challenge: {e}")),
        None => return Err("closed the connection during the challenge".into()),
    };
    if data.len() != NONCE_BYTES + TAG_BYTES {
        return Err(format!(
            "answered the challenge with {} bytes, not a nonce and a tag (it runs without the group's secret)",
            data.len()
        ));
    }
    let (c, t) = data.split_at(NONCE_BYTES);
    if !security::check(secret, b"client", &s, c, t) {
        return Err("does not hold the group's secret".into());
    }
    socket
        .send(ws::Message::Binary(security::tag(secret, b"server", &s, c).into()))
        .await
        .map_err(|e| format!("cannot send the answer: {e}"))
}

impl CommunicationChannel for WsServerChannel {
    type Error = WsServerError;

    async fn send(&mut self, message: Message) -> Result<(), WsServerError> {
        self.inner.send(ws::Message::Binary(message.data)).await?;

        Ok(())
    }

    async fn recv(&mut self) -> Result<Option<Message>, WsServerError> {
        match self.inner.next().await {
            Some(next) => match next {
                Ok(ws::Message::Binary(data)) => Ok(Some(Message { data })),
                Ok(ws::Message::Close(_close_frame)) => Ok(None),
                Err(err) => Err(WsServerError::Axum(err)),
                msg => Err(WsServerError::UnknownMessage(format!("{msg:?}"))),
            },
            None => todo!(),
        }
    }

    async fn close(&mut self) -> Result<(), WsServerError> {
        let reason = "Peer is closing".to_string();

        self.inner
            .send(ws::Message::Close(Some(ws::CloseFrame {
                code: 1000, // code: Normal
                reason: reason.clone().into(),
            })))
            .await?;

        Ok(())
    }
}

#[derive(Debug)]
pub enum WsServerError {
    Io(std::io::Error),
    Axum(axum::Error),
    UnknownMessage(String),
    Other(String),
}

impl CommunicationError for WsServerError {}

impl From<std::io::Error> for WsServerError {
    fn from(err: std::io::Error) -> Self {
        Self::Io(err)
    }
}

impl From<axum::Error> for WsServerError {
    fn from(err: axum::Error) -> Self {
        Self::Axum(err)
    }
}
