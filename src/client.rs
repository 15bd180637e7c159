//! The HTTP client of `turnstile chat` and `turnstile resume`: who it calls
//! as (issue 20).
//!
//! - With `--token` (or `TURNSTILE_TOKEN`), every request carries the
//!   bearer; the server verifies it and the caller is that subject.
//! - Without, the caller is the server's anonymous session: the session
//!   cookie the server issues is kept in a file per server, so that a
//!   follow-up (`--thread`) in a new process is the same session and can
//!   reach the thread. The file is `$TURNSTILE_SESSION_DIR/<host>_<port>`
//!   (default `~/.turnstile/sessions/`), mode 0600 where the platform has
//!   modes. The token is never printed nor written anywhere.

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use reqwest::cookie::{CookieStore, Jar};
use reqwest::header::{HeaderMap, HeaderValue, AUTHORIZATION};

/// A client for `base`, and where its session lives when it has one.
pub struct Client {
    pub http: reqwest::Client,
    session: Option<(Arc<Jar>, reqwest::Url, PathBuf)>,
}

impl Client {
    /// A client that calls `base` with `token` as its bearer, or as the
    /// session stored for `base`.
    pub fn new(base: &str, token: Option<&str>) -> anyhow::Result<Client> {
        let url = reqwest::Url::parse(base).with_context(|| format!("`{base}` is not a URL"))?;
        if let Some(token) = token.map(str::trim).filter(|t| !t.is_empty()) {
            let mut headers = HeaderMap::new();
            let mut value = HeaderValue::from_str(&format!("Bearer {token}"))
                .context("the token is not a valid header value")?;
            value.set_sensitive(true);
            headers.insert(AUTHORIZATION, value);
            let http = reqwest::Client::builder()
                .default_headers(headers)
                .build()?;
            return Ok(Client {
                http,
                session: None,
            });
        }
        let jar = Arc::new(Jar::default());
        let file = session_file(&url);
        if let Some(f) = &file {
            if let Ok(cookie) = std::fs::read_to_string(f) {
                let cookie = cookie.trim();
                if !cookie.is_empty() && !cookie.contains(['\n', '\r']) {
                    jar.add_cookie_str(cookie, &url);
                }
            }
        }
        let http = reqwest::Client::builder()
            .cookie_provider(jar.clone())
            .build()?;
        Ok(Client {
            http,
            session: file.map(|f| (jar, url, f)),
        })
    }

    /// Keeps the session cookie the server issued for the next process.
    /// A file that cannot be written is a warning, not a failure: the turn
    /// ran, only a follow-up would start a new session.
    pub fn save(&self) {
        let Some((jar, url, file)) = &self.session else {
            return;
        };
        let Some(cookies) = jar.cookies(url) else {
            return;
        };
        let Ok(cookies) = cookies.to_str() else {
            return;
        };
        let Some(session) = (cookies.split(';'))
            .map(str::trim)
            .find(|c| c.starts_with(turnstile::http::SESSION_COOKIE))
        else {
            return;
        };
        if let Err(e) = write_private(file, session) {
            eprintln!(
                "warning: cannot keep the session in {}: {e}; a follow-up will start a new session",
                file.display()
            );
        }
    }
}

/// `$TURNSTILE_SESSION_DIR/<host>_<port>`, or under `~/.turnstile/sessions`.
fn session_file(url: &reqwest::Url) -> Option<PathBuf> {
    let dir = match std::env::var_os("TURNSTILE_SESSION_DIR") {
        Some(d) => PathBuf::from(d),
        None => PathBuf::from(std::env::var_os("HOME")?)
            .join(".turnstile")
            .join("sessions"),
    };
    let host: String = (url.host_str()?.chars())
        .map(
            |c| match c.is_ascii_alphanumeric() || c == '.' || c == '-' {
                true => c,
                false => '_',
            },
        )
        .collect();
    Some(dir.join(format!("{host}_{}", url.port_or_known_default()?)))
}

fn write_private(file: &std::path::Path, value: &str) -> std::io::Result<()> {
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let mut opts = std::fs::OpenOptions::new();
    opts.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut opts, 0o600);
    let mut f = opts.open(file)?;
    std::io::Write::write_all(&mut f, value.as_bytes())
}
