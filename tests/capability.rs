//! The capability validator (issue 18, seeds 000/001) against hostile
//! URLs, as URL parsers really read them: WHATWG quirks (the `url` crate
//! follows the WHATWG URL standard and its test data) and the host
//! spellings of OWASP's SSRF cheat sheet. Every variant has its expected
//! verdict; only the first of each rule is a capability.
//!
//! `cargo test --test all capability:: -- --nocapture` prints the table.

use serde_json::{json, Value};
use turnstile::judge::capability::{CapabilityRule, Rejection};

const LMS: &str = "https://lms.example.com";
const LOOPBACK: &str = "http://127.0.0.1:8080";
const TEMPLATE: &str = "/api/lms/exports/{jobId}/download";
const PATH: &str = "/api/lms/exports/J42/download";

fn rule(origin: &str) -> CapabilityRule {
    CapabilityRule::new(origin, TEMPLATE, "token").expect("the rule loads")
}

/// (trusted origin, URL, verdict): `None` is a capability.
fn variants() -> Vec<(&'static str, String, Option<Rejection>)> {
    use Rejection::*;
    let lms = |rest: &str| format!("{LMS}{rest}");
    let lb = |rest: &str| format!("{LOOPBACK}{rest}");
    let ok = format!("{PATH}?token=abc123");
    vec![
        // The real one, on each rule.
        (LMS, lms(&ok), None),
        (LOOPBACK, lb(&ok), None),
        // Schemes.
        (LMS, format!("http://lms.example.com{ok}"), Some(Origin)),
        (LMS, "javascript:alert(1)".into(), Some(Scheme)),
        (
            LMS,
            "JaVaScRiPt:alert(document.domain)//https://lms.example.com".into(),
            Some(Scheme),
        ),
        (
            LMS,
            "data:text/html,<script>alert(1)</script>".into(),
            Some(Scheme),
        ),
        (LMS, format!("ftp://lms.example.com{ok}"), Some(Scheme)),
        (
            LMS,
            format!("HTTPS://lms.example.com{ok}"),
            Some(NotCanonical),
        ),
        (
            LMS,
            format!("https:lms.example.com{ok}"),
            Some(NotCanonical),
        ),
        (
            LMS,
            format!("https:///lms.example.com{ok}"),
            Some(NotCanonical),
        ),
        (LMS, format!("//lms.example.com{ok}"), Some(Unparsable)),
        (LMS, ok.clone(), Some(Unparsable)),
        // Userinfo and backslashes: `trusted@evil`.
        (
            LMS,
            format!("https://lms.example.com@evil.example{ok}"),
            Some(Userinfo),
        ),
        (
            LMS,
            format!("https://user:pw@lms.example.com{ok}"),
            Some(Userinfo),
        ),
        (
            LMS,
            format!("https://evil.example\\@lms.example.com{ok}"),
            Some(Origin),
        ),
        (
            LMS,
            "https:\\\\lms.example.com\\api\\lms\\exports\\J42\\download?token=abc123".into(),
            Some(NotCanonical),
        ),
        // Other hosts that read like the trusted one.
        (LMS, format!("https://evil.example{ok}"), Some(Origin)),
        (
            LMS,
            format!("https://lms.example.com.evil.example{ok}"),
            Some(Origin),
        ),
        (LMS, format!("https://lms.example.com.{ok}"), Some(Origin)),
        (
            LMS,
            format!("https://lms.ex\u{430}mple.com{ok}"),
            Some(Origin),
        ),
        (
            LMS,
            format!("https://LMS.EXAMPLE.COM{ok}"),
            Some(NotCanonical),
        ),
        (
            LMS,
            format!("https://lms%2Eexample.com{ok}"),
            Some(NotCanonical),
        ),
        (
            LMS,
            format!("https://lms.ex%61mple.com{ok}"),
            Some(NotCanonical),
        ),
        (
            LMS,
            format!("https://lms.exa\u{200b}mple.com{ok}"),
            Some(NotCanonical),
        ),
        // Ports.
        (
            LMS,
            format!("https://lms.example.com:8443{ok}"),
            Some(Origin),
        ),
        (
            LMS,
            format!("https://lms.example.com:443{ok}"),
            Some(NotCanonical),
        ),
        (
            LMS,
            format!("https://lms.example.com:0443{ok}"),
            Some(NotCanonical),
        ),
        (
            LMS,
            format!("https://lms.example.com:{ok}"),
            Some(NotCanonical),
        ),
        (LOOPBACK, format!("http://127.0.0.1:80{ok}"), Some(Origin)),
        (
            LOOPBACK,
            format!("https://127.0.0.1:8080{ok}"),
            Some(Origin),
        ),
        // IPv4 spellings of the trusted loopback host, and near misses.
        (
            LOOPBACK,
            format!("http://2130706433:8080{ok}"),
            Some(NotCanonical),
        ),
        (
            LOOPBACK,
            format!("http://0x7f.1:8080{ok}"),
            Some(NotCanonical),
        ),
        (
            LOOPBACK,
            format!("http://0x7f000001:8080{ok}"),
            Some(NotCanonical),
        ),
        (
            LOOPBACK,
            format!("http://0177.0.0.1:8080{ok}"),
            Some(NotCanonical),
        ),
        (
            LOOPBACK,
            format!("http://127.1:8080{ok}"),
            Some(NotCanonical),
        ),
        (
            LOOPBACK,
            format!("http://127.0.0.1.:8080{ok}"),
            Some(NotCanonical),
        ),
        (
            LOOPBACK,
            format!("http://\u{ff11}\u{ff12}\u{ff17}.\u{ff10}.\u{ff10}.\u{ff11}:8080{ok}"),
            Some(NotCanonical),
        ),
        (LOOPBACK, format!("http://127.0.0.2:8080{ok}"), Some(Origin)),
        (LOOPBACK, format!("http://localhost:8080{ok}"), Some(Origin)),
        // IPv6 forms of loopback are other hosts.
        (LOOPBACK, format!("http://[::1]:8080{ok}"), Some(Origin)),
        (
            LOOPBACK,
            format!("http://[::ffff:127.0.0.1]:8080{ok}"),
            Some(Origin),
        ),
        (
            LOOPBACK,
            format!("http://[0:0:0:0:0:ffff:7f00:1]:8080{ok}"),
            Some(Origin),
        ),
        // Paths: dot segments, encoded slashes, near misses.
        (
            LMS,
            lms("/api/lms/exports/J42/../J43/download?token=abc123"),
            Some(NotCanonical),
        ),
        (
            LMS,
            lms("/api/lms/exports/%2e%2e/download?token=abc123"),
            Some(NotCanonical),
        ),
        (
            LMS,
            lms("/api/lms/./exports/J42/download?token=abc123"),
            Some(NotCanonical),
        ),
        (
            LMS,
            lms("/api/lms/exports/J42%2Fx/download?token=abc123"),
            Some(Path),
        ),
        (
            LMS,
            lms("/api/lms/exports/%4A42/download?token=abc123"),
            Some(Path),
        ),
        (
            LMS,
            lms("/api/lms/exports//download?token=abc123"),
            Some(Path),
        ),
        (
            LMS,
            lms("/api/lms/exports/J42/download/?token=abc123"),
            Some(Path),
        ),
        (
            LMS,
            lms("/api/lms/exports/J42/download;x?token=abc123"),
            Some(Path),
        ),
        (
            LMS,
            lms("/API/lms/exports/J42/download?token=abc123"),
            Some(Path),
        ),
        (
            LMS,
            lms("/api/lms/exports/J.42/download?token=abc123"),
            Some(Path),
        ),
        (LMS, lms("/api/lms/exports/J42?token=abc123"), Some(Path)),
        (LMS, lms("/?token=abc123"), Some(Path)),
        // The token: exactly one, plain, and nothing else.
        (LMS, lms(PATH), Some(Token)),
        (LMS, lms(&format!("{PATH}?")), Some(Token)),
        (LMS, lms(&format!("{PATH}?token=")), Some(Token)),
        (LMS, lms(&format!("{PATH}?token")), Some(Token)),
        (
            LMS,
            lms(&format!("{PATH}?token=abc&token=def")),
            Some(Token),
        ),
        (
            LMS,
            lms(&format!("{PATH}?token=abc123&token=abc123")),
            Some(Token),
        ),
        (
            LMS,
            lms(&format!("{PATH}?token=abc123&next=https://evil.example")),
            Some(Token),
        ),
        (
            LMS,
            lms(&format!("{PATH}?next=x&token=abc123")),
            Some(Token),
        ),
        (LMS, lms(&format!("{PATH}?token=abc123&")), Some(Token)),
        (LMS, lms(&format!("{PATH}?%74oken=abc123")), Some(Token)),
        (LMS, lms(&format!("{PATH}?TOKEN=abc123")), Some(Token)),
        (LMS, lms(&format!("{PATH}?token=abc%20123")), Some(Token)),
        (LMS, lms(&format!("{PATH}?token=abc%00")), Some(Token)),
        (LMS, lms(&format!("{PATH}?tokens=abc123")), Some(Token)),
        // Fragments.
        (LMS, lms(&format!("{ok}#frag")), Some(Fragment)),
        (LMS, lms(&format!("{ok}#")), Some(Fragment)),
        (LMS, lms(&format!("{PATH}#?token=abc123")), Some(Fragment)),
        // Whitespace and control characters, which a parser would drop.
        (LMS, format!(" {}", lms(&ok)), Some(ControlCharacter)),
        (LMS, format!("{}\n", lms(&ok)), Some(ControlCharacter)),
        (LMS, format!("{}\r\n", lms(&ok)), Some(ControlCharacter)),
        (
            LMS,
            format!("https://lms.exa\tmple.com{ok}"),
            Some(ControlCharacter),
        ),
        (
            LMS,
            "java\nscript:alert(1)".to_string(),
            Some(ControlCharacter),
        ),
        (LMS, format!("{}\u{0}", lms(&ok)), Some(ControlCharacter)),
        (LMS, format!("{}\u{7f}", lms(&ok)), Some(ControlCharacter)),
        (
            LMS,
            format!("https://lms.example.com{PATH}?token=abc\u{3000}123"),
            Some(ControlCharacter),
        ),
    ]
}

fn label(v: Option<Rejection>) -> String {
    match v {
        None => "capability".into(),
        Some(r) => format!("{r:?}"),
    }
}

#[test]
fn hostile_urls_get_their_verdicts() {
    let variants = variants();
    assert!(variants.len() >= 40, "{} variants", variants.len());
    let rules = [(LMS, rule(LMS)), (LOOPBACK, rule(LOOPBACK))];
    let mut wrong = Vec::new();
    println!("| trusted origin | URL | verdict |\n|---|---|---|");
    for (origin, url, want) in &variants {
        let rule = &rules.iter().find(|(o, _)| o == origin).unwrap().1;
        let got = rule.validate_url(url).err();
        println!("| {origin} | `{}` | {} |", url.escape_debug(), label(got));
        if got != *want {
            wrong.push(format!(
                "{:?}: want {}, got {}",
                url,
                label(*want),
                label(got)
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    // Only the real ones pass.
    let passed = variants
        .iter()
        .filter(|(o, u, _)| {
            let rule = &rules.iter().find(|(r, _)| r == o).unwrap().1;
            rule.validate_url(u).is_ok()
        })
        .count();
    assert_eq!(passed, 2);
}

#[test]
fn the_envelope_decides_before_the_url() {
    use Rejection::*;
    let rule = rule(LMS);
    let url = format!("{LMS}{PATH}?token=abc123");
    let cases: Vec<(Value, Option<Rejection>)> = vec![
        (
            json!({"status": "OK", "data": {"jobId": "J42", "downloadUrl": url, "expiresAt": "2026-12-02T10:20:00Z"}}),
            None,
        ),
        (json!({"status": "OK", "data": {"downloadUrl": url}}), None),
        (
            json!({"status": "ok", "data": {"downloadUrl": url}}),
            Some(NotOk),
        ),
        (
            json!({"status": "ERROR", "data": {"downloadUrl": url}}),
            Some(NotOk),
        ),
        (json!({"data": {"downloadUrl": url}}), Some(NotOk)),
        (json!({"status": "OK", "data": "x"}), Some(DataNotObject)),
        (json!({"status": "OK", "data": [url]}), Some(DataNotObject)),
        (
            json!({"status": "OK", "downloadUrl": url}),
            Some(DataNotObject),
        ),
        (json!({"status": "OK", "data": {}}), Some(NoUrl)),
        (
            json!({"status": "OK", "data": {"downloadUrl": 42}}),
            Some(NoUrl),
        ),
        (
            json!({"status": "OK", "data": {"jobId": "J43", "downloadUrl": url}}),
            Some(JobMismatch),
        ),
        (
            json!({"status": "OK", "data": {"jobId": {"id": "J42"}, "downloadUrl": url}}),
            Some(JobMismatch),
        ),
        (
            json!({"status": "OK", "data": {"jobId": "J42", "downloadUrl": "javascript:alert(1)"}}),
            Some(Scheme),
        ),
    ];
    for (answer, want) in cases {
        let got = rule.validate_answer(&answer);
        assert_eq!(got.as_ref().err().copied(), want, "{answer}");
        if let Ok(c) = got {
            assert_eq!(c.url, url);
            assert_eq!(c.params, vec![("jobId".to_string(), "J42".to_string())]);
        }
    }
}

/// The demo's export tools through MCP, and its download URL over HTTP:
/// the confirm's answer is a capability by the validator's rule (the
/// demo's origin and path template), the URL answers a page that polls
/// while BUILDING, then a ZIP; a wrong token is 403 with no body.
#[tokio::test]
async fn the_demo_export_answers_a_capability_that_downloads_a_zip() {
    use std::time::Duration;
    use turnstile::mcp::{ServerSpec, ToolClient};
    use turnstile_demo::exports::EXPORT_PATH_TEMPLATE;
    use turnstile_demo::{DemoOptions, DemoServer};
    let options = DemoOptions {
        export_build_delay: Duration::from_millis(300),
        ..DemoOptions::default()
    };
    let demo = DemoServer::start("127.0.0.1:0".parse().unwrap(), options)
        .await
        .unwrap();
    let client = ToolClient::connect(&ServerSpec::http("demo", demo.url.clone()))
        .await
        .unwrap();
    let preview = client
        .call("export_all_lms_materials", Default::default())
        .await
        .unwrap()
        .json()
        .unwrap();
    assert_eq!(preview["status"], "OK");
    assert_eq!(preview["fileCount"], 14);
    let mut args = serde_json::Map::new();
    args.insert("exportId".into(), preview["exportId"].clone());
    let answer = client
        .call("confirm_lms_material_export", args)
        .await
        .unwrap()
        .json()
        .unwrap();
    let origin = demo.url.trim_end_matches("/mcp");
    let rule = CapabilityRule::new(origin, EXPORT_PATH_TEMPLATE, "token").unwrap();
    let cap = rule
        .validate_answer(&answer)
        .unwrap_or_else(|r| panic!("{r:?}: {answer}"));
    assert!(cap.expires_at.is_some());

    let http = crate::common::browser();
    let first = http.get(&cap.url).send().await.unwrap();
    assert_eq!(first.status().as_u16(), 200);
    assert!(first.text().await.unwrap().contains("BUILDING"));
    tokio::time::sleep(Duration::from_millis(350)).await;
    let zip = http.get(&cap.url).send().await.unwrap();
    assert_eq!(
        zip.headers()["content-type"].to_str().unwrap(),
        "application/zip"
    );
    let bytes = zip.bytes().await.unwrap();
    assert_eq!(&bytes[..4], b"PK\x03\x04");
    let end = bytes.len() - 22;
    assert_eq!(&bytes[end..end + 4], b"PK\x05\x06");
    assert_eq!(u16::from_le_bytes([bytes[end + 10], bytes[end + 11]]), 14);
    // Read by another implementation: Python's zipfile tests every CRC.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lecture-files.zip");
    std::fs::write(&path, &bytes).unwrap();
    let checked = std::process::Command::new("python3")
        .args(["-m", "zipfile", "-t"])
        .arg(&path)
        .output()
        .expect("python3 runs (scripts/test-deps installs it)");
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    let forged = cap.url.replace("token=", "token=0");
    let refused = http.get(&forged).send().await.unwrap();
    assert_eq!(refused.status().as_u16(), 403);
    assert!(refused.bytes().await.unwrap().is_empty());
    client.close().await;
    demo.shutdown().await;
}
