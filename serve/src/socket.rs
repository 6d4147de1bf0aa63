//! A connection's byte stream and message loop.
//!
//! pgwire sends every backend message with a flush, so a prepared statement's answer
//! (BindComplete, RowDescription, DataRow, CommandComplete, ReadyForQuery) went out as
//! five `send(2)`s, each waking the client, where PostgreSQL sends one. [`Coalescing`]
//! keeps the messages after which the server certainly goes on talking (or the client
//! has more to say first) in a buffer, and writes them out with the next message that
//! ends a turn (ReadyForQuery, an error, an authentication request...), when the
//! buffer grows past [`FLUSH_BYTES`], or before the loop waits for the client's next
//! bytes (a client that sent Execute and Flush, say, and waits for CommandComplete).
//!
//! A large result's data rows skip pgwire's encoder and [`Unpack`]: a statement's
//! handler queues their packs, framed already, on the connection's [`Lane`], and
//! [`Coalescing`] writes them to the socket as they are (pgwire's encode and the
//! unframing each copied every byte of the result once more: ~11% of a host's CPU
//! for a 20 MB result).
//!
//! [`process`] is pgwire's connection loop over that stream: SSL and GSS encryption
//! requests refused with `N`, then each message handed to pgwire's `process_message`.

use std::collections::VecDeque;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::{Buf, Bytes};
use futures::{SinkExt, StreamExt};
use pgwire::api::{
    ClientInfo, DefaultClient, ErrorHandler, PgWireConnectionState, PgWireServerHandlers,
};
use pgwire::messages::response::{GssEncResponse, SslResponse};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage, SslNegotiationMetaMessage};
use pgwire::tokio::server::{process_error, process_message, PgWireMessageServerCodec};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_util::codec::Framed;

/// Buffered bytes past which a deferred flush happens anyway (a large result streams).
const FLUSH_BYTES: usize = 64 << 10;

/// Buffered bytes past which a write waits for the socket to take some.
pub(crate) const MAX_BUFFERED: usize = 256 << 10;

/// How long a client has to finish its startup (as pgwire gives it).
const STARTUP_TIMEOUT: Duration = Duration::from_secs(60);

/// Backend messages after which the server sends more without waiting for the client,
/// or the client sends more before it waits for an answer: ParseComplete,
/// BindComplete, CloseComplete, NoData, ParameterDescription, RowDescription, DataRow,
/// CommandComplete, PortalSuspended, CopyOutResponse, CopyData and CopyDone.
fn deferrable(message_type: u8) -> bool {
    matches!(
        message_type,
        b'1' | b'2' | b'3' | b'n' | b't' | b'T' | b'D' | b'C' | b's' | b'H' | b'd' | b'c'
    )
}

/// The connection's transport: the TCP stream, or TLS over it.
enum Io {
    Plain(TcpStream),
    Tls(Box<tokio_rustls::server::TlsStream<TcpStream>>),
    /// Taken for a TLS handshake.
    Gone,
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the stream went to TLS")
}

impl AsyncRead for Io {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Io::Tls(s) => Pin::new(s).poll_read(cx, buf),
            Io::Gone => Poll::Ready(Err(gone())),
        }
    }
}

impl AsyncWrite for Io {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Io::Tls(s) => Pin::new(s).poll_write(cx, buf),
            Io::Gone => Poll::Ready(Err(gone())),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_flush(cx),
            Io::Tls(s) => Pin::new(s).poll_flush(cx),
            Io::Gone => Poll::Ready(Err(gone())),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Io::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Io::Tls(s) => Pin::new(s).poll_shutdown(cx),
            Io::Gone => Poll::Ready(Err(gone())),
        }
    }
}

/// Whole messages a handler sends past pgwire (see the module documentation): they
/// go out after every byte pgwire was handed before them (the handler flushes pgwire
/// first) and before any handed after (a write waits until the lane is empty).
#[derive(Debug, Default)]
pub(crate) struct Lane(Mutex<Queued>);

#[derive(Debug, Default)]
struct Queued {
    chunks: VecDeque<Bytes>,
    bytes: usize,
}

impl Lane {
    /// Queues `messages` (whole, framed messages); the bytes queued now.
    pub(crate) fn push(&self, messages: Bytes) -> usize {
        let mut q = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        q.bytes += messages.len();
        q.chunks.push_back(messages);
        q.bytes
    }

    fn bytes(&self) -> usize {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).bytes
    }
}

/// See the module documentation.
pub(crate) struct Coalescing {
    io: Io,
    /// Bytes not yet written: `out[sent..]`, then the lane's.
    out: Vec<u8>,
    sent: usize,
    lane: Arc<Lane>,
    /// The messages passed into `out` (packs of data rows unframed: see `packed`).
    messages: Unpack,
    /// Before the startup message: the answers to encryption requests are single
    /// bytes, not messages, and pass as they are.
    negotiating: bool,
}

impl Coalescing {
    pub(crate) fn new(io: TcpStream, lane: Arc<Lane>) -> Self {
        let mut plain = Self::over(Io::Plain(io), lane);
        plain.negotiating = true;
        plain
    }

    /// Over a stream whose encryption is settled.
    fn over(io: Io, lane: Arc<Lane>) -> Self {
        Self {
            io,
            out: Vec::new(),
            sent: 0,
            lane,
            messages: Unpack::default(),
            negotiating: false,
        }
    }

    /// The transport, for a TLS handshake (nothing is buffered during negotiation).
    fn into_io(mut self) -> (Io, Arc<Lane>) {
        let io = std::mem::replace(&mut self.io, Io::Gone);
        (io, Arc::clone(&self.lane))
    }

    fn pending(&self) -> usize {
        self.out.len() - self.sent + self.lane.bytes()
    }

    /// Writes out the buffer, then the lane; `Pending` until the socket took all.
    fn poll_drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        fn wrote(n: io::Result<usize>) -> io::Result<usize> {
            match n {
                Ok(0) => Err(io::ErrorKind::WriteZero.into()),
                other => other,
            }
        }
        while self.sent < self.out.len() {
            match Pin::new(&mut self.io).poll_write(cx, &self.out[self.sent..]) {
                Poll::Ready(n) => self.sent += wrote(n)?,
                Poll::Pending => return Poll::Pending,
            }
        }
        // All out: start the buffer over.
        self.out.clear();
        self.sent = 0;
        let mut guard = self.lane.0.lock().unwrap_or_else(PoisonError::into_inner);
        let lane = &mut *guard;
        while let Some(chunk) = lane.chunks.front_mut() {
            match Pin::new(&mut self.io).poll_write(cx, chunk) {
                Poll::Ready(n) => {
                    let n = wrote(n)?;
                    chunk.advance(n);
                    lane.bytes -= n;
                    if chunk.is_empty() {
                        lane.chunks.pop_front();
                    }
                }
                Poll::Pending => return Poll::Pending,
            }
        }
        Poll::Ready(Ok(()))
    }
}

impl AsyncRead for Coalescing {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        // About to wait for the client: everything it is owed goes out first.
        if this.pending() > 0 {
            match this.poll_drain(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other,
            }
        }
        Pin::new(&mut this.io).poll_read(cx, buf)
    }
}

impl AsyncWrite for Coalescing {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        // What a handler queued goes before these bytes: a little of it joins the
        // buffer (a point lookup's row and its ReadyForQuery in one `send`), more
        // goes out first.
        let queued = this.lane.bytes();
        if queued > 0 && this.pending() < FLUSH_BYTES {
            let mut lane = this.lane.0.lock().unwrap_or_else(PoisonError::into_inner);
            for chunk in lane.chunks.drain(..) {
                this.out.extend_from_slice(&chunk);
            }
            lane.bytes = 0;
        } else if queued > 0 {
            match this.poll_drain(cx) {
                Poll::Ready(Ok(())) => {}
                other => return other.map(|r| r.map(|()| 0)),
            }
        }
        if this.pending() >= MAX_BUFFERED {
            match this.poll_drain(cx) {
                Poll::Ready(Ok(())) => {}
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Pending if this.pending() >= MAX_BUFFERED => return Poll::Pending,
                Poll::Pending => {}
            }
        }
        if this.negotiating {
            this.out.extend_from_slice(buf);
        } else {
            this.messages.feed(buf, &mut this.out);
        }
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let whole = this.messages.whole() && !this.negotiating;
        if whole && deferrable(this.messages.last_type()) && this.pending() < FLUSH_BYTES {
            return Poll::Ready(Ok(()));
        }
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.io).poll_flush(cx),
            other => other,
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        match this.poll_drain(cx) {
            Poll::Ready(Ok(())) => Pin::new(&mut this.io).poll_shutdown(cx),
            other => other,
        }
    }
}

impl Drop for Coalescing {
    fn drop(&mut self) {
        // The loop ended with something still owed (it never is: every turn ends with
        // a message that flushes); what the socket takes at once goes.
        if let (Io::Plain(io), true) = (&self.io, self.pending() > 0) {
            let lane = self.lane.0.lock().unwrap_or_else(PoisonError::into_inner);
            let mut owed =
                std::iter::once(&self.out[self.sent..]).chain(lane.chunks.iter().map(|c| &c[..]));
            let _ = owed.try_for_each(|b| match io.try_write(b) {
                Ok(n) if n == b.len() => Ok(()),
                _ => Err(()),
            });
        }
    }
}

use crate::handlers::{Handlers, Statement};
use crate::packed::Unpack;

type Socket = Framed<Coalescing, PgWireMessageServerCodec<Statement>>;

/// Serves one client connection with `handlers`, as pgwire's `process_socket` does
/// without TLS, over a [`Coalescing`] stream.
///
/// `idle` resolves (with the idle time) once the session has waited idle for too long
/// (`--idle-timeout`): the client then gets PostgreSQL's FATAL 57P05 and the connection
/// closes, and `process` returns that time.
pub(crate) async fn process(
    socket: TcpStream,
    peer: SocketAddr,
    handlers: Handlers,
    idle: impl std::future::Future<Output = Duration>,
    tls: Option<crate::tls::Acceptor>,
) -> io::Result<Option<Duration>> {
    let startup = tokio::time::sleep(STARTUP_TIMEOUT);
    tokio::pin!(startup);
    let codec = PgWireMessageServerCodec::new(DefaultClient::new(peer, false));
    let framed = Framed::new(Coalescing::new(socket, Arc::clone(&handlers.0.lane)), codec);
    let negotiated = tokio::select! {
        _ = &mut startup => return Ok(None),
        negotiated = negotiate(framed, peer, tls.as_ref()) => negotiated?,
    };
    let Some(mut framed) = negotiated else {
        return Ok(None);
    };
    framed.set_state(PgWireConnectionState::AwaitingStartup);
    tokio::pin!(idle);
    serve_messages(&mut framed, &mut startup, handlers, &mut idle).await
}

/// Answers the client's encryption requests until the startup message comes: an
/// SSLRequest with `S` and a TLS handshake where TLS is configured, else `N`; a GSS
/// encryption request with `N`. A client that opens with a TLS handshake (PostgreSQL
/// 17's direct TLS) gets one where TLS is configured and must name the `postgresql`
/// protocol (ALPN). `None`: the connection ends here.
async fn negotiate(
    mut framed: Socket,
    peer: SocketAddr,
    tls: Option<&crate::tls::Acceptor>,
) -> io::Result<Option<Socket>> {
    let mut first = [0u8; 1];
    let Io::Plain(tcp) = &framed.get_ref().io else {
        return Ok(None);
    };
    if tcp.peek(&mut first).await? > 0 && first[0] == 0x16 {
        return match tls {
            Some(tls) => secure(framed, peer, tls, true).await.map(Some),
            None => Ok(None),
        };
    }
    let mut ssl_done = false;
    let mut gss_done = false;
    while !(ssl_done && gss_done) {
        match framed.next().await {
            Some(Ok(PgWireFrontendMessage::SslNegotiation(
                SslNegotiationMetaMessage::PostgresSsl(_),
            ))) => {
                if let Some(tls) = tls {
                    framed
                        .send(PgWireBackendMessage::SslResponse(SslResponse::Accept))
                        .await?;
                    // Bytes sent after the request, before the handshake, would be
                    // read as if encrypted (CVE-2021-23222): refused.
                    if !framed.read_buffer().is_empty() {
                        return Err(io::Error::new(
                            io::ErrorKind::InvalidData,
                            "unencrypted data after an SSLRequest",
                        ));
                    }
                    return secure(framed, peer, tls, false).await.map(Some);
                }
                framed
                    .send(PgWireBackendMessage::SslResponse(SslResponse::Refuse))
                    .await?;
                ssl_done = true;
            }
            Some(Ok(PgWireFrontendMessage::SslNegotiation(
                SslNegotiationMetaMessage::PostgresGss(_),
            ))) => {
                framed
                    .send(PgWireBackendMessage::GssEncResponse(GssEncResponse::Refuse))
                    .await?;
                gss_done = true;
            }
            // The startup message (left for the loop) or a broken connection.
            _ => break,
        }
    }
    framed.get_mut().negotiating = false;
    Ok(Some(framed))
}

/// The TLS handshake on `framed`'s TCP stream; the protocol goes on inside it.
async fn secure(
    framed: Socket,
    peer: SocketAddr,
    tls: &crate::tls::Acceptor,
    direct: bool,
) -> io::Result<Socket> {
    let parts = framed.into_parts();
    let (Io::Plain(tcp), lane) = parts.io.into_io() else {
        return Err(io::Error::other("TLS asked for twice"));
    };
    let stream = tls.0.accept(tcp).await?;
    if direct && stream.get_ref().1.alpn_protocol() != Some(b"postgresql".as_slice()) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            "a direct TLS connection without the postgresql ALPN protocol",
        ));
    }
    let codec = PgWireMessageServerCodec::new(DefaultClient::new(peer, true));
    Ok(Framed::new(
        Coalescing::over(Io::Tls(Box::new(stream)), lane),
        codec,
    ))
}

/// pgwire's message loop (its `process_socket_messages`): each message to
/// `process_message`, an error answered (and the connection closed after a FATAL one),
/// Terminate or a cancel request's connection ending it.
async fn serve_messages(
    framed: &mut Socket,
    startup: &mut Pin<&mut tokio::time::Sleep>,
    handlers: Handlers,
    idle: &mut Pin<&mut impl std::future::Future<Output = Duration>>,
) -> io::Result<Option<Duration>> {
    let startup_handler = handlers.startup_handler();
    let simple = handlers.simple_query_handler();
    let extended = handlers.extended();
    let copy = handlers.copy_handler();
    let cancel = handlers.cancel_handler();
    let errors = handlers.error_handler();
    loop {
        let starting = matches!(
            framed.state(),
            PgWireConnectionState::AwaitingStartup
                | PgWireConnectionState::AuthenticationInProgress
        );
        let message = if starting {
            tokio::select! {
                _ = &mut *startup => None,
                message = framed.next() => message,
            }
        } else {
            tokio::select! {
                message = framed.next() => message,
                idle = idle.as_mut() => {
                    let fatal = pgwire::error::ErrorInfo::new(
                        "FATAL".into(),
                        "57P05".into(),
                        "terminating connection due to idle-session timeout".into(),
                    );
                    // The client may be gone already: closing is what matters.
                    let _ = framed
                        .send(PgWireBackendMessage::ErrorResponse(fatal.into()))
                        .await;
                    return Ok(Some(idle));
                }
            }
        };
        let Some(Ok(message)) = message else {
            return Ok(None);
        };
        if matches!(message, PgWireFrontendMessage::Terminate(_)) {
            return Ok(None);
        }
        let extended_query = match framed.state() {
            PgWireConnectionState::CopyInProgress(extended) => extended,
            _ => message.is_extended_query(),
        };
        let cancel_request = matches!(message, PgWireFrontendMessage::CancelRequest(_));
        let processed = process_message(
            message,
            framed,
            startup_handler.clone(),
            simple.clone(),
            extended.clone(),
            copy.clone(),
            cancel.clone(),
        )
        .await;
        if let Err(mut e) = processed {
            errors.on_error(framed, &mut e);
            let fatal = e.is_fatal();
            process_error(framed, e, extended_query).await?;
            if fatal {
                return Ok(None);
            }
        }
        if cancel_request {
            return Ok(None);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Read;

    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;
    use crate::packed::message;

    /// What the peer has received so far, waiting at most `wait` for the first byte.
    fn received(peer: &mut std::net::TcpStream, wait: Duration) -> Vec<u8> {
        peer.set_read_timeout(Some(wait)).expect("timeout");
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        loop {
            match peer.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => {
                    got.extend_from_slice(&buf[..n]);
                    peer.set_read_timeout(Some(Duration::from_millis(50)))
                        .expect("timeout");
                }
                Err(_) => break,
            }
        }
        got
    }

    /// A current-thread runtime and a connected pair of sockets: the peer's end, and
    /// the server's (non-blocking, for tokio).
    fn connected() -> (
        tokio::runtime::Runtime,
        std::net::TcpStream,
        std::net::TcpStream,
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("runtime");
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        let peer =
            std::net::TcpStream::connect(listener.local_addr().expect("addr")).expect("connect");
        let (server, _) = listener.accept().expect("accept");
        server.set_nonblocking(true).expect("nonblocking");
        (runtime, peer, server)
    }

    /// A turn's messages reach the client in one piece at ReadyForQuery; what is
    /// deferred goes out before the server waits to read, and a large result streams.
    #[test]
    fn messages_wait_for_the_end_of_the_turn_or_a_read() {
        let (runtime, mut peer, server) = connected();
        runtime.block_on(async {
            let lane = Arc::new(Lane::default());
            let mut s = Coalescing::new(
                TcpStream::from_std(server).expect("tokio stream"),
                Arc::clone(&lane),
            );
            // Before the startup message: an encryption request's one-byte answer
            // leaves at once, as it is.
            s.write_all(b"N").await.expect("write");
            s.flush().await.expect("flush");
            assert_eq!(received(&mut peer, Duration::from_secs(5)), b"N");
            s.negotiating = false;
            let bind = message(b'2', b"");
            one_turn(&mut s, &mut peer, None).await;
            // A small result on the lane waits for the end of the turn with the rest:
            // a point lookup's row, CommandComplete and ReadyForQuery in one `send`.
            one_turn(&mut s, &mut peer, Some(&lane)).await;

            // Deferred, then the server reads: the client gets it first.
            s.write_all(&bind).await.expect("write");
            s.flush().await.expect("flush");
            std::io::Write::write_all(&mut peer, b"x").expect("client writes");
            let mut one = [0u8; 1];
            s.read_exact(&mut one).await.expect("read");
            assert_eq!(received(&mut peer, Duration::from_secs(5)), bind);

            // A result larger than the flush threshold leaves before its end.
            let big = message(b'D', &vec![b'a'; FLUSH_BYTES]);
            s.write_all(&big).await.expect("write");
            s.flush().await.expect("flush");
            assert_eq!(received(&mut peer, Duration::from_secs(5)).len(), big.len());

            // An error is never held back.
            let error = message(b'E', b"SERROR\0\0");
            s.write_all(&error).await.expect("write");
            s.flush().await.expect("flush");
            assert_eq!(received(&mut peer, Duration::from_secs(5)), error);
        });
    }

    /// What a handler queues on the lane goes after what was written before it and
    /// before what is written after it, whole, however much the socket takes at a time.
    #[test]
    fn the_lane_goes_between_what_was_written_before_and_after_it() {
        let (runtime, mut peer, server) = connected();
        let bind = message(b'2', b"");
        // Packs larger than the socket takes at once, each of its own bytes, and a
        // small one last (it stays queued: the turn is not over).
        let packs: Vec<Vec<u8>> = [400_000, 400_000, 1_000]
            .into_iter()
            .enumerate()
            .map(|(k, rows)| {
                let row = |i: usize| message(b'D', &[0, 1, 0, 0, 0, 3, k as u8, i as u8, b'x']);
                (0..rows).flat_map(row).collect()
            })
            .collect();
        let done = message(b'C', b"SELECT 801000\0");
        let ready = message(b'Z', b"I");
        let expected: Vec<u8> = [&bind[..], &packs.concat(), &done, &ready].concat();
        let want = expected.len();
        let reader = std::thread::spawn(move || {
            let mut got = vec![0u8; want];
            peer.read_exact(&mut got).expect("the whole reply");
            got
        });
        let lane = Arc::new(Lane::default());
        runtime.block_on(async {
            let mut s = Coalescing::new(
                TcpStream::from_std(server).expect("tokio stream"),
                Arc::clone(&lane),
            );
            s.negotiating = false;
            s.write_all(&bind).await.expect("write");
            s.flush().await.expect("flush");
            for pack in &packs {
                lane.push(Bytes::from(pack.clone()));
                s.flush().await.expect("flush");
            }
            s.write_all(&done).await.expect("write");
            s.write_all(&ready).await.expect("write");
            s.flush().await.expect("flush");
        });
        let got = reader.join().expect("reader");
        assert!(got == expected, "the bytes arrived out of order");
        assert_eq!(lane.bytes(), 0);
    }

    /// Writes a turn (BindComplete, a data row, CommandComplete; the row on `lane`
    /// where given, as a handler queues it) and checks that nothing reaches the peer
    /// before its ReadyForQuery, and all of it in order after.
    async fn one_turn(s: &mut Coalescing, peer: &mut std::net::TcpStream, lane: Option<&Lane>) {
        let bind = message(b'2', b"");
        let row = message(b'D', &[0, 1, 0, 0, 0, 1, b'7']);
        let done = message(b'C', b"SELECT 1\0");
        let ready = message(b'Z', b"I");
        s.write_all(&bind).await.expect("write");
        s.flush().await.expect("flush");
        match lane {
            Some(lane) => {
                lane.push(Bytes::from(row.clone()));
            }
            None => s.write_all(&row).await.expect("write"),
        }
        s.flush().await.expect("flush");
        s.write_all(&done).await.expect("write");
        s.flush().await.expect("flush");
        assert!(
            received(peer, Duration::from_millis(100)).is_empty(),
            "nothing before the turn ends"
        );
        s.write_all(&ready).await.expect("write");
        s.flush().await.expect("flush");
        let all: Vec<u8> = [bind.as_slice(), &row, &done, &ready].concat();
        assert_eq!(received(peer, Duration::from_secs(5)), all);
    }
}
