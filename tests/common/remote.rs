//! A server process the test started (`turnstile demo` or `serve`), reached
//! over HTTP by a plain client: its signals, a new thread, a stored thread.

use serde_json::{json, Value};

/// Starts panva's `oidc-provider` (npm) through `script` in
/// tests/interop with `args`, and reads the issuer it prints as its first
/// line (`{"issuer": …}`); the rest of its output is drained.
pub async fn oidc_provider(script: &str, args: &[String]) -> (tokio::process::Child, String) {
    use tokio::io::{AsyncBufReadExt, BufReader};
    let dir = super::needs::interop_dir();
    super::needs::npm_file(&dir, "oidc-provider/package.json");
    let mut child = tokio::process::Command::new(super::needs::node())
        .arg(dir.join(script))
        .args(args)
        .current_dir(&dir)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .expect("node runs the provider");
    let mut out = BufReader::new(child.stdout.take().unwrap()).lines();
    let line = tokio::time::timeout(std::time::Duration::from_secs(30), out.next_line())
        .await
        .expect("the provider starts")
        .unwrap()
        .expect("the provider prints its issuer");
    tokio::spawn(async move { while let Ok(Some(_)) = out.next_line().await {} });
    let issuer = serde_json::from_str::<Value>(&line).unwrap()["issuer"]
        .as_str()
        .unwrap()
        .to_string();
    (child, issuer)
}

/// Sends SIGTERM to the process `pid` (a drain, ADR 0038).
pub fn sigterm(pid: u32) {
    let pid = i32::try_from(pid).expect("a pid fits an i32");
    // SAFETY: kill(2) on a pid this test spawned and still holds.
    let sent = unsafe { libc::kill(pid, libc::SIGTERM) };
    assert_eq!(sent, 0, "SIGTERM to {pid}");
}

/// `POST {base}/v1/threads` (with `bearer`, if any): the new thread's id.
pub async fn new_thread(http: &reqwest::Client, base: &str, bearer: Option<&str>) -> String {
    let mut req = http.post(format!("{base}/v1/threads")).json(&json!({}));
    if let Some(token) = bearer {
        req = req.bearer_auth(token);
    }
    let r = req.send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201, "a thread is created");
    r.json::<Value>().await.unwrap()["thread_id"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `GET {base}/v1/threads/{id}`, as JSON.
pub async fn thread_json(http: &reqwest::Client, base: &str, id: &str) -> Value {
    let r = http
        .get(format!("{base}/v1/threads/{id}"))
        .send()
        .await
        .unwrap();
    r.json().await.unwrap()
}
