//! Config directory hazards with traffic flowing: a route file rewritten in place must never
//! make its valid routes vanish.

use std::io::Write;
use std::time::Duration;

use crate::standalone::{gateway, route, service, write, Load, Standalone, HTTP_PORT};
use crate::support::echo::start_echo;

/// The routes file of generation `gen`: the route the clients use, plus ten routes whose
/// paths change with every generation.
fn routes(gen: usize) -> String {
    let mut out = route("stable", "stable.example", "/", "web");
    for i in 0..10 {
        out.push_str(&route(
            &format!("r{i}"),
            "other.example",
            &format!("/g{gen}/r{i}"),
            "web",
        ));
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_place_rewrites_under_load_fail_no_request() {
    let web = start_echo("web").await;
    let dir = tempfile::tempdir().expect("temp dir");
    write(
        dir.path(),
        "base.yaml",
        &format!("{}{}", gateway(false), service("web", &[web.addr])),
    );
    write(dir.path(), "routes.yaml", &routes(0));
    let stack = Standalone::start(dir).await;
    stack.wait_status("stable.example", "/", 200).await;
    let load = Load::start(
        stack.addr(HTTP_PORT),
        &[("stable.example", "/a"), ("stable.example", "/b")],
    );
    let path = stack.dir.path().join("routes.yaml");
    for gen in 1..=8 {
        let text = routes(gen);
        let (head, tail) = text.split_at(text.len() / 2);
        if gen % 2 == 1 {
            // One handle: truncate, write half, pause, write the rest, close.
            let mut f = std::fs::File::create(&path).expect("truncate");
            tokio::time::sleep(Duration::from_millis(20)).await;
            f.write_all(head.as_bytes()).expect("write");
            tokio::time::sleep(Duration::from_millis(60)).await;
            f.write_all(tail.as_bytes()).expect("write");
        } else {
            // As a shell does it: `: > f`, then two appends, each closing the file.
            std::fs::File::create(&path).expect("truncate");
            for (part, pause) in [(head, 20), (tail, 0)] {
                tokio::time::sleep(Duration::from_millis(pause)).await;
                let mut f = std::fs::OpenOptions::new()
                    .append(true)
                    .open(&path)
                    .expect("open");
                f.write_all(part.as_bytes()).expect("write");
            }
        }
        stack
            .wait_status("other.example", &format!("/g{gen}/r9"), 200)
            .await;
    }
    let (sent, failed, failures) = load.finish().await;
    println!("in-place rewrites: {sent} requests, {failed} failed");
    assert!(sent > 0);
    assert_eq!(failed, 0, "{failures:#?}");
    stack.stop().await;
}
