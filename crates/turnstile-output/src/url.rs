//! URLs in text: the one scanner that finds them, and the two ways they are
//! shown.
//!
//! A URL in free text (an HTTP client's error message, a tool's result, an
//! earlier answer) may carry a credential: userinfo, a token in the query, a
//! capability path. Everything that hides URLs finds them with [`spans`]:
//!
//! * [`scrub_urls`] keeps `scheme://host[:port]/path` ([`redact_url`]) — for
//!   logs and errors, where the server's address helps and its secrets must
//!   not appear;
//! * [`link_urls`] replaces each URL by `[link]` — for anything a model reads
//!   (`judge::digest`, `agent::history`): a capability URL is a bearer
//!   credential, its path included.
//!
//! **Where a URL starts and ends.** It starts at `http://` or `https://`
//! (any case). It ends before whitespace or one of ``" ' < > ` ) ]`` (a
//! character that quotes or closes around a URL in prose and in the error
//! messages we scrub), and a trailing `. , ; : ! ?` is the sentence's, not the
//! URL's. A comma *inside* a URL (`?ids=1,2`) stays in it, so no part of a
//! query is left behind.

use std::ops::Range;

/// The schemes a URL in text starts with (matched case-insensitively).
const SCHEMES: [&str; 2] = ["http://", "https://"];

/// A URL ends before any of these (or whitespace).
fn ends_url(c: char) -> bool {
    c.is_whitespace() || matches!(c, '"' | '\'' | '<' | '>' | '`' | ')' | ']')
}

/// Punctuation that ends a sentence or clause, not a URL, when it is last.
fn trails_url(c: char) -> bool {
    matches!(c, '.' | ',' | ';' | ':' | '!' | '?')
}

/// The byte range of every `http://` or `https://` URL in `text`, in order,
/// never overlapping.
pub fn spans(text: &str) -> impl Iterator<Item = Range<usize>> + '_ {
    let bytes = text.as_bytes();
    let mut at = 0;
    std::iter::from_fn(move || {
        let (start, scheme) = (at..bytes.len()).find_map(|i| {
            SCHEMES
                .iter()
                .find(|s| {
                    bytes
                        .get(i..i + s.len())
                        .is_some_and(|b| b.eq_ignore_ascii_case(s.as_bytes()))
                })
                .map(|s| (i, s.len()))
        })?;
        // `start` is on an ASCII `h`, so a char boundary.
        let tail = &text[start..];
        let mut end = tail.find(ends_url).unwrap_or(tail.len());
        while end > scheme && tail[..end].ends_with(trails_url) {
            end -= 1;
        }
        at = start + end.max(scheme);
        Some(start..start + end.max(scheme))
    })
}

/// `text` with every URL (as [`spans`] finds them) replaced by `shown(url)`.
pub fn replace_urls(text: &str, mut shown: impl FnMut(&str) -> String) -> String {
    let mut out = String::with_capacity(text.len());
    let mut last = 0;
    for span in spans(text) {
        out += &text[last..span.start];
        out += &shown(&text[span.clone()]);
        last = span.end;
    }
    out += &text[last..];
    out
}

/// `scheme://host[:port]/path` of `url`: no userinfo, query or fragment,
/// which may carry credentials or tokens. `None` when it does not parse (or
/// has no host): print nothing of it then.
pub fn redact_url(url: &str) -> Option<String> {
    let parsed = ::url::Url::parse(url.trim()).ok()?;
    let host = parsed.host_str()?;
    let port = parsed.port().map(|p| format!(":{p}")).unwrap_or_default();
    Some(format!(
        "{}://{host}{port}{}",
        parsed.scheme(),
        parsed.path()
    ))
}

/// Every URL in `text` (an error message of the HTTP client, which quotes
/// the URL it sent, query included), redacted with [`redact_url`]; one that
/// does not parse becomes `<url>`.
pub fn scrub_urls(text: &str) -> String {
    replace_urls(text, |url| {
        redact_url(url).unwrap_or_else(|| "<url>".into())
    })
}

/// Every URL in `text` becomes `[link]`: a capability URL is a bearer
/// credential and never goes to a model.
pub fn link_urls(text: &str) -> String {
    replace_urls(text, |_| "[link]".into())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(text: &str) -> Vec<&str> {
        spans(text).map(|r| &text[r]).collect()
    }

    #[test]
    fn one_scanner_for_both_kinds_of_text() {
        // Error messages (what `scrub_urls` used to end at: `)`, `` ` ``, `,`).
        assert_eq!(
            found("error sending request for url (HTTP://h/mcp?token=t): refused"),
            ["HTTP://h/mcp?token=t"]
        );
        assert_eq!(found("see `http://h/x?k=1`."), ["http://h/x?k=1"]);
        assert_eq!(found("url http://h/mcp, refused"), ["http://h/mcp"]);
        assert_eq!(found("url: \"http://h/a\"; b"), ["http://h/a"]);
        // Text a model reads (what `redact_urls` used to end at: `]`, `'`, `<`).
        assert_eq!(
            found("[https://x.example/cap/S]"),
            ["https://x.example/cap/S"]
        );
        assert_eq!(
            found("'https://a/b' <http://c/d>"),
            ["https://a/b", "http://c/d"]
        );
        assert_eq!(
            found("done: https://x/dl?token=S."),
            ["https://x/dl?token=S"]
        );
        // A comma or period inside a URL stays in it: no part of a query leaks.
        assert_eq!(
            found("https://x/dl?ids=1,2&t=S3 now"),
            ["https://x/dl?ids=1,2&t=S3"]
        );
        assert_eq!(found("https://x.io/a.b?c=1"), ["https://x.io/a.b?c=1"]);
        // Only the scheme is a URL too; it is never trimmed into.
        assert_eq!(found("see http://"), ["http://"]);
        assert_eq!(found("see http://."), ["http://"]);
        assert_eq!(found("no urls, ftp://x or http:/y"), Vec::<&str>::new());
        assert_eq!(found("é https://ü.example/ä ß"), ["https://ü.example/ä"]);
    }

    #[test]
    fn scrubbed_and_linked() {
        assert_eq!(
            scrub_urls("error sending request for url (HTTP://h/mcp?token=t): refused"),
            "error sending request for url (http://h/mcp): refused"
        );
        assert_eq!(
            scrub_urls("redirect to https://u:pw@o.example/x?k=s3cret, then `http://h/y#f`"),
            "redirect to https://o.example/x, then `http://h/y`"
        );
        assert_eq!(scrub_urls("see http://"), "see <url>");
        assert_eq!(scrub_urls("no urls here"), "no urls here");
        assert_eq!(
            link_urls("see https://x.example/cap/SECRET2 for it"),
            "see [link] for it"
        );
        assert_eq!(
            link_urls("[https://x/dl?token=A,B] and (http://y/z)."),
            "[[link]] and ([link])."
        );
    }
}
