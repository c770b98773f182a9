//! Exchanges with scripted backends over real sockets on 127.0.0.1.

use std::future::poll_fn;
use std::net::SocketAddr;
use std::time::Duration;

use http::Request;
use http_body_util::{BodyExt, Empty, StreamBody};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use super::*;
use crate::proxy::body::BoxError;
use crate::proxy::upstream::balance::Endpoints;

/// A backend that, on one connection, reads each request head and answers it with the next of
/// `answers`. After the last it closes its side, reads whatever else comes until the client
/// closes (so unread bytes never turn the close into a reset), and returns the request heads.
async fn scripted(
    answers: Vec<&'static str>,
) -> (SocketAddr, tokio::task::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("address");
    let task = tokio::spawn(async move {
        let (mut s, _) = listener.accept().await.expect("accept");
        let mut heads = Vec::new();
        for answer in answers {
            let mut head = Vec::new();
            let mut byte = [0u8; 1];
            while !head.ends_with(b"\r\n\r\n") {
                if s.read(&mut byte).await.expect("read") == 0 {
                    return heads;
                }
                head.push(byte[0]);
            }
            heads.push(String::from_utf8(head).expect("text"));
            s.write_all(answer.as_bytes()).await.expect("write");
        }
        let _ = s.shutdown().await;
        let _ = s.read_to_end(&mut Vec::new()).await;
        heads
    });
    (addr, task)
}

async fn connect(addr: SocketAddr) -> Connection {
    let s = TcpStream::connect(addr).await.expect("connect");
    Connection::new(UpstreamIo::Plain(s), Endpoints::default().connection(addr))
}

fn get(path: &str) -> Request<UpstreamBody> {
    Request::get(path)
        .header("host", "site")
        .body(Empty::new().map_err(|never| match never {}).boxed_unsync())
        .expect("request")
}

/// Makes one exchange: the head and the whole body, and the connection if reusable.
async fn exchange(
    conn: Connection,
    req: Request<UpstreamBody>,
) -> Result<(Head, Vec<u8>, Option<Connection>), H1Error> {
    let (parts, body) = req.into_parts();
    let mut ex = Exchange::start(conn, &parts, body);
    let head = poll_fn(|cx| ex.poll_head(cx)).await?;
    let mut body = Vec::new();
    while let Some(data) = poll_fn(|cx| ex.poll_data(cx)).await {
        body.extend_from_slice(&data?);
    }
    Ok((head, body, ex.finish()))
}

#[tokio::test]
async fn informational_answers_are_skipped_and_chunked_bodies_keep_the_connection() {
    let (addr, backend) = scripted(vec![
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
         3\r\nabc\r\n0\r\n\r\n",
        "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\ngone",
    ])
    .await;
    let (head, body, conn) = exchange(connect(addr).await, get("/a?x=1"))
        .await
        .expect("first");
    assert_eq!(head.status, 200);
    assert_eq!(body, b"abc");
    let conn = conn.expect("kept: the chunked body ended cleanly");
    let (head, body, conn) = exchange(conn, get("/b")).await.expect("second");
    assert_eq!(head.status, 404);
    assert_eq!(body, b"gone");
    assert!(conn.is_some());
    drop(conn);
    let heads = backend.await.expect("backend");
    assert_eq!(
        heads,
        [
            "GET /a?x=1 HTTP/1.1\r\nhost: site\r\n\r\n",
            "GET /b HTTP/1.1\r\nhost: site\r\n\r\n"
        ]
    );
}

#[tokio::test]
async fn a_body_ended_by_the_close_is_read_whole_and_its_connection_not_kept() {
    let (addr, _backend) = scripted(vec!["HTTP/1.1 200 OK\r\n\r\nuntil the end"]).await;
    let (head, body, conn) = exchange(connect(addr).await, get("/"))
        .await
        .expect("exchange");
    assert_eq!(head.status, 200);
    assert_eq!(body, b"until the end");
    assert!(conn.is_none());
}

#[tokio::test]
async fn malformed_and_truncated_answers_are_errors() {
    let (addr, _backend) = scripted(vec!["HTTP/1.1 2OO OK\r\n\r\n"]).await;
    let got = exchange(connect(addr).await, get("/")).await;
    assert!(matches!(got, Err(H1Error::Head(_))), "{:?}", got.err());

    let (addr, _backend) =
        scripted(vec!["HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort"]).await;
    let got = exchange(connect(addr).await, get("/")).await;
    assert!(
        matches!(got, Err(H1Error::IncompleteBody)),
        "{:?}",
        got.err()
    );

    let (addr, _backend) = scripted(vec![]).await;
    let got = exchange(connect(addr).await, get("/")).await;
    assert!(
        matches!(got, Err(H1Error::ClosedBeforeHead | H1Error::Io(_))),
        "{:?}",
        got.err()
    );
}

#[tokio::test]
async fn an_answer_before_the_request_body_ended_arrives_and_the_connection_is_closed() {
    let (addr, _backend) = scripted(vec![
        "HTTP/1.1 413 Content Too Large\r\nContent-Length: 3\r\n\r\nbig",
    ])
    .await;
    // A client body that has sent one piece and then nothing more.
    let (tx, rx) = tokio::sync::mpsc::channel::<Result<http_body::Frame<Bytes>, BoxError>>(1);
    tx.send(Ok(http_body::Frame::data(Bytes::from_static(b"part"))))
        .await
        .expect("queued");
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|frame| (frame, rx))
    });
    let req = Request::post("/upload")
        .header("host", "site")
        .body(StreamBody::new(stream).boxed_unsync())
        .expect("request");
    let got = tokio::time::timeout(Duration::from_secs(5), exchange(connect(addr).await, req))
        .await
        .expect("the answer does not wait for the body");
    let (head, body, conn) = got.expect("exchange");
    assert_eq!(head.status, 413);
    assert_eq!(body, b"big");
    assert!(conn.is_none(), "the request was not written whole");
    drop(tx);
}

#[tokio::test]
async fn a_failing_client_body_fails_the_exchange_as_the_clients_fault() {
    let (addr, _backend) = scripted(vec!["HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"]).await;
    let failing = futures_util::stream::iter(vec![Err::<http_body::Frame<Bytes>, BoxError>(
        "client reset".into(),
    )]);
    let req = Request::post("/")
        .header("host", "site")
        .body(StreamBody::new(failing).boxed_unsync())
        .expect("request");
    let got = exchange(connect(addr).await, req).await;
    assert!(
        matches!(&got, Err(H1Error::RequestBody(e)) if e.to_string() == "client reset"),
        "{:?}",
        got.err()
    );
}
